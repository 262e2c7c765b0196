"""Texture files of a model: where a stored texture path leads, its bytes, its decoded image.

In: the model's folder (``model_folder``) and a stored texture path ('\\' separators, any case),
and the images an imported model carries itself (``source_extras['embedded_textures']``: name →
encoded bytes). Out: ``texture_source`` → the embedded image (BytesIO) or the real file inside the
folder (case-insensitive lookup; paths that would leave the folder — absolute, '..', a link out —
raise FormatError); ``texture_bytes`` → the encoded bytes (a file read no further than the size it
had when opened); ``read_texture`` → the one decoder of texture files (renderer, glTF export):
images wider or taller than ``MAX_TEXTURE_EDGE`` (4096) pixels are downscaled to fit, with one
warning naming the file; the size is read from the header before any pixel is decoded, and
Pillow's decompression-bomb limit becomes a FormatError (its warning is never shown raw).
Which textures a material uses is ``mmdkit.model.materials``'s.
"""

from __future__ import annotations

import io
import math
import os
import warnings

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


def texture_bytes(stored: str, folder: str | None, embedded: dict[str, bytes] | None) -> bytes | None:
    """The encoded bytes of texture ``stored`` (found as ``texture_source`` finds it; a file is
    read no further than the size it had when opened), or None when not found. FormatError when
    the path leaves the folder; OSError when the file cannot be read."""
    source = texture_source(stored, folder, embedded)
    if source is None or isinstance(source, io.BytesIO):
        return None if source is None else source.getvalue()
    with open(source, "rb") as f:
        return f.read(os.fstat(f.fileno()).st_size)


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
