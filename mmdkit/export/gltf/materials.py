"""MMD materials → glTF metallic-roughness materials with their textures as images.

In: a ``Model`` (its material rules from ``mmdkit.model.materials.material_table``, the one table
the renderer draws by; texture files found and read by ``mmdkit.model.textures``) and a
``GltfDocument``. Out: one glTF material per MMD material (index list, None for none):
baseColorFactor = diffuse RGBA, baseColorTexture = the main texture, metallic 0, roughness 1,
doubleSided = the table's ``double_sided`` (MMD's no-cull flag), alphaMode BLEND where
``blends``: the diffuse alpha is below 1 or the texture has transparent pixels (MMD always
blends). PNG (less its colour-space chunks) and JPEG files are embedded as they are; BMP, TGA,
DDS and the rest are converted to PNG with Pillow; images over ``MAX_TEXTURE_EDGE`` (4096)
pixels on a side are downscaled (one warning each). Sphere maps and toon ramps have no glTF
counterpart and are left out. Textures missing or unreadable: one warning naming them.
"""

from __future__ import annotations

import io
import struct

import numpy as np

from mmdkit.model.materials import blends, material_table
from mmdkit.model.textures import model_folder, read_texture, texture_bytes

PNG_MAGIC, JPEG_MAGIC = b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"
COLOUR_SPACE_CHUNKS = (b"iCCP", b"cHRM", b"gAMA", b"sRGB")
SHOWN = 5
"""Texture names a warning lists before '(+N more)'."""


def _has_transparency(img) -> bool:
    """True when a decoded Pillow image has a pixel with alpha below 255."""
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        return img.convert("RGBA").getchannel("A").getextrema()[0] < 255
    return False


def plain_png(data: bytes) -> bytes:
    """PNG bytes without colour-space chunks (iCCP, cHRM, gAMA, sRGB): glTF images are sRGB and
    readers ignore them (the Khronos validator warns about them); pixels untouched. Bytes that do
    not parse as PNG chunks come back as they are."""
    out, i = [data[:8]], 8
    while i + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[i:i + 8])
        end = i + 12 + length
        if end > len(data):
            return data
        if kind not in COLOUR_SPACE_CHUNKS:
            out.append(data[i:end])
        i = end
        if kind == b"IEND":
            return b"".join(out)
    return data


def encode_image(data: bytes, name: str = "") -> tuple[bytes, str, bool, str | None]:
    """Encoded image file bytes → (PNG or JPEG bytes, mime type, has transparent pixels, warning
    line or None). PNG/JPEG within ``MAX_TEXTURE_EDGE`` pass through unchanged; larger images are
    downscaled (``read_texture``: the warning says so) and, like other formats Pillow reads,
    re-encoded (JPEG stays JPEG). Raises OSError/ValueError (Pillow's, or FormatError) when the
    bytes are no image Pillow reads or exceed its decompression-bomb limit."""
    img, note = read_texture(io.BytesIO(data), name)
    with img:
        clear = _has_transparency(img)
        if note is None and data.startswith(PNG_MAGIC):
            return plain_png(data), "image/png", clear, None
        if data.startswith(JPEG_MAGIC):
            if note is None:
                return data, "image/jpeg", False, None
            out = io.BytesIO()
            img.convert("RGB").save(out, format="JPEG", quality=92)
            return out.getvalue(), "image/jpeg", False, note
        out = io.BytesIO()
        keep = img if img.mode in ("RGB", "RGBA", "L", "LA") else img.convert("RGBA" if clear else "RGB")
        keep.save(out, format="PNG")
        return out.getvalue(), "image/png", clear, note


def add_textures(doc, model, used: set[int], warn) -> dict[int, tuple[int, bool]]:
    """glTF textures for the model's textures ``used``: {texture index: (glTF texture, transparent)}.
    Textures not found, outside the model's folder or unreadable: one warning listing them."""
    out: dict[int, tuple[int, bool]] = {}
    sampler, problems = None, []
    folder, embedded = model_folder(model), (model.source_extras or {}).get("embedded_textures")
    for t in sorted(used):
        stored = model.texture_path[t]
        try:
            data = texture_bytes(stored, folder, embedded)
            if data is None:
                problems.append(f"'{stored}' (not found)")
                continue
            encoded, mime, clear, note = encode_image(data, stored.replace("\\", "/"))
        except (OSError, ValueError, SyntaxError) as e:
            problems.append(f"'{stored}' ({e})")
            continue
        if note:
            warn(f"{model.source_path or model.name}: {note}")
        if sampler is None:
            sampler = doc.add("samplers", {"magFilter": 9729, "minFilter": 9987, "wrapS": 10497, "wrapT": 10497})
        image = doc.image(encoded, mime, name=stored.replace("\\", "/"))
        out[t] = (doc.add("textures", {"sampler": sampler, "source": image}), clear)
    if problems:
        shown = ", ".join(problems[:SHOWN]) + (f" (+{len(problems) - SHOWN} more)" if len(problems) > SHOWN else "")
        warn(f"{model.source_path or model.name}: {len(problems)} textures exported without their image: {shown}")
    return out


def add_materials(doc, model, warn) -> list[int | None]:
    """One glTF material per MMD material; returns their indices (in model material order)."""
    table = material_table(model)
    textures = add_textures(doc, model, {int(t) for t in table.texture if t >= 0}, warn)
    diffuse = np.clip(np.nan_to_num(np.asarray(model.material_diffuse, np.float64)), 0.0, 1.0)
    out = []
    for m in range(model.num_materials):
        pbr = {"baseColorFactor": [float(v) for v in diffuse[m]], "metallicFactor": 0.0, "roughnessFactor": 1.0}
        tex = textures.get(int(table.texture[m]))
        if tex is not None:
            pbr["baseColorTexture"] = {"index": tex[0]}
        mat = {"name": model.material_name[m], "pbrMetallicRoughness": pbr,
               "doubleSided": bool(table.double_sided[m])}
        if blends(diffuse[m, 3], tex is not None and tex[1]):
            mat["alphaMode"] = "BLEND"
        out.append(doc.add("materials", mat))
    return out
