"""VMD reader and writer: bytes ⇄ ``Motion`` (bone, morph, camera, light, self-shadow and
property/IK keys).

In (read): the bytes of a .vmd file. Out: a frozen ``Motion`` with per-track key arrays read
by numpy structured dtypes (no Python loop per key). Raw name fields and the 64-byte bone
interpolation blocks are kept, so ``write_vmd(read_vmd(b)) == b`` for well-formed files.
Each fixed-size key section has one record table (``SECTIONS``) whose field names are the
``Motion`` fields without the section prefix; the reader and the writer both use it.

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
from mmdkit.errors import FormatError
from mmdkit.formats.binary import BinaryReader, BinaryWriter, record
from mmdkit.text import decode_cp932, decode_field, encode_cp932, encode_field, strip_field

MAGIC_NEW = b"Vocaloid Motion Data 0002"
MAGIC_OLD = b"Vocaloid Motion Data file"
HEADER_SIZE, TRACK_NAME_SIZE, IK_NAME_SIZE = 30, 15, 20

# (section name, Motion field prefix, record); "name" is a track name field, the rest are
# Motion fields prefix + name
SECTIONS = (
    ("bone keys", "bone_key_", record([("name", "B", TRACK_NAME_SIZE), ("frame", "I", 1), ("translation", "f", 3),
                                       ("rotation", "f", 4), ("interpolation", "B", 64)])),
    ("morph keys", "morph_key_", record([("name", "B", TRACK_NAME_SIZE), ("frame", "I", 1), ("weight", "f", 1)])),
    ("camera keys", "camera_key_", record([("frame", "I", 1), ("distance", "f", 1), ("position", "f", 3),
                                           ("rotation", "f", 3), ("interpolation", "B", 24), ("fov", "I", 1),
                                           ("perspective", "B", 1)])),
    ("light keys", "light_key_", record([("frame", "I", 1), ("color", "f", 3), ("direction", "f", 3)])),
    ("self-shadow keys", "shadow_key_", record([("frame", "I", 1), ("mode", "B", 1), ("distance", "f", 1)])),
)
PROPERTY_KEYS = "property keys"  # variable size: a PROPERTY_KEY head, then its IK_SWITCH records
PROPERTY_KEY = record([("frame", "I", 1), ("visible", "B", 1), ("switches", "I", 1)])
IK_SWITCH = record([("name", "B", IK_NAME_SIZE), ("enabled", "B", 1)])

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
    extras: dict = {"format": "vmd"}
    f = _read_header(r, extras)
    readers = [(name, lambda rr, n=name, p=prefix, d=dt: _read_key_section(rr, f, extras, n, p, d))
               for name, prefix, dt in SECTIONS] + [(PROPERTY_KEYS, lambda rr: _read_property_keys(rr, f, extras))]
    for i, (name, read) in enumerate(readers):
        start = r.pos
        try:
            read(r)
        except FormatError as e:
            if i == 0:  # not even the bone keys read: not a motion
                raise
            # garbage after valid sections (seen in the wild): this section and the rest are
            # absent, their bytes kept as trailing bytes and written back as they were
            for _, absent in readers[i:]:
                absent(BinaryReader(b"", path))
            extras["trailing"] = data[start:]
            r.warnings.append(f"{name}: {e.detail} (byte {e.offset}); this section and everything after it "
                              f"({len(data) - start} bytes from byte {start}) dropped, kept as trailing bytes")
            r.pos = r.end
            break
    if r.remaining:
        extras["trailing"] = data[r.pos:]
        r.warnings.append(f"{r.remaining} bytes after the last section (byte {r.pos}) kept but ignored")
    f.update(source_path=str(path), source_extras=extras, warnings=tuple(r.warnings))
    return build_motion(f)  # derives bone_key_physics from the interpolation blocks


def _read_header(r: BinaryReader, extras: dict) -> dict:
    """Header variant and model name → Motion fields ``model_name``/``model_name_bytes``."""
    r.section = "header"
    head = r.raw(HEADER_SIZE)
    if head.startswith(MAGIC_NEW):
        name_len, version = 20, "0002"
    elif head.startswith(MAGIC_OLD):
        name_len, version = 10, "0001"
    elif head.startswith(b"Vocaloid Motion Data"):
        name_len, version = 20, "unversioned"
        r.warnings.append('header lacks the " 0002" version tag; read with the 20-byte model name layout')
    else:
        raise r.error(f"not a VMD file (header {head[:25]!r})", 0)
    raw_name = r.raw(name_len)
    extras.update(header=head, version=version, model_name_field=raw_name)
    model_name, model_name_bytes, w = decode_field(raw_name)
    if w:
        r.warnings.append(f"model name: {w}")
    return {"model_name": model_name, "model_name_bytes": model_name_bytes}


def _section_count(r: BinaryReader, extras: dict, name: str, item_size: int, what: str, label: str):
    """The key count of a section, or None when the file ends before it (a missing section)."""
    r.section = name
    if r.remaining == 0:
        extras.setdefault("missing_sections", []).append(name)
        return None
    if r.remaining < 4:
        raise r.error(f"{r.remaining} stray bytes where the {label} count should be")
    return r.u32_count(item_size, what)


def _read_key_section(r: BinaryReader, f: dict, extras: dict, name: str, prefix: str, dt: np.dtype) -> None:
    """One fixed-size key section → ``<prefix><field>`` arrays (+ track names for bone/morph)."""
    n = _section_count(r, extras, name, dt.itemsize, name[:-1], name)
    keys = r.array(dt, n) if n is not None else np.zeros(0, dt)
    for field in dt.names:
        if field != "name":
            f[prefix + field] = np.ascontiguousarray(keys[field])
    if "name" in dt.names:
        kind = prefix.split("_")[0]
        track, names, raw = _tracks(keys["name"], r.warnings, name)
        f.update({f"{kind}_track_name": names, f"{kind}_track_name_bytes": raw, f"{prefix}track": track})
        extras[f"{prefix}name_field"] = keys["name"]


def _read_property_keys(r: BinaryReader, f: dict, extras: dict) -> None:
    """Property keys: visibility and per-IK on/off switches (IK names become tracks)."""
    pframe, pvis, pstart, ptrack, pon, pfields = [], [], [0], [], [], []
    ik_index: dict[bytes, int] = {}
    ik_names: list[str] = []
    ik_raw: list[bytes] = []
    n = _section_count(r, extras, PROPERTY_KEYS, PROPERTY_KEY.itemsize, "property key", "property key") or 0
    for _ in range(n):
        head = np.frombuffer(r.raw(PROPERTY_KEY.itemsize), PROPERTY_KEY)[0]
        pframe.append(int(head["frame"]))
        pvis.append(int(head["visible"]))
        switches = r.array(IK_SWITCH, r.count(int(head["switches"]), IK_SWITCH.itemsize, "IK switch"))
        for field, on in zip(switches["name"], switches["enabled"].tolist()):
            field = field.tobytes()
            pon.append(on)
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
        pstart.append(len(ptrack))
    extras["property_ik_name_field"] = tuple(pfields)
    f.update(property_key_frame=np.array(pframe, np.uint32), property_key_visible=np.array(pvis, np.uint8),
             property_ik_name=tuple(ik_names), property_ik_name_bytes=tuple(ik_raw),
             property_ik_start=np.array(pstart, np.int32), property_ik_track=np.array(ptrack, np.int32),
             property_ik_enabled=np.array(pon, np.uint8))


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
        table[i] = np.frombuffer(encode_field(b, size), np.uint8)
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


def write_vmd(motion: Motion) -> bytes:
    """Serialise a ``Motion`` to VMD bytes (header variant and raw names kept when known)."""
    ex = motion.source_extras or {}
    w = BinaryWriter()
    _write_header(w, motion, ex)
    missing = set(ex.get("missing_sections", ()))
    counts = [getattr(motion, f"num_{prefix.split('_')[0]}_keys") for _, prefix, _ in SECTIONS]
    names = [name for name, _, _ in SECTIONS] + [PROPERTY_KEYS]
    counts.append(motion.num_property_keys)
    # sections absent in the source stay absent when they and everything after them are empty
    cut = len(names)
    while cut > 1 and names[cut - 1] in missing and counts[cut - 1] == 0:
        cut -= 1
    for (_, prefix, dt), n in list(zip(SECTIONS, counts))[:cut]:
        w.u32(n)
        w.array(_key_records(motion, ex, prefix, dt, n))
    if cut == len(names):
        _write_property_keys(w, motion, ex)
    if ex.get("trailing"):
        w.raw(ex["trailing"])
    return w.getvalue()


def _write_header(w: BinaryWriter, motion: Motion, ex: dict) -> None:
    head = ex.get("header")
    version = ex.get("version", "0002")
    if not isinstance(head, (bytes, bytearray)) or len(head) != HEADER_SIZE:
        head = encode_field(MAGIC_NEW, HEADER_SIZE)
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


def _key_records(motion: Motion, ex: dict, prefix: str, dt: np.dtype, n: int) -> np.ndarray:
    """One fixed-size key section's (n,) records from the Motion fields ``<prefix><field>``."""
    a = np.zeros(n, dt)
    if not n:
        return a
    kind = prefix.split("_")[0]
    for field in dt.names:
        if field == "name":
            tb = _names_bytes(getattr(motion, f"{kind}_track_name"), getattr(motion, f"{kind}_track_name_bytes"))
            a["name"] = _name_fields(tb, np.asarray(getattr(motion, prefix + "track")), ex.get(prefix + "name_field"),
                                     TRACK_NAME_SIZE)
        else:
            a[field] = getattr(motion, prefix + field)
    if prefix == "bone_key_" and motion.bone_key_physics is not None and len(motion.bone_key_physics) == n:
        # the derived flag wins where it disagrees with the block (set through replace())
        ip = np.array(motion.bone_key_interpolation, np.uint8)
        want_off = ~np.asarray(motion.bone_key_physics, bool)
        is_off = ~bone_key_physics(ip)
        ip[want_off & ~is_off, 2:4] = PHYSICS_OFF
        ip[~want_off & is_off, 2:4] = 0
        a["interpolation"] = ip
    return a


def _write_property_keys(w: BinaryWriter, motion: Motion, ex: dict) -> None:
    kp = motion.num_property_keys
    w.u32(kp)
    names = _names_bytes(motion.property_ik_name, motion.property_ik_name_bytes)
    fields = ex.get("property_ik_name_field") or ()
    start = motion.property_ik_start
    track = motion.property_ik_track if motion.property_ik_track is not None else np.zeros(0, np.int32)
    use_raw = len(fields) == len(track) and all(strip_field(fields[i]) == names[int(track[i])][:IK_NAME_SIZE]
                                                for i in range(len(track)))
    head = np.zeros(1, PROPERTY_KEY)
    for k in range(kp):
        s0, s1 = int(start[k]), int(start[k + 1])
        head[0] = (motion.property_key_frame[k], motion.property_key_visible[k], s1 - s0)
        w.array(head)
        switches = np.zeros(s1 - s0, IK_SWITCH)
        for j, i in enumerate(range(s0, s1)):
            switches["name"][j] = np.frombuffer(fields[i] if use_raw else encode_field(names[int(track[i])],
                                                                                          IK_NAME_SIZE), np.uint8)
        switches["enabled"] = motion.property_ik_enabled[s0:s1]
        w.array(switches)
