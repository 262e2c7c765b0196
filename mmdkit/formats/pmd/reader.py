"""PMD file → its raw sections: record arrays exactly as stored, section by section.

In: the bytes of a .pmd file. Out: ``PmdRaw`` — one numpy record array (``records.py``
layouts) or tuple of fixed fields per section, the optional extensions (English names, toon
textures, physics) when present, and the reader's warnings. ``convert.py`` turns it into
Model fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmdkit.formats.binary import BinaryReader
from mmdkit.formats.pmd.records import (BONE, BONE_DISPLAY, COMMENT_SIZE, GROUP_NAME_SIZE, IK_HEAD, JOINT,
                                        MATERIAL, MORPH_HEAD, MORPH_ROW, NAME_SIZE, RIGID, TOON_NAME_SIZE, VERTEX)


@dataclass
class PmdRaw:
    """The sections of a PMD file as stored (see ``records.py`` for the record layouts)."""

    version: float = 1.0
    name_field: bytes = b""
    comment_field: bytes = b""
    vertices: np.ndarray = None  # (V,) VERTEX
    face_index: np.ndarray = None  # (3F,) <u2
    materials: np.ndarray = None  # (M,) MATERIAL
    bones: np.ndarray = None  # (B,) BONE
    iks: list = field(default_factory=list)  # [(IK_HEAD record, (n,) <u2 link bones)] in file order
    morphs: list = field(default_factory=list)  # [(name field, kind, (n,) MORPH_ROW)] in file order
    morph_display: np.ndarray = None  # (D,) <u2 PMD morph indices (base morph counted)
    group_fields: tuple = ()  # bone display group names, 50-byte fields
    bone_display: np.ndarray = None  # (E,) BONE_DISPLAY
    english: dict | None = None  # flag, name/comment/bone/morph/group English fields
    toon_fields: tuple | None = None  # 10 × 100-byte toon texture names
    rigid_bodies: np.ndarray | None = None  # (R,) RIGID
    joints: np.ndarray | None = None  # (J,) JOINT; None when the physics extension stops after bodies
    trailing: bytes = b""
    trailing_offset: int = 0
    warnings: list = field(default_factory=list)


def read_raw(data: bytes, path: str = "") -> PmdRaw:
    """Parse every section of a PMD file (``FormatError`` with section and offset on damage)."""
    r = BinaryReader(data, path)
    raw = PmdRaw(warnings=r.warnings)
    _read_header(r, raw)
    _read_geometry(r, raw)
    _read_bones(r, raw)
    _read_morphs(r, raw)
    _read_display(r, raw)
    _read_extensions(r, raw)
    raw.trailing, raw.trailing_offset = data[r.pos:], r.pos  # warned about by convert, in section order
    return raw


def _read_header(r: BinaryReader, raw: PmdRaw) -> None:
    r.section = "header"
    magic = r.raw(3)
    if magic != b"Pmd":
        raise r.error(f"not a PMD file (magic {magic!r}, expected b'Pmd')", 0)
    raw.version = r.f32()
    raw.name_field, raw.comment_field = r.raw(NAME_SIZE), r.raw(COMMENT_SIZE)


def _read_geometry(r: BinaryReader, raw: PmdRaw) -> None:
    """Vertices, face indices, materials."""
    r.section = "vertices"
    raw.vertices = r.array(VERTEX, r.u32_count(VERTEX.itemsize, "vertex"))
    r.section = "faces"
    nidx = r.u32_count(2, "face index")
    if nidx % 3:
        raise r.error(f"face index count {nidx} is not a multiple of 3", r.pos - 4)
    raw.face_index = r.array("<u2", nidx)
    r.section = "materials"
    mt = raw.materials = r.array(MATERIAL, r.u32_count(MATERIAL.itemsize, "material"))
    if (mt["count"] % 3 != 0).any():
        i = int(np.flatnonzero(mt["count"] % 3)[0])
        raise r.error(f"material {i}: face index count {int(mt['count'][i])} is not a multiple of 3")


def _read_bones(r: BinaryReader, raw: PmdRaw) -> None:
    """Bones and IK solvers."""
    r.section = "bones"
    raw.bones = r.array(BONE, r.count(r.u16(), BONE.itemsize, "bone", r.pos - 2))
    r.section = "IK"
    nik = r.count(r.u16(), IK_HEAD.itemsize, "IK", r.pos - 2)
    for _ in range(nik):
        head = np.frombuffer(r.raw(IK_HEAD.itemsize), IK_HEAD)[0]
        raw.iks.append((head, r.array("<u2", int(head["links"]))))


def _read_morphs(r: BinaryReader, raw: PmdRaw) -> None:
    r.section = "morphs"
    nmo = r.count(r.u16(), MORPH_HEAD.itemsize, "morph", r.pos - 2)
    for i in range(nmo):
        head = r.raw(MORPH_HEAD.itemsize)
        h = np.frombuffer(head, MORPH_HEAD)[0]
        cnt = r.count(int(h["count"]), MORPH_ROW.itemsize, f"morph {i} vertex", r.pos - 5)
        raw.morphs.append((head[:NAME_SIZE], int(h["kind"]), r.array(MORPH_ROW, cnt)))


def _read_display(r: BinaryReader, raw: PmdRaw) -> None:
    """Morph display list, bone display group names, bone display list."""
    r.section = "morph display list"
    raw.morph_display = r.array("<u2", r.u8()).astype(np.int32)
    r.section = "bone display names"
    raw.group_fields = tuple(r.raw(GROUP_NAME_SIZE) for _ in range(r.u8()))
    r.section = "bone display list"
    raw.bone_display = r.array(BONE_DISPLAY, r.u32_count(BONE_DISPLAY.itemsize, "bone display entry"))


def _read_extensions(r: BinaryReader, raw: PmdRaw) -> None:
    """The optional extensions, each present only when bytes remain, in this order."""
    if r.remaining:
        r.section = "English names"
        flag = r.u8()
        raw.english = {"flag": flag}
        if flag:
            raw.english.update(name=r.raw(NAME_SIZE), comment=r.raw(COMMENT_SIZE),
                               bones=r.array(("u1", NAME_SIZE), len(raw.bones)),
                               morphs=tuple(r.raw(NAME_SIZE) for _ in range(max(len(raw.morphs) - 1, 0))),
                               groups=tuple(r.raw(GROUP_NAME_SIZE) for _ in raw.group_fields))
    if r.remaining:
        r.section = "toon textures"
        raw.toon_fields = tuple(r.raw(TOON_NAME_SIZE) for _ in range(10))
    if r.remaining:
        r.section = "rigid bodies"
        raw.rigid_bodies = r.array(RIGID, r.u32_count(RIGID.itemsize, "rigid body"))
        r.section = "joints"
        raw.joints = r.array(JOINT, r.u32_count(JOINT.itemsize, "joint")) if r.remaining else None
