"""VPD (Vocaloid Pose Data, cp932 text) reader and writer: bytes ⇄ ``Pose``.

In (read): the bytes of a .vpd file. Out: a frozen ``Pose`` (P bones: translation (P, 3)
float32, rotation (P, 4) float32 xyzw; Q morphs: weight (Q,) float32). Text is cp932, with a
UTF-8 fallback; ``//`` comments are ignored. A bone count that disagrees with the blocks found
is a warning; NaN, infinity and magnitudes beyond 1e6 (translations, weights) or 1e9 (rotation
components) are refused. The original bytes are kept and written back when the pose is unchanged.
"""

from __future__ import annotations

import re

import numpy as np

from mmdkit.animation.motion import Pose, freeze
from mmdkit.errors import FormatError
from mmdkit.model.build import MAX_COORDINATE, MAX_NUMBER
from mmdkit.text import decode_document, encode_cp932

MAGIC = "Vocaloid Pose Data file"
# A block's name line and body cannot contain braces, so a block left open stops at the next
# brace: every character is scanned a bounded number of times (linear, however many blocks).
_BLOCK = re.compile(r"(Bone|Morph)(\d+)\s*\{([^\r\n{}]*)\r?\n([^{}]*)\}", re.ASCII)
_COMMENT = re.compile(r"//[^\r\n]*")
_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)
_COUNT = re.compile(r"[0-9]{1,9}", re.ASCII)


def read_vpd(data: bytes, path: str = "") -> Pose:
    """Parse a VPD file into a frozen ``Pose``."""
    text, enc, w = decode_document(data)
    warnings = [w] if w else []
    if not text.lstrip("\ufeff").startswith(MAGIC):
        raise FormatError(f"not a VPD file (expected {MAGIC!r} on the first line)", path=path, section="header",
                          offset=0)

    def byte_at(pos):
        return len(text[:pos].encode(enc, errors="replace"))

    body = _COMMENT.sub(lambda m: " " * len(m.group(0)), text)  # keep positions
    head_end = body.find("{")
    head = body[len(MAGIC):head_end if head_end >= 0 else len(body)]
    parts = [p.strip() for p in head.split(";")]
    model = parts[0] if parts else ""
    if model.lower().endswith(".osm"):
        model = model[:-4]
    declared = None
    if len(parts) > 1 and parts[1].isdigit():  # anything else (no count line) is ignored
        if not _COUNT.fullmatch(parts[1]):
            shown = parts[1] if len(parts[1]) <= 20 else parts[1][:20] + "…"
            raise FormatError(f"bone count {shown!r} is not a number of at most 9 ASCII digits", path=path,
                              section="header", offset=byte_at(body.find(parts[1])))
        declared = int(parts[1])
    bones, tr, rot, morphs, weights = [], [], [], [], []
    for m in _BLOCK.finditer(body):
        kind, name, vals = m.group(1), m.group(3).strip(), _NUM.findall(m.group(4))
        need = 7 if kind == "Bone" else 1
        if len(vals) != need:
            raise FormatError(f"{kind}{m.group(2)} {name!r} has {len(vals)} numbers, expected {need}", path=path,
                              section="bones" if kind == "Bone" else "morphs", offset=byte_at(m.start()))
        v = [float(x) for x in vals]
        with np.errstate(over="ignore"):
            as_f32 = np.array(v, np.float32)
        # as build_model / build_motion refuse NaN, inf and huge values in the other formats
        bounds = np.array([MAX_COORDINATE] * 3 + [MAX_NUMBER] * 4 if kind == "Bone" else [MAX_COORDINATE])
        bad = ~(np.abs(as_f32) <= bounds)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            unit = " MMD units" if kind == "Bone" and j < 3 else ""
            detail = (f"value {v} is not finite" if not np.isfinite(as_f32).all()
                      else f"value {v} is beyond ±{bounds[j]:g}{unit}")
            raise FormatError(f"{kind}{m.group(2)} {name!r}: {detail}", path=path,
                              section="bones" if kind == "Bone" else "morphs", offset=byte_at(m.start()))
        if kind == "Bone":
            bones.append(name)
            tr.append(v[:3])
            rot.append(v[3:])
        else:
            morphs.append(name)
            weights.append(v[0])
    stray = body.count("{") - len(bones) - len(morphs)
    if stray:
        raise FormatError(f"{stray} malformed block(s) (expected 'BoneN{{name' ... '}}')", path=path,
                          section="bones", offset=byte_at(body.find("{")))
    if declared is not None and declared != len(bones):
        warnings.append(f"header declares {declared} bones, the file has {len(bones)}")
    pose = Pose(model_name=model, bone_name=tuple(bones), bone_translation=np.array(tr, np.float32).reshape(-1, 3),
                bone_rotation=np.array(rot, np.float32).reshape(-1, 4), morph_name=tuple(morphs),
                morph_weight=np.array(weights, np.float32), source_path=str(path),
                source_extras={"format": "vpd", "encoding": enc, "text": data}, warnings=tuple(warnings))
    pose.source_extras["fingerprint"] = _fingerprint(pose)
    return freeze(pose)


def _fingerprint(p: Pose):
    return (p.model_name, p.bone_name, p.morph_name, p.bone_translation.tobytes(), p.bone_rotation.tobytes(),
            p.morph_weight.tobytes())


def write_vpd(pose: Pose) -> bytes:
    """Serialise a ``Pose`` as MMD writes VPD (cp932, CRLF); an unchanged pose read from a
    file gives its original bytes."""
    ex = pose.source_extras or {}
    if ex.get("text") is not None and ex.get("fingerprint") == _fingerprint(pose):
        return ex["text"]
    nl = "\r\n"
    out = [MAGIC, "", f"{pose.model_name}.osm;\t\t// 親ファイル名", f"{pose.num_bones};\t\t\t\t// 総ポーズボーン数", ""]
    for i, name in enumerate(pose.bone_name):
        t, q = pose.bone_translation[i], pose.bone_rotation[i]
        out += [f"Bone{i}{{{name}",
                f"  {t[0]:.6f},{t[1]:.6f},{t[2]:.6f};\t\t\t\t// trans x,y,z",
                f"  {q[0]:.6f},{q[1]:.6f},{q[2]:.6f},{q[3]:.6f};\t\t// Quaternion x,y,z,w", "}", ""]
    for i, name in enumerate(pose.morph_name):
        out += [f"Morph{i}{{{name}", f"  {pose.morph_weight[i]:.6f};\t\t\t\t// weight", "}", ""]
    return encode_cp932(nl.join(out))
