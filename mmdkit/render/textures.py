"""Textures for the renderer: each material's images as moderngl textures.

In: a ``MaterialTable`` (which image files each material uses), the model folder and the images
an imported model carries itself. Files are found and decoded by ``mmdkit.model.textures``
(case-insensitive lookup that never leaves the folder; at most ``MAX_TEXTURE_EDGE`` pixels a
side). Out: moderngl textures (RGBA8, mipmapped), or None with a warning when missing/unreadable.
Also builds MMD's shared toon ramps (toon01–10) in code.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.model.textures import read_texture, texture_source


def toon_ramp(i: int) -> bytes:
    """(64, 1) RGBA ramp for shared toon i (0 = default, 1..10 = toon01..toon10): bright at
    the top (lit), a soft step to a darker, slightly tinted shade at the bottom."""
    v = np.linspace(0, 1, 64)
    shade = 0.72 + 0.02 * ((i * 7) % 10) if i else 0.8
    step = 1 / (1 + np.exp(-(v - 0.5) * 24))
    col = 1.0 - (1.0 - shade) * step
    tint = np.array([1.0, 0.97, 1.0])
    rgb = np.clip(col[:, None] * np.where(step[:, None] > 0.5, tint, 1.0), 0, 1)
    rgba = np.concatenate([rgb, np.ones((64, 1))], axis=1)[::-1]  # stored bottom-up like a loaded image
    return (rgba * 255).astype(np.uint8).tobytes()


class TextureCache:
    """Loads each stored texture once per context; remembers what was missing or unreadable."""

    def __init__(self, ctx, folder: str | None, embedded: dict[str, bytes] | None = None):
        self.ctx = ctx
        self.folder = folder
        self.embedded = embedded or {}  # images the model file holds (glTF), by stored name
        self._cache: dict[tuple[str, bool], object] = {}
        self.missing: list[str] = []  # stored names not found (or no folder to look in)
        self.problems: list[str] = []  # one line per refused or unreadable image

    def by_name(self, name: str, *, clamp: bool = False, missing_ok: bool = False):
        """The texture file ``name`` in the model folder, loaded once (None when absent)."""
        if not name:
            return None
        key = (name.lower(), clamp)
        if key in self._cache:
            return self._cache[key]
        tex = None
        try:
            path = texture_source(name, self.folder, self.embedded)
            if path is None:
                if not missing_ok and name not in self.missing:
                    self.missing.append(name)
            else:
                tex = self._load(name, path, clamp)
        except FormatError as e:  # refused: leaves the model folder
            self.problems.append(str(e))
        except Exception as e:  # unreadable image: warn, draw without
            self.problems.append(f"texture '{name}' could not be read ({e}); drawn without")
        self._cache[key] = tex
        return tex

    def _load(self, name: str, path, clamp: bool):
        from PIL import Image

        im, note = read_texture(path, path if isinstance(path, str) else name)
        if note:
            self.problems.append(note)
        with im:
            im = im.convert("RGBA").transpose(Image.FLIP_TOP_BOTTOM)
            tex = self.ctx.texture(im.size, 4, im.tobytes())
        tex.build_mipmaps()
        if clamp:
            tex.repeat_x = tex.repeat_y = False
        return tex

    def warnings(self) -> list[str]:
        """One line for all missing images, then one per refused or unreadable image."""
        out = []
        if self.missing:
            names = ", ".join(f"'{n}'" for n in self.missing)
            where = f"in {self.folder}" if self.folder else "(the model was not read from a file: no folder)"
            out.append(f"{len(self.missing)} texture{'s' if len(self.missing) > 1 else ''} not found {where}: "
                       f"{names}; drawn without")
        return out + self.problems


class MaterialTextures:
    """The GL textures each material draws with, resolved from a ``MaterialTable``'s image keys.

    ``of(m)`` → (texture | None, sphere | None, toon); ``white`` stands in for a missing image;
    ``warnings`` lists images that were missing or unreadable.
    """

    def __init__(self, ctx, table, folder: str | None, embedded: dict[str, bytes] | None = None):
        self.cache = TextureCache(ctx, folder, embedded)
        builtin = [ctx.texture((1, 64), 4, toon_ramp(i)) for i in range(11)]
        for t in builtin:  # clamped like MMD's toon sampler: the lit end must not wrap to the dark one
            t.repeat_x = t.repeat_y = False
        self.white = ctx.texture((1, 1), 4, bytes([255, 255, 255, 255]))
        self._per_material = []
        for im in table.images:
            tex = self.cache.by_name(im.texture) if im.texture else None
            sphere = self.cache.by_name(im.sphere) if im.sphere else None
            toon = self.cache.by_name(im.toon, clamp=True, missing_ok=im.toon_optional) if im.toon else None
            self._per_material.append((tex, sphere, toon or builtin[im.toon_builtin]))
        self.warnings = self.cache.warnings()

    def of(self, m: int):
        return self._per_material[m]
