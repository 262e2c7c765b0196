"""PMX vertices and faces: variable-size vertex records ⇄ Model vertex arrays.

In (read): a ``PmxReader`` at the vertex count. Out: ``vertex_*`` arrays ((V, 3) float32
model-space positions/normals, (V, 4) int32 bone indices / float32 weights, ...) and
``face_vertex_index`` (F, 3) int32 in ``f``. Vertices are decoded without a Python loop per
vertex: a numba scan copies the variable-size records into fixed tables, then structured
views of the per-deform record layouts below (shared with the writer) split the fields.
"""

from __future__ import annotations

import numba
import numpy as np

from mmdkit.formats.binary import record
from mmdkit.formats.pmx.common import PmxReader, PmxWriter, idx_dtype, index_dtypes


def head_record(additional_uv: int) -> np.dtype:
    """Fixed head of every vertex: position, normal, UV, additional UVs, deform type."""
    return record([("p", "f", 3), ("n", "f", 3), ("uv", "f", 2), ("auv", "f", (additional_uv, 4)), ("d", "B", 1)])


_BDEF4 = [("i", "bone", 4), ("w", "f", 4)]
WEIGHT_FIELDS = {  # deform type → its weight block after the head (then the f32 edge scale)
    0: [("i", "bone", 1)],  # BDEF1
    1: [("i", "bone", 2), ("w", "f", 1)],  # BDEF2: weight of the first bone
    2: _BDEF4,  # BDEF4
    3: [("i", "bone", 2), ("w", "f", 1), ("c", "f", 3), ("r0", "f", 3), ("r1", "f", 3)],  # SDEF
    4: _BDEF4,  # QDEF (2.1)
}
BONES_PER_DEFORM = (1, 2, 4, 2, 4)


@numba.njit(cache=True, nogil=True)
def _scan_vertices(buf, start, count, head, weight_size, wmax, out_head, out_w, out_edge):
    """Copy each vertex's fixed head (pos..deform byte), weight block and edge scale into
    tables. ``weight_size[t]``: bytes of deform type t's block. Returns (end offset, 0) or
    (byte offset, 1 truncated | 2 unknown deform type)."""
    n = buf.shape[0]
    p = start
    for v in range(count):
        if p + head > n:
            return p, 1
        for j in range(head):
            out_head[v, j] = buf[p + j]
        t = buf[p + head - 1]
        if t >= weight_size.shape[0]:
            return p + head - 1, 2
        s = weight_size[t]
        q = p + head
        if q + s + 4 > n:
            return p, 1
        for j in range(s):
            out_w[v, j] = buf[q + j]
        for j in range(s, wmax):
            out_w[v, j] = 0
        q += s
        for j in range(4):
            out_edge[v, j] = buf[q + j]
        p = q + 4
    return p, 0


def read_vertices(r: PmxReader, f: dict, additional_uv: int) -> None:
    """Vertex count and records → ``vertex_*`` fields."""
    hdt = head_record(additional_uv)
    bone_dt = {"bone": idx_dtype(r.sizes.get("vertex_bone", r.sizes["bone"]))}
    wdt = [record(WEIGHT_FIELDS[t], bone_dt) for t in range(5)]
    weight_size = np.array([d.itemsize for d in wdt], np.int64)
    nv = r.i32_count(hdt.itemsize + 4 + weight_size[0], "vertex")
    wmax = int(weight_size.max())
    out_head = np.empty((nv, hdt.itemsize), np.uint8)
    out_w = np.empty((nv, wmax), np.uint8)
    out_edge = np.empty((nv, 4), np.uint8)
    buf = np.frombuffer(r.data, np.uint8)
    end, err = _scan_vertices(buf, r.pos, nv, hdt.itemsize, weight_size, wmax, out_head, out_w, out_edge)
    if err == 2:
        raise r.error(f"unknown deform type {r.data[end]}", end)
    if err == 1:
        raise r.error(f"file ends inside vertex record starting here ({nv} vertices declared)", end)
    hv = out_head.view(hdt).reshape(nv)
    deform = hv["d"].copy()
    f.update(vertex_position=hv["p"], vertex_normal=hv["n"], vertex_uv=hv["uv"], vertex_additional_uv=hv["auv"],
             vertex_deform=deform, vertex_edge_scale=out_edge.view("<f4").reshape(nv))
    bi = np.zeros((nv, 4), np.int32)
    bw = np.zeros((nv, 4), np.float32)
    sdef = {k: np.zeros((nv, 3), np.float32) for k in ("c", "r0", "r1")}
    for t in np.unique(deform):
        sel = np.nonzero(deform == t)[0]
        d = wdt[t]
        blk = np.ascontiguousarray(out_w[sel, :d.itemsize]).view(d).reshape(len(sel))
        ii = blk["i"].reshape(len(sel), -1)
        bi[sel, :ii.shape[1]] = ii
        if t == 0:
            bw[sel, 0] = 1.0
        elif t in (1, 3):
            bw[sel, 0] = blk["w"]
            bw[sel, 1] = np.float32(1.0) - blk["w"]
            if t == 3:
                for k in sdef:
                    sdef[k][sel] = blk[k]
        else:
            bw[sel] = blk["w"]
    f.update(vertex_bone_index=bi, vertex_bone_weight=bw, vertex_sdef_c=sdef["c"], vertex_sdef_r0=sdef["r0"],
             vertex_sdef_r1=sdef["r1"])
    r.pos = end


