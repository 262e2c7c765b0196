"""VMD reader and writer: bytes ⇄ ``Motion`` (bone, morph, camera, light, self-shadow and
property/IK keys).

In (read): the bytes of a .vmd file. Out: a frozen ``Motion`` with per-track key arrays read
by numpy structured dtypes (no Python loop per key). Raw name fields and the 64-byte bone
interpolation blocks are kept, so ``write_vmd(read_vmd(b)) == b`` for well-formed files.

Quirks (see docs/formats.md): a header without " 0002" ("Vocaloid Motion Data" + NULs) is read
as the 20-byte-name layout with a warning; the old "Vocaloid Motion Data file" header uses a
10-byte model name; sections missing at the end of the file are empty; bytes after the last
section are kept in ``source_extras['trailing']`` with a warning and written back.
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.build import build_motion
from mmdkit.animation.curves import PHYSICS_OFF, bone_key_physics
from mmdkit.animation.motion import Motion
from mmdkit.formats.binary import BinaryReader, BinaryWriter
from mmdkit.text import decode_cp932, decode_field, encode_cp932, encode_field, strip_field

MAGIC_NEW = b"Vocaloid Motion Data 0002"
MAGIC_OLD = b"Vocaloid Motion Data file"

BONE_KEY = np.dtype([("name", "u1", 15), ("frame", "<u4"), ("t", "<f4", 3), ("q", "<f4", 4), ("ip", "u1", 64)])
MORPH_KEY = np.dtype([("name", "u1", 15), ("frame", "<u4"), ("w", "<f4")])
CAMERA_KEY = np.dtype([("frame", "<u4"), ("d", "<f4"), ("p", "<f4", 3), ("r", "<f4", 3), ("ip", "u1", 24),
                       ("fov", "<u4"), ("persp", "u1")])
LIGHT_KEY = np.dtype([("frame", "<u4"), ("c", "<f4", 3), ("d", "<f4", 3)])
SHADOW_KEY = np.dtype([("frame", "<u4"), ("mode", "u1"), ("d", "<f4")])

def _tracks(names: np.ndarray, warnings: list, what: str):
    """(K, n) uint8 name fields → (track index per key, names, stripped bytes) in first-seen order."""
    k, n = names.shape
    if k == 0:
        return np.zeros(0, np.int32), (), ()
    clean = np.where(np.cumsum(names == 0, axis=1) > 0, 0, names).astype(np.uint8)
    keys = np.ascontiguousarray(clean).view(f"S{n}").reshape(k)
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    track = rank[inv.reshape(-1)]
    raw = tuple(bytes(uniq[i]) for i in order)
    out = []
    for b in raw:
        s, w = decode_cp932(b)
        if w:
            warnings.append(f"{what}: {w}")
        out.append(s)
    return track, tuple(out), raw


def read_vmd(data: bytes, path: str = "") -> Motion:
    """Parse a VMD file into a frozen ``Motion``."""
    r = BinaryReader(data, path)
    r.section = "header"
    head = r.raw(30)
    extras: dict = {"format": "vmd"}
    if head.startswith(MAGIC_NEW):
        name_len, version = 20, "0002"
    elif head.startswith(MAGIC_OLD):
        name_len, version = 10, "0001"
    elif head.startswith(b"Vocaloid Motion Data"):
        name_len, version = 20, "unversioned"
        r.warnings.append('header lacks the " 0002" version tag; read with the 20-byte model name layout')
    else:
        raise r.error(f"not a VMD file (header {head[:25]!r})", 0)
    extras["header"] = head
    extras["version"] = version
    raw_name = r.raw(name_len)
    extras["model_name_field"] = raw_name
    model_name, model_name_bytes, w = decode_field(raw_name)
    if w:
        r.warnings.append(f"model name: {w}")
    f: dict = {"model_name": model_name, "model_name_bytes": model_name_bytes}

    def section(name, dtype):
        r.section = name
        if r.remaining == 0:
            extras.setdefault("missing_sections", []).append(name)
            return np.zeros(0, dtype)
        if r.remaining < 4:
            raise r.error(f"{r.remaining} stray bytes where the {name} count should be")
        n = r.u32_count(dtype.itemsize, name[:-1] if name.endswith("s") else name)
        return r.array(dtype, n)

    bk = section("bone keys", BONE_KEY)
    track, names, raw = _tracks(bk["name"], r.warnings, "bone keys")
    ip = np.ascontiguousarray(bk["ip"])
    f.update(bone_track_name=names, bone_track_name_bytes=raw, bone_key_track=track,
             bone_key_frame=np.ascontiguousarray(bk["frame"]), bone_key_translation=np.ascontiguousarray(bk["t"]),
             bone_key_rotation=np.ascontiguousarray(bk["q"]), bone_key_interpolation=ip,
             bone_key_physics=bone_key_physics(ip))
    extras["bone_key_name_field"] = bk["name"]

    mk = section("morph keys", MORPH_KEY)
    track, names, raw = _tracks(mk["name"], r.warnings, "morph keys")
    f.update(morph_track_name=names, morph_track_name_bytes=raw, morph_key_track=track,
             morph_key_frame=np.ascontiguousarray(mk["frame"]), morph_key_weight=np.ascontiguousarray(mk["w"]))
    extras["morph_key_name_field"] = mk["name"]

    ck = section("camera keys", CAMERA_KEY)
    f.update(camera_key_frame=np.ascontiguousarray(ck["frame"]), camera_key_distance=np.ascontiguousarray(ck["d"]),
             camera_key_position=np.ascontiguousarray(ck["p"]), camera_key_rotation=np.ascontiguousarray(ck["r"]),
             camera_key_interpolation=np.ascontiguousarray(ck["ip"]), camera_key_fov=np.ascontiguousarray(ck["fov"]),
             camera_key_perspective=np.ascontiguousarray(ck["persp"]))
    lk = section("light keys", LIGHT_KEY)
    f.update(light_key_frame=np.ascontiguousarray(lk["frame"]), light_key_color=np.ascontiguousarray(lk["c"]),
             light_key_direction=np.ascontiguousarray(lk["d"]))
    sk = section("self-shadow keys", SHADOW_KEY)
    f.update(shadow_key_frame=np.ascontiguousarray(sk["frame"]), shadow_key_mode=np.ascontiguousarray(sk["mode"]),
             shadow_key_distance=np.ascontiguousarray(sk["d"]))

    # property keys: variable size (frame u32, visible u8, n u32, n × (name[20], on u8))
    r.section = "property keys"
    pframe, pvis, pstart, ptrack, pon, pfields = [], [], [0], [], [], []
    ik_index: dict[bytes, int] = {}
    ik_names: list[str] = []
    ik_raw: list[bytes] = []
    if r.remaining == 0:
        extras.setdefault("missing_sections", []).append("property keys")
    elif r.remaining < 4:
        raise r.error(f"{r.remaining} stray bytes where the property key count should be")
    else:
        n = r.u32_count(9, "property key")
        for _ in range(n):
            pframe.append(r.u32())
            pvis.append(r.u8())
            m = r.u32_count(21, "IK switch")
            for _ in range(m):
                field = r.raw(20)
                on = r.u8()
                pfields.append(field)
                b = strip_field(field)
                t = ik_index.get(b)
                if t is None:
                    t = ik_index[b] = len(ik_raw)
                    s, w = decode_cp932(b)
                    if w:
                        r.warnings.append(f"property keys: {w}")
                    ik_names.append(s)
                    ik_raw.append(b)
                ptrack.append(t)
                pon.append(on)
            pstart.append(len(ptrack))
    extras["property_ik_name_field"] = tuple(pfields)
    f.update(property_key_frame=np.array(pframe, np.uint32), property_key_visible=np.array(pvis, np.uint8),
             property_ik_name=tuple(ik_names), property_ik_name_bytes=tuple(ik_raw),
             property_ik_start=np.array(pstart, np.int32), property_ik_track=np.array(ptrack, np.int32),
             property_ik_enabled=np.array(pon, np.uint8))
    if r.remaining:
        extras["trailing"] = data[r.pos:]
        r.warnings.append(f"{r.remaining} bytes after the last section (byte {r.pos}) kept but ignored")
    f["source_path"] = str(path)
    f["source_extras"] = extras
    f["warnings"] = tuple(r.warnings)
    return build_motion(f)


def _name_fields(track_bytes, key_track, extras_field, size):
    """(K, size) uint8 name fields for writing: the original fields when they still match."""
    k = len(key_track)
    if extras_field is not None and len(extras_field) == k and k:
        clean = np.where(np.cumsum(extras_field == 0, axis=1) > 0, 0, extras_field)
        enc = np.zeros((len(track_bytes), size), np.uint8)
        for i, b in enumerate(track_bytes):
            enc[i, :len(b[:size])] = np.frombuffer(b[:size], np.uint8)
        if np.array_equal(clean, enc[key_track]):
            return extras_field
    table = np.zeros((len(track_bytes), size), np.uint8)
    for i, b in enumerate(track_bytes):
        fld = encode_field(b, size)
        table[i] = np.frombuffer(fld, np.uint8)
    return table[key_track] if k else np.zeros((0, size), np.uint8)


def _names_bytes(names, raw):
    """Track names to write: the raw bytes when they decode to the name, else cp932."""
    out = []
    for i, s in enumerate(names):
        b = raw[i] if i < len(raw) else None
        if b is None or decode_cp932(b)[0] != s:
            b = encode_cp932(s)
        out.append(b)
    return out


def _arr(a, shape, dtype):
    return np.zeros(shape, dtype) if a is None else np.asarray(a, dtype)


def write_vmd(motion: Motion) -> bytes:
    """Serialise a ``Motion`` to VMD bytes (header variant and raw names kept when known)."""
    ex = motion.source_extras or {}
    w = BinaryWriter()
    head = ex.get("header")
    version = ex.get("version", "0002")
    if not isinstance(head, (bytes, bytearray)) or len(head) != 30:
        head = encode_field(MAGIC_NEW, 30)
        version = "0002"
    name_len = 10 if version == "0001" else 20
    w.raw(head)
    mf = ex.get("model_name_field")
    if isinstance(mf, (bytes, bytearray)) and len(mf) == name_len and decode_field(mf)[0] == motion.model_name:
        w.raw(mf)
    else:
        b = motion.model_name_bytes if decode_cp932(motion.model_name_bytes or b"")[0] == motion.model_name and \
            motion.model_name_bytes else motion.model_name
        w.raw(encode_field(b, name_len))

    kb = motion.num_bone_keys
    a = np.zeros(kb, BONE_KEY)
    if kb:
        tb = _names_bytes(motion.bone_track_name, motion.bone_track_name_bytes)
        a["name"] = _name_fields(tb, np.asarray(motion.bone_key_track), ex.get("bone_key_name_field"), 15)
        a["frame"] = motion.bone_key_frame
        a["t"] = motion.bone_key_translation
        a["q"] = motion.bone_key_rotation
        ip = np.array(motion.bone_key_interpolation, np.uint8)
        if motion.bone_key_physics is not None and len(motion.bone_key_physics) == kb:
            # the derived flag wins where it disagrees with the block (set through replace())
            want_off = ~np.asarray(motion.bone_key_physics, bool)
            is_off = ~bone_key_physics(ip)
            ip[want_off & ~is_off, 2:4] = PHYSICS_OFF
            ip[~want_off & is_off, 2:4] = 0
        a["ip"] = ip
    w.u32(kb)
    w.array(a)
    missing = set(ex.get("missing_sections", ()))

    km = motion.num_morph_keys
    a = np.zeros(km, MORPH_KEY)
    if km:
        tb = _names_bytes(motion.morph_track_name, motion.morph_track_name_bytes)
        a["name"] = _name_fields(tb, np.asarray(motion.morph_key_track), ex.get("morph_key_name_field"), 15)
        a["frame"] = motion.morph_key_frame
        a["w"] = motion.morph_key_weight
    rest = [("morph keys", km), ("camera keys", motion.num_camera_keys), ("light keys", motion.num_light_keys),
            ("self-shadow keys", motion.num_shadow_keys), ("property keys", motion.num_property_keys)]
    # sections absent in the source stay absent when they and everything after them are empty
    cut = len(rest)
    for i in range(len(rest) - 1, -1, -1):
        if rest[i][0] in missing and rest[i][1] == 0:
            cut = i
        else:
            break
    if cut > 0:
        w.u32(km)
        w.array(a)
    if cut > 1:
        kc = motion.num_camera_keys
        a = np.zeros(kc, CAMERA_KEY)
        if kc:
            a["frame"], a["d"], a["p"], a["r"] = (motion.camera_key_frame, motion.camera_key_distance,
                                                  motion.camera_key_position, motion.camera_key_rotation)
            a["ip"], a["fov"], a["persp"] = (motion.camera_key_interpolation, motion.camera_key_fov,
                                             motion.camera_key_perspective)
        w.u32(kc)
        w.array(a)
    if cut > 2:
        kl = motion.num_light_keys
        a = np.zeros(kl, LIGHT_KEY)
        if kl:
            a["frame"], a["c"], a["d"] = motion.light_key_frame, motion.light_key_color, motion.light_key_direction
        w.u32(kl)
        w.array(a)
    if cut > 3:
        ks = motion.num_shadow_keys
        a = np.zeros(ks, SHADOW_KEY)
        if ks:
            a["frame"], a["mode"], a["d"] = motion.shadow_key_frame, motion.shadow_key_mode, motion.shadow_key_distance
        w.u32(ks)
        w.array(a)
    if cut > 4:
        kp = motion.num_property_keys
        w.u32(kp)
        names = _names_bytes(motion.property_ik_name, motion.property_ik_name_bytes)
        fields = ex.get("property_ik_name_field") or ()
        start = motion.property_ik_start
        track = motion.property_ik_track if motion.property_ik_track is not None else np.zeros(0, np.int32)
        use_raw = len(fields) == len(track) and all(strip_field(fields[i]) == names[int(track[i])][:20]
                                                    for i in range(len(track)))
        for k in range(kp):
            w.u32(int(motion.property_key_frame[k]))
            w.u8(int(motion.property_key_visible[k]))
            s0, s1 = int(start[k]), int(start[k + 1])
            w.u32(s1 - s0)
            for i in range(s0, s1):
                w.raw(fields[i] if use_raw else encode_field(names[int(track[i])], 20))
                w.u8(int(motion.property_ik_enabled[i]))
    tr = ex.get("trailing")
    if tr:
        w.raw(tr)
    return w.getvalue()
