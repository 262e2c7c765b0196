"""Textures for the renderer: safe, case-insensitive lookup inside the model's folder.

In: the model folder and its stored texture paths ('\\' separators, any case), and the images an
imported model carries itself (``source_extras['embedded_textures']``: name → encoded bytes).
Out: moderngl textures (RGBA8, mipmapped), or None with a warning when missing/unreadable.
Paths that would leave the model's folder (absolute, '..') are refused.
``read_texture`` is the one decoder of texture files (renderer, glTF export): images wider or
taller than ``MAX_TEXTURE_EDGE`` (4096) pixels are downscaled to fit, with one warning naming the
file; the size is read from the header before any pixel is decoded, and Pillow's decompression-
bomb limit becomes a FormatError (its warning is never shown raw).
Also builds MMD's shared toon ramps (toon01–10) in code.
"""

from __future__ import annotations

import io
import math
import os
import warnings

import numpy as np

from mmdkit.errors import FormatError


def resolve_texture(folder: str, stored: str) -> str | None:
    """The real path of ``stored`` inside ``folder`` (case-insensitive), or None.

    Raises FormatError when the path points outside the folder — checked at every step, so a
    link out of the folder is refused before anything behind it is listed.
    """
    rel = stored.replace("\\", "/").strip()
    if not rel:
        return None
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":") or ".." in parts:
        raise FormatError(f"texture path '{stored}' leaves the model folder")
    root = os.path.realpath(folder)
    cur = root
    for part in parts:
        try:
            names = os.listdir(cur)
        except OSError:
            return None
        match = next((n for n in names if n == part), None) or next(
            (n for n in names if n.lower() == part.lower()), None)
        if match is None:
            return None
        cur = os.path.realpath(os.path.join(cur, match))
        if not cur.startswith(root + os.sep):
            raise FormatError(f"texture path '{stored}' leaves the model folder (via a link)")
    return cur if os.path.isfile(cur) else None


def texture_source(stored: str, folder: str | None, embedded: dict[str, bytes] | None):
    """Where texture ``stored`` comes from: the image the model file holds (``embedded``, name →
    encoded bytes) as a BytesIO, else its real path inside ``folder`` (``resolve_texture``), else
    None (not found, or no folder). FormatError when the path leaves the folder."""
    if embedded and stored in embedded:
        return io.BytesIO(embedded[stored])
    return resolve_texture(folder, stored) if folder else None


#: Longest side, in pixels, of a texture as mmdkit draws or exports it; larger images are downscaled
#: (aspect kept). 4096² RGBA is 64 MiB (85 with mipmaps); MMD models' textures are rarely above 2048.
MAX_TEXTURE_EDGE = 4096


def _shrunk(im, target: tuple[int, int]):
    """A loaded Pillow image reduced to fit ``target`` (w, h): first by a whole factor on the image's
    own pixels, one band at a time for RGBA/LA (Pillow's own reduce would first copy the whole image
    premultiplied), by nearest pixel for modes reduce does not take (palette, 16-bit); then
    resampled to fit."""
    from PIL import Image

    factor = max(1, min(im.size[0] // target[0], im.size[1] // target[1]))
    if factor > 1:
        if im.mode in ("RGB", "L"):
            im = im.reduce(factor)
        elif im.mode in ("RGBA", "LA"):
            im = Image.merge(im.mode, [im.getchannel(b).reduce(factor) for b in range(len(im.mode))])
        else:
            im = im.resize((im.size[0] // factor, im.size[1] // factor), Image.NEAREST)
    if im.mode not in ("RGB", "RGBA", "L", "LA"):
        im = im.convert("RGBA")
    return im.resize(target, Image.LANCZOS) if im.size != target else im


def _bomb(name: str) -> FormatError:
    """The one refusal line for an image over Pillow's decompression-bomb limit."""
    from PIL import Image

    return FormatError(f"texture '{name}' has more than {2 * Image.MAX_IMAGE_PIXELS:,} pixels "
                       "(a decompression bomb?); refused")


def read_texture(source, name: str):
    """Decode texture ``name`` from ``source`` (a path or a binary file object) → (a loaded Pillow
    image, at most ``MAX_TEXTURE_EDGE`` pixels on a side; a warning line when it was downscaled,
    else None). Raises FormatError for an image over Pillow's decompression-bomb limit (twice
    ``Image.MAX_IMAGE_PIXELS``), Pillow's own errors (OSError, ValueError, ...) for unreadable bytes."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our cap below says it in one line
        try:
            im = Image.open(source)
        except Image.DecompressionBombError:
            raise _bomb(name) from None
        with im:
            w, h = im.size  # from the header: nothing decoded yet
            scale = MAX_TEXTURE_EDGE / max(w, h, 1)
            try:
                if scale >= 1:
                    im.load()
                    return im, None
                target = (max(1, math.floor(w * scale)), max(1, math.floor(h * scale)))
                im.draft(None, target)  # JPEG decodes at 1/2, 1/4 or 1/8 scale when that still covers target
                im.load()
                out = _shrunk(im, target)
            except MemoryError:
                raise FormatError(f"texture '{name}' ({w}×{h} pixels) needs more memory than is available "
                                  "to decode") from None
            except Image.DecompressionBombError:  # a frame or tile larger than the header said
                raise _bomb(name) from None
    return out, (f"texture '{name}' is {w}×{h} pixels, larger than {MAX_TEXTURE_EDGE} on a side; "
                 f"downscaled to {out.size[0]}×{out.size[1]}")


def model_folder(model) -> str | None:
    """The folder a model's texture paths are relative to (None for a model built in code); a
    bare file name ('Gene.pmx') means the current folder."""
    return os.path.dirname(os.path.abspath(model.source_path)) if model.source_path else None


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
