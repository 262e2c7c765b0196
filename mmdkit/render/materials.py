"""One frame's material values for the renderer: colours after material morphs.

In: a Model or a posed Character. Out: ``MaterialValues`` (float32 per-material colours and the
texture/sphere/toon tints of material morphs). The per-material rules (passes, culling, shadows,
images) are ``mmdkit.model.materials.material_table``'s, shared with the glTF writer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TINTS = ("texture", "sphere", "toon")


@dataclass(frozen=True)
class MaterialValues:
    """One frame's material values (after material morphs), float32 arrays over M materials.

    diffuse (M,4) RGBA, specular (M,3), specular_power (M,), ambient (M,3), edge_color (M,4),
    edge_size (M,); tints: {'texture'|'sphere'|'toon': (mul (M,4), add (M,4))}, or {} for none.
    """

    diffuse: np.ndarray
    specular: np.ndarray
    specular_power: np.ndarray
    ambient: np.ndarray
    edge_color: np.ndarray
    edge_size: np.ndarray
    tints: dict

    @classmethod
    def of_model(cls, model) -> MaterialValues:
        """The model's own values (no material morph)."""
        return cls(model.material_diffuse, model.material_specular, model.material_specular_power,
                   model.material_ambient, model.material_edge_color, model.material_edge_size, {})

    @classmethod
    def of_character(cls, ch, out: MaterialValues | None = None) -> MaterialValues:
        """A copy of a Character's current values (safe to keep while it poses the next frame);
        ``out``: an earlier copy of the same model's values to overwrite (and return) instead of
        allocating new arrays (a frame loop keeps two and fills them in turn)."""
        if out is not None:
            for dst, src in zip((out.diffuse, out.specular, out.specular_power, out.ambient, out.edge_color,
                                 out.edge_size), (ch.material_diffuse, ch.material_specular, ch.material_specular_power,
                                                  ch.material_ambient, ch.material_edge_color, ch.material_edge_size)):
                np.copyto(dst, src)
            for k in TINTS:
                for dst, src in zip(out.tints[k], ch.material_tint(k)):
                    np.copyto(dst, src)
            return out
        return cls(ch.material_diffuse.copy(), ch.material_specular.copy(), ch.material_specular_power.copy(),
                   ch.material_ambient.copy(), ch.material_edge_color.copy(), ch.material_edge_size.copy(),
                   {k: tuple(a.copy() for a in ch.material_tint(k)) for k in TINTS})