def read_faces(r: PmxReader, f: dict) -> None:
    """Face index count and indices → ``face_vertex_index`` (F, 3) int32."""
    vsz = r.sizes["vertex"]
    nidx = r.i32_count(vsz, "face index")
    if nidx % 3:
        raise r.error(f"face index count {nidx} is not a multiple of 3", r.pos - 4)
    f["face_vertex_index"] = r.array(idx_dtype(vsz, True), nidx).astype(np.int32).reshape(-1, 3)


def _bone_index(model, extras: dict) -> np.ndarray:
    """(V, 4) int64 bone indices to write: indices the build zeroed (out of range with zero
    weight) get their file values back unless changed since."""
    bi = np.array(model.vertex_bone_index, np.int64)
    patch = extras.get("vertex_bone_index_patch")
    if patch is not None and bi.size == model.num_vertices * 4:
        pos, val = patch
        if len(pos) and pos.max() < bi.size:
            still = bi.ravel()[pos] == 0
            bi.ravel()[pos[still]] = val[still]
    return bi


def write_vertices(w: PmxWriter, model, extras: dict, additional_uv: int) -> None:
    """Vertex count and records (one structured array per deform type, scattered by offset)."""
    V = model.num_vertices
    w.i32(V)
    bi = _bone_index(model, extras)
    deform = model.vertex_deform
    head = head_record(additional_uv)
    idx = index_dtypes(w.sizes)
    dts = [np.dtype([("h", head)] + record(WEIGHT_FIELDS[t], idx).descr + [("e", "<f4")]) for t in range(5)]
    sz = np.array([d.itemsize for d in dts], np.int64)[deform] if V else np.zeros(0, np.int64)
    offs = np.zeros(V + 1, np.int64)
    np.cumsum(sz, out=offs[1:])
    out = np.zeros(int(offs[-1]), np.uint8)
    for t in np.unique(deform):
        t = int(t)
        sel = np.nonzero(deform == t)[0]
        dt = dts[t]
        rec = np.zeros(len(sel), dt)
        rec["h"]["p"] = model.vertex_position[sel]
        rec["h"]["n"] = model.vertex_normal[sel]
        rec["h"]["uv"] = model.vertex_uv[sel]
        if additional_uv:
            rec["h"]["auv"] = model.vertex_additional_uv[sel]
        rec["h"]["d"] = t
        rec["i"] = bi[sel, :BONES_PER_DEFORM[t]].reshape(rec["i"].shape)
        if t in (1, 3):
            rec["w"] = model.vertex_bone_weight[sel, 0]
        elif t in (2, 4):
            rec["w"] = model.vertex_bone_weight[sel]
        if t == 3:
            rec["c"] = model.vertex_sdef_c[sel]
            rec["r0"] = model.vertex_sdef_r0[sel]
            rec["r1"] = model.vertex_sdef_r1[sel]
        rec["e"] = model.vertex_edge_scale[sel]
        out[offs[sel][:, None] + np.arange(dt.itemsize)] = rec.view(np.uint8).reshape(len(sel), dt.itemsize)
    w.raw(out.tobytes())


def write_faces(w: PmxWriter, model) -> None:
    fv = model.face_vertex_index
    w.i32(fv.size)
    w.array(fv.astype(idx_dtype(w.sizes["vertex"], True)))
