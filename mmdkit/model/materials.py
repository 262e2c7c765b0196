"""MMD's material rules, decided once for every consumer: a Model → plain per-material data.

In: a Model (PMX, PMD or built in code). Out: a ``MaterialTable`` — per material: its triangle
range, which passes draw it, culling (double-sided, and PMD's no-cull while translucent), shadow
casting/receiving, the image files it uses (main texture as a ``texture_path`` row and a stored
path, sphere map, toon file and the built-in toon to fall back on) — and ``blends``: whether a
material needs alpha blending where a consumer must choose one mode (glTF's alphaMode; MMD itself
always blends). Every PMD/PMX difference is decided here, so neither the renderer
(``mmdkit.render``) nor the glTF writer (``mmdkit.export.gltf``) nor ``mmdkit convert`` (the
texture files it carries) looks at ``Model.source_format``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.model import model as M

PMD_NO_SHADOW_CAST_ALPHA = 0.98  # MMD: a PMD material with diffuse alpha 0.98 casts no self-shadow


@dataclass(frozen=True)
class MaterialImages:
    """The image files one material draws with (stored paths inside the model folder).

    ``toon_optional``: the toon file may be absent without a warning (a PMD's shared toonNN.bmp,
    which MMD looks for in the model folder first); ``toon_builtin``: the built-in ramp used when
    there is no toon file (0 = MMD's default, 1..10 = toon01..toon10).
    """

    texture: str | None
    sphere: str | None
    toon: str | None
    toon_optional: bool
    toon_builtin: int


@dataclass(frozen=True)
class MaterialTable:
    """What each of the M materials draws, as the backend needs it.

    face_start: (M+1,) int32, triangle range [face_start[m], face_start[m+1]) of material m.
    texture: (M,) int32, row of the main texture in ``model.texture_path``; −1 for none (also
        when the index is out of range or names an empty path).
    double_sided: (M,) bool, drawn without back-face culling (glTF: doubleSided).
    double_sided_translucent: (M,) bool, also drawn without culling on frames where its diffuse
        alpha is below 1 (MMD's rule for PMD models).
    edge: (M,) bool, draws the outline pass; ground_shadow: (M,) bool, casts the ground shadow.
    shadow_cast: (M,) bool, drawn into the self-shadow map; shadow_skip_alpha: (M,) float64, a
        diffuse alpha at which it casts none (PMD: 0.98; NaN: none); shadow_receive: (M,) bool.
    sphere_mode: (M,) int32, SPHERE_* of the sphere map; images: (M,) MaterialImages.
    """

    face_start: np.ndarray
    texture: np.ndarray
    double_sided: np.ndarray
    double_sided_translucent: np.ndarray
    edge: np.ndarray
    ground_shadow: np.ndarray
    shadow_cast: np.ndarray
    shadow_skip_alpha: np.ndarray
    shadow_receive: np.ndarray
    sphere_mode: np.ndarray
    images: tuple[MaterialImages, ...]

    @property
    def num_materials(self) -> int:
        return len(self.images)

    def culls(self, m: int, alpha: float) -> bool:
        """True when material m, drawn with diffuse alpha ``alpha``, culls back faces."""
        return not (self.double_sided[m] or (self.double_sided_translucent[m] and alpha < 1.0))

    def casts_self_shadow(self, m: int, alpha: float) -> bool:
        """True when material m with diffuse alpha ``alpha`` is drawn into the self-shadow map."""
        return bool(self.shadow_cast[m]) and alpha > 0.0 and not abs(alpha - self.shadow_skip_alpha[m]) < 1e-6


def _row(paths, index) -> int:
    """``index`` when it names a non-empty stored path, else −1."""
    index = int(index)
    return index if 0 <= index < len(paths) and paths[index] else -1


def _stored(paths, index) -> str | None:
    row = _row(paths, index)
    return paths[row] if row >= 0 else None


def _images(model, m: int, pmd: bool) -> MaterialImages:
    paths = model.texture_path
    toon, optional = None, False
    if model.material_toon_shared[m]:
        k = int(np.clip(model.material_toon_index[m], 0, 9))
        builtin = 1 + k
        if pmd:  # MMD looks for a PMD's toon01..10.bmp in the model folder first; PMX's are MMD's
            toon, optional = f"toon{k + 1:02d}.bmp", True
    else:
        toon, builtin = _stored(paths, model.material_toon_index[m]), 0
    return MaterialImages(texture=_stored(paths, model.material_texture_index[m]),
                          sphere=_stored(paths, model.material_sphere_index[m]),
                          toon=toon, toon_optional=optional, toon_builtin=builtin)


def material_table(model) -> MaterialTable:
    """The MaterialTable of ``model`` (PMD rules applied where the model came from a .pmd)."""
    pmd = model.source_format == "pmd"
    flags = np.asarray(model.material_flags, np.uint32)
    Mn = model.num_materials
    return MaterialTable(
        face_start=np.asarray(model.material_face_start, np.int32),
        texture=np.array([_row(model.texture_path, t) for t in model.material_texture_index], np.int32),
        double_sided=(flags & M.MATERIAL_DOUBLE_SIDED) != 0,
        double_sided_translucent=np.full(Mn, pmd),
        edge=(flags & M.MATERIAL_EDGE) != 0,
        ground_shadow=(flags & M.MATERIAL_GROUND_SHADOW) != 0,
        shadow_cast=(flags & M.MATERIAL_SELF_SHADOW_MAP) != 0,
        shadow_skip_alpha=np.full(Mn, PMD_NO_SHADOW_CAST_ALPHA if pmd else np.nan, np.float64),
        shadow_receive=(flags & M.MATERIAL_SELF_SHADOW) != 0,
        sphere_mode=np.asarray(model.material_sphere_mode, np.int32),
        images=tuple(_images(model, m, pmd) for m in range(Mn)))


def blends(alpha: float, texture_transparent: bool) -> bool:
    """True when a material with diffuse alpha ``alpha`` whose texture has transparent pixels
    (``texture_transparent``) must be alpha-blended; False: drawing it opaque looks the same."""
    return bool(alpha < 1.0 or texture_transparent)
