"""PMX morphs and display frames ⇄ Model ``morph_*``, ``*_morph_*`` and ``display_frames``.

In (read): a ``PmxReader`` at the morph count. Out: per morph name/panel/kind, and per
element table (vertex, uv, bone, material, group, impulse) CSR arrays ``<t>_morph_start``
(N + 1,) int32 into the element arrays. ``ELEMENT_FIELDS`` gives each kind's element
record once, for the reader and the writer.
"""

from __future__ import annotations

import numpy as np

from mmdkit.formats.binary import record
from mmdkit.formats.pmx.common import PmxReader, PmxWriter, index_dtypes
from mmdkit.model import model as M

# element table → (record fields, {record field: Model field}); Model fields are "<table>_morph_" + name
_MATERIAL = [("material", "material", 1), ("op", "B", 1), ("diffuse", "f", 4), ("specular", "f", 3),
             ("specular_power", "f", 1), ("ambient", "f", 3), ("edge_color", "f", 4), ("edge_size", "f", 1),
             ("texture_tint", "f", 4), ("sphere_tint", "f", 4), ("toon_tint", "f", 4)]
ELEMENT_FIELDS = {
    "group": [("target", "morph", 1), ("weight", "f", 1)],
    "vertex": [("vertex", "vertex", 1), ("offset", "f", 3)],
    "bone": [("bone", "bone", 1), ("translation", "f", 3), ("rotation", "f", 4)],
    "uv": [("vertex", "vertex", 1), ("offset", "f", 4)],
    "material": _MATERIAL,
    "impulse": [("rigid_body", "rigid", 1), ("local", "B", 1), ("velocity", "f", 3), ("torque", "f", 3)],
}
TABLE_OF_KIND = {M.MORPH_GROUP: "group", M.MORPH_FLIP: "group", M.MORPH_VERTEX: "vertex", M.MORPH_BONE: "bone",
                 M.MORPH_UV: "uv", M.MORPH_UV1: "uv", M.MORPH_UV2: "uv", M.MORPH_UV3: "uv", M.MORPH_UV4: "uv",
                 M.MORPH_MATERIAL: "material", M.MORPH_IMPULSE: "impulse"}
_INDEX_FIELDS = {"target", "vertex", "bone", "material", "rigid_body"}  # stored as int32 in the Model


def _element_dtypes(sizes: dict) -> dict:
    idx = index_dtypes(sizes)
    return {t: record(fields, idx) for t, fields in ELEMENT_FIELDS.items()}


def read_morphs(r: PmxReader, f: dict) -> None:
    """Morph count and records → ``morph_*`` and the element tables."""
    dts = _element_dtypes(r.sizes)
    n = r.i32_count(8 + 2 + 4, "morph")
    names, names_en = [], []
    panel = np.zeros(n, np.uint8)
    kind = np.zeros(n, np.uint8)
    tables = {t: [] for t in ELEMENT_FIELDS}
    counts = {t: np.zeros(n, np.int64) for t in ELEMENT_FIELDS}
    for i in range(n):
        names.append(r.text())
        names_en.append(r.text())
        panel[i], kind[i] = p, k = r.u8(), r.u8()
        t = TABLE_OF_KIND.get(k)
        if t is None:
            raise r.error(f"morph {i} ({names[-1]!r}): unknown morph type {k}", r.pos - 1)
        c = r.count(r.i32(), dts[t].itemsize, f"morph {i} element")
        tables[t].append(r.array(dts[t], c))
        counts[t][i] = c
    f.update(morph_name=tuple(names), morph_name_en=tuple(names_en), morph_panel=panel, morph_kind=kind)
    for t, dt in dts.items():
        a = np.concatenate(tables[t]) if tables[t] else np.zeros(0, dt)
        s = np.zeros(n + 1, np.int32)
        np.cumsum(counts[t], out=s[1:])
        f[f"{t}_morph_start"] = s
        for name in dt.names:
            v = a[name]
            f[f"{t}_morph_{name}"] = v.astype(np.int32) if name in _INDEX_FIELDS else np.ascontiguousarray(v)
    f["impulse_morph_local"] = f["impulse_morph_local"] != 0


def write_morphs(w: PmxWriter, model) -> None:
    dts = _element_dtypes(w.sizes)
    N = model.num_morphs
    w.i32(N)
    for i in range(N):
        w.text(model.morph_name[i])
        w.text(model.morph_name_en[i])
        k = int(model.morph_kind[i])
        w.u8(int(model.morph_panel[i]))
        w.u8(k)
        t = TABLE_OF_KIND[k]
        start = getattr(model, f"{t}_morph_start")
        s = slice(start[i], start[i + 1])
        a = np.zeros(s.stop - s.start, dts[t])
        for name in dts[t].names:
            a[name] = getattr(model, f"{t}_morph_{name}")[s]
        w.i32(len(a))
        w.array(a)


def read_display_frames(r: PmxReader, f: dict) -> None:
    """Display frames → ``display_frames``: (name, name_en, special, ((is_morph, index), ...))."""
    nf = r.i32_count(8 + 1 + 4, "display frame")
    frames = []
    for _ in range(nf):
        fname = r.text()
        fname_en = r.text()
        special = r.u8()
        ne = r.count(r.i32(), 1 + min(r.sizes["bone"], r.sizes["morph"]), "display frame element")
        items = []
        for _ in range(ne):
            is_morph = r.u8()
            if is_morph > 1:
                raise r.error(f"display frame element type {is_morph} is not 0 or 1", r.pos - 1)
            items.append((bool(is_morph), r.index("morph" if is_morph else "bone")))
        frames.append((fname, fname_en, special, tuple(items)))
    f["display_frames"] = tuple(frames)


def write_display_frames(w: PmxWriter, model) -> None:
    w.i32(len(model.display_frames))
    for name, name_en, special, items in model.display_frames:
        w.text(name)
        w.text(name_en)
        w.u8(int(special))
        w.i32(len(items))
        for is_morph, idx in items:
            w.u8(1 if is_morph else 0)
            w.index("morph" if is_morph else "bone", idx)
