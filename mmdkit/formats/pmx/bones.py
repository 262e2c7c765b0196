"""PMX bones and their IK solvers ⇄ Model ``bone_*`` and ``ik_*`` arrays.

In (read): a ``PmxReader`` at the bone count. Out: ``bone_*`` arrays (B, ...) and the IK
solvers in bone order as CSR arrays (``ik_link_start`` (K + 1,) int32 into ``ik_link_*``).
A bone record is a fixed head then optional parts chosen by its flags; ``BONE_PARTS`` lists
them once for the reader and the writer.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.binary import F32x3
from mmdkit.formats.pmx.common import PmxReader, PmxWriter
from mmdkit.model import model as M

# (flag test, fields when set, fields when clear); fields are Model "bone_" fields and codes
BONE_PARTS = (
    (M.BONE_TAIL_IS_BONE, (("tail_index", "bone"),), (("tail_offset", "3f"),)),
    (M.BONE_APPEND_ROTATION | M.BONE_APPEND_TRANSLATION, (("append_parent", "bone"), ("append_ratio", "f")), ()),
    (M.BONE_FIXED_AXIS, (("fixed_axis", "3f"),), ()),
    (M.BONE_LOCAL_AXIS, (("local_axis_x", "3f"), ("local_axis_z", "3f")), ()),
    (M.BONE_EXTERNAL_PARENT, (("external_key", "i"),), ()),
)
# field → (dtype, shape, default) of the arrays the parts fill
_BONE_ARRAYS = {"tail_index": (np.int32, (), -1), "tail_offset": (np.float32, (3,), 0),
                "append_parent": (np.int32, (), -1), "append_ratio": (np.float32, (), 0),
                "fixed_axis": (np.float32, (3,), 0), "local_axis_x": (np.float32, (3,), 0),
                "local_axis_z": (np.float32, (3,), 0), "external_key": (np.int32, (), 0)}


def _parts(flags: int) -> tuple:
    """(field, code) of the optional parts a bone with ``flags`` stores, in file order."""
    return tuple(p for test, when_set, when_clear in BONE_PARTS for p in (when_set if flags & test else when_clear))


def _put(w: PmxWriter, code: str, v) -> None:
    if code == "3f":
        w.pack(F32x3, *v)
    elif code == "f":
        w.f32(float(v))
    elif code == "i":
        w.i32(int(v))
    else:
        w.index(code, v)


def read_bones(r: PmxReader, f: dict) -> None:
    """Bone count and records (with their IK solvers) → ``bone_*`` and ``ik_*`` fields."""
    bsz = r.sizes["bone"]
    nb = r.i32_count(8 + 12 + bsz + 4 + 2 + bsz, "bone")
    names, names_en = [], []
    pos = np.zeros((nb, 3), np.float32)
    parent = np.zeros(nb, np.int32)
    layer = np.zeros(nb, np.int32)
    flags = np.zeros(nb, np.uint16)
    arrays = {k: np.full((nb,) + shape, default, dt) for k, (dt, shape, default) in _BONE_ARRAYS.items()}
    bone_ik = np.full(nb, -1, np.int32)
    iks = _IkReader()
    get = {"3f": lambda: r.unpack(F32x3), "f": r.f32, "i": r.i32, "bone": lambda: r.index("bone")}
    parts: dict = {}  # flags → ((array, reader), ...)
    for b in range(nb):
        names.append(r.text())
        names_en.append(r.text())
        pos[b] = r.unpack(F32x3)
        parent[b] = r.index("bone")
        layer[b] = r.i32()
        fl = flags[b] = r.u16()
        todo = parts.get(fl)
        if todo is None:
            todo = parts[fl] = tuple((arrays[name], get[code]) for name, code in _parts(fl))
        for a, read in todo:
            a[b] = read()
        if fl & M.BONE_IK:
            bone_ik[b] = iks.read(r, b)
    f.update(bone_name=tuple(names), bone_name_en=tuple(names_en), bone_position=pos, bone_parent=parent,
             bone_layer=layer, bone_flags=flags, bone_ik=bone_ik, **{"bone_" + k: a for k, a in arrays.items()})
    iks.finish(f)


class _IkReader:
    """Collects IK solvers as bones are read: target, loops, limit angle, links."""

    def __init__(self):
        self.bone, self.target, self.loop, self.limit, self.nlinks = [], [], [], [], []
        self.link_bone, self.link_limit, self.link_lo, self.link_hi = [], [], [], []

    def read(self, r: PmxReader, b: int) -> int:
        self.bone.append(b)
        self.target.append(r.index("bone"))
        self.loop.append(r.i32())
        self.limit.append(r.f32())
        nl = r.count(r.i32(), r.sizes["bone"] + 1, "IK link")
        self.nlinks.append(nl)
        for _ in range(nl):
            self.link_bone.append(r.index("bone"))
            has = r.u8()
            self.link_limit.append(has)
            self.link_lo.append(r.unpack(F32x3) if has else (0.0, 0.0, 0.0))
            self.link_hi.append(r.unpack(F32x3) if has else (0.0, 0.0, 0.0))
        return len(self.bone) - 1

    def finish(self, f: dict) -> None:
        ls = np.zeros(len(self.bone) + 1, np.int32)
        np.cumsum(self.nlinks, out=ls[1:])
        raw = np.array(self.link_limit, np.uint8)
        f.update(ik_bone=np.array(self.bone, np.int32), ik_target=np.array(self.target, np.int32),
                 ik_loop_count=np.array(self.loop, np.int32), ik_limit_angle=np.array(self.limit, np.float32),
                 ik_link_start=ls, ik_link_bone=np.array(self.link_bone, np.int32), ik_link_has_limit=raw != 0,
                 ik_link_lower=np.array(self.link_lo, np.float32).reshape(-1, 3),
                 ik_link_upper=np.array(self.link_hi, np.float32).reshape(-1, 3))
        f["ik_link_has_limit_raw"] = raw  # the byte as stored (non-zero = has limits), for write-back


def write_bones(w: PmxWriter, model, extras: dict) -> None:
    """Bone count and records with their IK solvers."""
    B = model.num_bones
    w.i32(B)
    raw_lim = extras.get("ik_link_has_limit_raw")
    if raw_lim is None or len(raw_lim) != len(model.ik_link_bone) or \
            not np.array_equal(raw_lim != 0, model.ik_link_has_limit):
        raw_lim = model.ik_link_has_limit.astype(np.uint8)
    arrays = {k: getattr(model, "bone_" + k) for k in _BONE_ARRAYS}
    for b in range(B):
        w.text(model.bone_name[b])
        w.text(model.bone_name_en[b])
        w.pack(F32x3, *model.bone_position[b])
        w.index("bone", model.bone_parent[b])
        fl = int(model.bone_flags[b])
        w.i32(int(model.bone_layer[b]))
        w.u16(fl)
        for name, code in _parts(fl):
            _put(w, code, arrays[name][b])
        if fl & M.BONE_IK:
            _write_ik(w, model, b, raw_lim)


def _write_ik(w: PmxWriter, model, b: int, raw_lim) -> None:
    k = int(model.bone_ik[b])
    if k < 0:
        raise FormatError(f"bone {model.bone_name[b]!r} has the IK flag but no IK solver", section="bones")
    w.index("bone", model.ik_target[k])
    w.i32(int(model.ik_loop_count[k]))
    w.f32(float(model.ik_limit_angle[k]))
    s0, s1 = int(model.ik_link_start[k]), int(model.ik_link_start[k + 1])
    w.i32(s1 - s0)
    for i in range(s0, s1):
        w.index("bone", model.ik_link_bone[i])
        w.u8(int(raw_lim[i]))
        if raw_lim[i]:
            w.pack(F32x3, *model.ik_link_lower[i])
            w.pack(F32x3, *model.ik_link_upper[i])
