"""PMX textures and materials ⇄ Model ``texture_path`` and ``material_*`` arrays.

In (read): a ``PmxReader`` at the texture count. Out: ``texture_path`` (T,) str,
``material_*`` arrays (M, ...) and ``material_face_start`` (M + 1,) int32 (triangle ranges).
One record table (``MATERIAL_FIELDS``) gives the fixed part of a material to both directions.
"""

from __future__ import annotations

import numpy as np

from mmdkit.formats.binary import join_records, record, record_bytes
from mmdkit.formats.pmx.common import PmxReader, PmxWriter, index_dtypes

# between the names and the toon byte; names are Model fields without the "material_" prefix
MATERIAL_FIELDS = [("diffuse", "f", 4), ("specular", "f", 3), ("specular_power", "f", 1), ("ambient", "f", 3),
                   ("flags", "B", 1), ("edge_color", "f", 4), ("edge_size", "f", 1), ("texture_index", "texture", 1),
                   ("sphere_index", "texture", 1), ("sphere_mode", "B", 1), ("toon_shared", "B", 1)]


def read_textures(r: PmxReader, f: dict) -> None:
    nt = r.i32_count(4, "texture")
    f["texture_path"] = tuple(r.text() for _ in range(nt))


def write_textures(w: PmxWriter, model) -> None:
    w.i32(len(model.texture_path))
    for s in model.texture_path:
        w.text(s)


def read_materials(r: PmxReader, f: dict) -> None:
    """Material count and records → ``material_*`` fields and the triangle ranges."""
    dt = record(MATERIAL_FIELDS, index_dtypes(r.sizes))
    # smallest material: two empty names, the fixed part, a 1-byte shared toon, empty memo, count
    nm = r.i32_count(4 + 4 + dt.itemsize + 1 + 4 + 4, "material")
    names, names_en, memo, fixed = [], [], [], []
    toon = np.zeros(nm, np.int32)
    tri = np.zeros(nm, np.int64)
    for m in range(nm):
        names.append(r.text())
        names_en.append(r.text())
        raw = r.raw(dt.itemsize)
        fixed.append(raw)
        shared = raw[-1]
        if shared > 1:
            raise r.error(f"material {m}: toon flag {shared} is not 0 or 1", r.pos - 1)
        toon[m] = r.u8() if shared else r.index("texture")
        memo.append(r.text())
        c = r.i32()
        if c < 0 or c % 3:
            raise r.error(f"material {m}: face index count {c} is not a non-negative multiple of 3", r.pos - 4)
        tri[m] = c // 3
    rec = join_records(fixed, dt)
    for name in dt.names:
        f["material_" + name] = rec[name]
    f.update(material_name=tuple(names), material_name_en=tuple(names_en), material_memo=tuple(memo),
             material_toon_shared=rec["toon_shared"] == 1, material_toon_index=toon)
    fs = np.zeros(nm + 1, np.int64)
    np.cumsum(tri, out=fs[1:])
    if fs[-1] != len(f["face_vertex_index"]):
        r.warnings.append(f"materials cover {int(fs[-1])} triangles but the file has "
                          f"{len(f['face_vertex_index'])}")
    f["material_face_start"] = fs.astype(np.int32) if fs[-1] < 2**31 else fs


def write_materials(w: PmxWriter, model) -> None:
    M = model.num_materials
    dt = record(MATERIAL_FIELDS, index_dtypes(w.sizes))
    rec = np.zeros(M, dt)
    for name in dt.names:
        rec[name] = getattr(model, "material_" + name)
    fs = model.material_face_start
    w.i32(M)
    for m, fixed in enumerate(record_bytes(rec)):
        w.text(model.material_name[m])
        w.text(model.material_name_en[m])
        w.raw(fixed)
        if model.material_toon_shared[m]:
            w.u8(int(model.material_toon_index[m]) & 0xFF)
        else:
            w.index("texture", model.material_toon_index[m])
        w.text(model.material_memo[m])
        w.i32(int(fs[m + 1] - fs[m]) * 3)
