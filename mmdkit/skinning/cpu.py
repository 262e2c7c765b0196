"""CPU skinning: bind mesh + skinning matrices → posed positions and unit normals.

In: a ``Model`` (regrouped once into ``CpuSkinner``: vertices sorted by deform type and bone slots,
cut into runs that share their bones (short BDEF1 stretches join a neighbouring BDEF2/BDEF4 run with
weight 1 on their bone, exactly, so more output rows sit in blocks), bind data as float32
structure-of-arrays, each type with only the weights it reads), per frame ``bone_skin`` (B, 4, 4) float32
(= bone_world @ translate(-bone_position)) and optional vertex-morph offsets (V, 3) float32.
Out: caller-owned (V, 3) float32 positions and (optionally) normals, in the model's vertex order.
Kernels (BDEF1/2/4, SDEF, QDEF) are in ``skinning.kernels``.
"""

from __future__ import annotations

import numba
import numpy as np

from mmdkit.errors import BuildError
from mmdkit.model.deform import effective_weights, used_slots
from mmdkit.model.model import DEFORM_BDEF1, DEFORM_BDEF2, DEFORM_BDEF4, DEFORM_QDEF, DEFORM_SDEF
from mmdkit.skinning.kernels import GROUPS, skin_groups_parallel, skin_groups_serial
from mmdkit.skinning.scratch import PAD, SCRATCH

__all__ = ["CpuSkinner", "prepare_normals"]

# vertices per parallel work item: big enough that scheduling is noise, small enough to balance
CHUNK = 2048
# below this many vertices one thread is faster than waking numba's pool (launch ~10-20 µs)
PARALLEL_MIN_VERTICES = 16384


# --- precompute ---------------------------------------------------------------------------
def prepare_normals(position, normal, face_vertex_index):
    """Unit bind normals; zero-length/non-finite file normals are replaced by the area-weighted
    normal of their faces (oriented to agree with the file's good normals), else (0, 1, 0).

    position (V, 3) float32, normal (V, 3) float32, face_vertex_index (F, 3) int → (V, 3) float32.
    """
    n = np.asarray(normal, np.float64).copy()
    ln = np.linalg.norm(n, axis=1)
    bad = ~np.isfinite(ln) | (ln < 1e-12)
    good = ~bad
    n[good] /= ln[good, None]
    if bad.any():
        p = np.asarray(position, np.float64)
        f = np.asarray(face_vertex_index, np.int64).reshape(-1, 3)
        fn = np.cross(p[f[:, 1]] - p[f[:, 0]], p[f[:, 2]] - p[f[:, 0]]) if len(f) else np.zeros((0, 3))
        acc = np.zeros_like(n)
        for k in range(3):
            np.add.at(acc, f[:, k], fn)
        # which winding does this file use? compare face normals with the good file normals
        agree = np.einsum("ij,ij->i", acc[good], n[good]).sum() if good.any() else 1.0
        if agree < 0:
            acc = -acc
        la = np.linalg.norm(acc, axis=1)
        fix = bad & (la > 1e-12)
        n[fix] = acc[fix] / la[fix, None]
        rest = bad & ~fix
        n[rest] = (0.0, 1.0, 0.0)
    return np.ascontiguousarray(n, np.float32)


def _readonly(*arrays):
    for a in arrays:
        a.flags.writeable = False


def _sdef_tables(model, sdef_rows):
    """C, CR0, CR1 for the SDEF vertices (the static part of MMD's SDEF)."""
    c = np.asarray(model.vertex_sdef_c, np.float64)[sdef_rows]
    r0 = np.asarray(model.vertex_sdef_r0, np.float64)[sdef_rows]
    r1 = np.asarray(model.vertex_sdef_r1, np.float64)[sdef_rows]
    w0 = np.asarray(model.vertex_bone_weight, np.float64)[sdef_rows, 0:1]
    w1 = 1.0 - w0
    rw = w0 * r0 + w1 * r1
    r0p = c + r0 - rw
    r1p = c + r1 - rw
    cr0 = (c + r0p) * 0.5
    cr1 = (c + r1p) * 0.5
    return (np.ascontiguousarray(c, np.float32), np.ascontiguousarray(cr0, np.float32),
            np.ascontiguousarray(cr1, np.float32))


def _bone_sets(vertex_deform, vertex_bone, vertex_weight):
    """(V, 4) int64 bone slots and (V, 4) float32 weights with the slots of each BDEF2 and BDEF4
    vertex sorted by bone (weightless slots last: BDEF2's (1 − w1) M0 + w1 M1 is then exactly M0), so
    vertices on the same set of bones share a run whatever their slot order (the blend is a sum);
    other types as given (QDEF's first slot is its sign reference)."""
    bone = vertex_bone.astype(np.int64)
    weight = vertex_weight.copy()
    for deform, n in ((DEFORM_BDEF2, 2), (DEFORM_BDEF4, 4)):
        rows = vertex_deform == deform
        b, w = bone[rows, :n], weight[rows, :n]
        slot = np.argsort(np.where(w != 0, b, np.iinfo(np.int64).max), axis=1, kind="stable")
        bone[rows, :n] = np.take_along_axis(b, slot, 1)
        weight[rows, :n] = np.take_along_axis(w, slot, 1)
    return bone, weight


#: file-order stretches of BDEF1 vertices shorter than this may join a neighbouring BDEF2/BDEF4 run
ABSORB_MAX = 8


def _absorb(deform, bone, weight, morphable):
    """Kernel deform types, bone slots and weights with short BDEF1 stretches moved into a neighbour's
    run, so that more of a run's output rows are consecutive (the scatter writes those in blocks).

    In file order, a stretch of fewer than ABSORB_MAX BDEF1 vertices on bone a next to a BDEF2
    stretch (same morph flag) with a in a slot becomes BDEF2 with that stretch's slots and weight 1
    on a; else next to a BDEF4 stretch with a in a slot, BDEF4 the same way. The kernels then blend
    1 M_a + 0 M_b (+ ...) = M_a and transform as BDEF1 does, so the outputs do not change bit for
    bit (checked on Gene, Gene_sdef, mokou, mei; BDEF2 next to BDEF4 would not be exact: the
    blends sum in another order). deform (V,) uint8, bone (V, 4) int64 and weight (V, 4) float32
    from ``_bone_sets``, morphable (V,) bool → new (deform, bone, weight); the public tables keep
    the model's own types."""
    V = len(deform)
    kind = deform.astype(np.int64)
    bone = bone.copy()
    weight = weight.copy()
    if V < 2:
        return deform, bone, weight
    key = np.concatenate([kind[:, None], morphable[:, None], bone], 1)
    cut = np.ones(V, bool)
    cut[1:] = (key[1:] != key[:-1]).any(1)
    first = np.nonzero(cut)[0]
    length = np.diff(np.append(first, V))
    S = len(first)
    for i in np.nonzero((kind[first] == DEFORM_BDEF1) & (length < ABSORB_MAX))[0]:
        s = first[i]
        a = bone[s, 0]
        into = None
        for j in (i - 1, i + 1):
            if not (0 <= j < S and morphable[first[j]] == morphable[s]):
                continue
            t = first[j]
            if kind[t] == DEFORM_BDEF2 and (bone[t, :2] == a).any():
                into = (t, int(np.argmax(bone[t, :2] == a)))
                break
            if into is None and kind[t] == DEFORM_BDEF4 and (bone[t] == a).any():
                into = (t, int(np.argmax(bone[t] == a)))
        if into is not None:
            t, slot = into
            rows = slice(s, s + length[i])
            kind[rows] = kind[t]
            bone[rows] = bone[t]
            weight[rows] = 0.0
            weight[rows, slot] = 1.0
    return kind.astype(np.uint8), bone, weight


def _group_order(vertex_deform, vertex_bone, vertex_morphable):
    """Permutation putting vertices in group order (deform type, then unmorphed before morphed; see
    ``kernels.GROUPS``), inside a group by bone slots (so a run of vertices shares its matrices; file
    order inside a run). Also the (11,) uint64 group starts."""
    b = vertex_bone.astype(np.int64)
    group = vertex_deform.astype(np.int64) * 2 + vertex_morphable
    order = np.lexsort((b[:, 3], b[:, 2], b[:, 1], b[:, 0], group)).astype(np.uint32)
    start = np.searchsorted(group[order], np.arange(2 * len(GROUPS) + 1)).astype(np.uint64)
    start[-1] = len(order)
    return order, start


def _runs(run_bone, group_start):
    """Runs of permuted rows sharing their group and bone slots, cut to at most SCRATCH rows.

    run_bone (V, 4) int64 the bone slots that key a run, in permuted order; group_start (11,) uint64.
    Out: (R, 10) uint64 rows (first row, end row, first row + row count rounded up to 8, bone slots
    0-3, three columns left for ``_store_blocks``) and (11,) uint64 first run of each group + R."""
    V = len(run_bone)
    cut = np.zeros(V, bool)
    cut[:1] = True
    cut[1:] = (run_bone[1:] != run_bone[:-1]).any(1)
    cut[group_start[:-1][group_start[:-1] < V].astype(np.int64)] = True
    first = np.nonzero(cut)[0]
    count = np.diff(np.append(first, V))
    pieces = -(-count // SCRATCH)
    piece = np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)  # index inside its run
    lo = np.repeat(first, pieces) + SCRATCH * piece
    hi = np.minimum(lo + SCRATCH, np.repeat(first + count, pieces))
    run = np.zeros((len(lo), 10), np.uint64)
    run[:, 0] = lo
    run[:, 1] = hi
    run[:, 2] = lo + (hi - lo + 7) // 8 * 8
    run[:, 3:7] = run_bone[lo] if len(lo) else np.zeros((0, 4), np.int64)
    return run, np.searchsorted(lo, group_start.astype(np.int64)).astype(np.uint64)


def _store_blocks(order, run):
    """Each run's rows reordered so that blocks of 8 consecutive output rows come first (the scatter
    writes such a block with three 32-byte stores), then blocks of 4 (three 16-byte stores), then
    pairs (a 16-byte and an 8-byte store), the rest after; file order otherwise.

    order (V,) uint32 permuted row → original row, ascending inside a run; run (R, 10) uint64 from
    ``_runs``. Out: the new order, and run with column 7 = the end of the run's 8-blocks, column 8
    = the end of its 4-blocks, column 9 = the end of its pairs."""
    V = len(order)
    if V == 0:
        return order, run
    row_run = np.repeat(np.arange(len(run)), (run[:, 1] - run[:, 0]).astype(np.int64))
    o = order.astype(np.int64)
    new_segment = np.ones(V, bool)
    new_segment[1:] = (o[1:] != o[:-1] + 1) | (row_run[1:] != row_run[:-1])
    first = np.nonzero(new_segment)[0]
    length = np.diff(np.append(first, V))
    seg = np.cumsum(new_segment) - 1
    at = np.arange(V) - first[seg]  # place inside its segment
    n8 = length[seg] // 8 * 8
    n4 = n8 + (length[seg] - n8) // 4 * 4
    n2 = n4 + (length[seg] - n4) // 2 * 2
    kind = np.where(at < n8, 0, np.where(at < n4, 1, np.where(at < n2, 2, 3)))  # 8-block, 4-block, pair, single
    new = np.lexsort((np.arange(V), kind, row_run))
    run = run.copy()
    run[:, 7] = run[:, 0] + np.bincount(row_run, kind == 0, len(run)).astype(np.uint64)
    run[:, 8] = run[:, 7] + np.bincount(row_run, kind == 1, len(run)).astype(np.uint64)
    run[:, 9] = run[:, 8] + np.bincount(row_run, kind == 2, len(run)).astype(np.uint64)
    return order[new], run


def _chunks(group_run, run):
    """(C, 3) uint64 work items (group, first run, end run) of about CHUNK rows, none across groups."""
    rows = []
    for g in range(len(group_run) - 1):
        r = int(group_run[g])
        while r < group_run[g + 1]:
            e = r + 1
            while e < group_run[g + 1] and run[e, 1] - run[r, 0] <= CHUNK:
                e += 1
            rows.append((g, r, e))
            r = e
    return np.array(rows, np.uint64).reshape(-1, 3)


def _padded(a, axis=-1):
    """``a`` with PAD zero rows appended along ``axis`` (the 8-wide loops read up to 7 rows on)."""
    shape = list(a.shape)
    shape[axis] += PAD
    out = np.zeros(shape, a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


class CpuSkinner:
    """Precomputed, read-only skinning data of one ``Model``; ``skin`` is safe to call from many
    threads and characters at once (it keeps no per-call state).

    Attributes (all read-only), in the model's vertex order: ``bind_position`` (V, 3) float32,
    ``bind_normal`` (V, 3) float32 (unit, zero-length file normals repaired), ``vertex_deform`` (V,)
    uint8, ``vertex_bone`` (V, 4) uint16|int32 (unused slots 0; slot 2 of an SDEF vertex = its row in
    ``sdef_c``/``sdef_cr0``/``sdef_cr1`` (S, 3) float32), ``vertex_weight`` (V, 4) float32 as applied,
    ``num_vertices``, ``num_bones``. The kernels read the run-ordered copies (``group_start``,
    ``run``, ``vertex_index``, ``vertex_bind``, ...; see ``kernels.skin_runs``).
    ``vertex_morphable`` (V,) bool: the vertices whose morph offsets ``skin`` reads (default: those
    the model's vertex morphs move; the others skip the offsets).
    ``parallel``: None = threaded when the mesh is large enough to pay (≥ PARALLEL_MIN_VERTICES) and
    numba has more than one thread.
    """

    def __init__(self, model, *, vertex_morphable=None, parallel: bool | None = None):
        V = model.num_vertices
        B = model.num_bones
        source = getattr(model, "source_path", "") or ""
        deform = np.ascontiguousarray(model.vertex_deform, np.uint8)
        if V and (deform.max() > DEFORM_QDEF):
            raise BuildError(f"unknown vertex deform type {int(deform.max())}", path=source,
                             section="vertex_deform")
        bone = np.asarray(model.vertex_bone_index, np.int64).copy()
        # normalise the per-type conventions so the kernel reads only what it needs
        weight = effective_weights(deform, model.vertex_bone_weight)
        used = used_slots(deform, weight)
        if V and B == 0:
            raise BuildError("model has vertices but no bones", path=source, section="bones")
        bad = used & ((bone < 0) | (bone >= B))
        if bad.any():
            v = int(np.nonzero(bad.any(axis=1))[0][0])
            raise BuildError(f"vertex {v} references bone {bone[v].tolist()} (model has {B} bones)",
                             path=source, section="vertex_bone_index")
        bone[~used] = 0  # unused slots may hold anything in files; make them harmless
        sdef_rows = np.nonzero(deform == DEFORM_SDEF)[0]
        bone[sdef_rows, 2] = np.arange(len(sdef_rows))
        if len(sdef_rows):
            tables = _sdef_tables(model, sdef_rows)
        else:
            tables = (np.zeros((1, 3), np.float32),) * 3
        normal = prepare_normals(model.vertex_position, model.vertex_normal,
                                 model.face_vertex_index if model.face_vertex_index is not None
                                 else np.zeros((0, 3), np.int32))
        if vertex_morphable is None:
            vertex_morphable = np.zeros(V, bool)
            vertex_morphable[np.asarray(model.vertex_morph_vertex, np.int64)] = True
        morphable = np.asarray(vertex_morphable, bool)
        self._set_tables(B, deform, bone, weight, model.vertex_position, normal, tables, morphable, parallel)

    @classmethod
    def from_tables(cls, num_bones, vertex_deform, vertex_bone, vertex_weight, bind_position, bind_normal,
                    sdef_tables, vertex_morphable=None, *, parallel: bool | None = None):
        """A skinner over tables already in this class's conventions (attributes above; e.g. one
        palette batch's vertices with palette-local bone slots); sdef_tables = (c, cr0, cr1);
        vertex_morphable (V,) bool: the vertices a vertex morph may move (default: all)."""
        self = cls.__new__(cls)
        deform = np.ascontiguousarray(vertex_deform, np.uint8)
        bone = np.array(vertex_bone, np.int64)
        keep = used_slots(deform, vertex_weight)
        keep[deform == DEFORM_SDEF, 2] = True  # the SDEF table row
        bone[~keep] = 0  # the kernels read every slot of a group
        morphable = np.ones(len(deform), bool) if vertex_morphable is None else np.asarray(vertex_morphable, bool)
        self._set_tables(num_bones, deform, bone, vertex_weight, bind_position, bind_normal, sdef_tables, morphable,
                         parallel)
        return self

    def _set_tables(self, B, deform, bone, weight, position, normal, sdef_tables, morphable, parallel) -> None:
        """Keep the tables in vertex order and build the grouped copies the kernels read."""
        V = len(deform)
        self.num_vertices = V
        self.num_bones = B
        dtype = np.uint16 if B <= 65535 and V <= 65535 else np.int32
        self.vertex_bone = np.ascontiguousarray(bone, dtype)
        self.vertex_weight = np.ascontiguousarray(weight, np.float32)
        self.vertex_deform = deform
        self.bind_position = np.ascontiguousarray(position, np.float32).copy()
        self.bind_normal = np.ascontiguousarray(normal, np.float32)
        self.sdef_c, self.sdef_cr0, self.sdef_cr1 = (np.ascontiguousarray(t, np.float32) for t in sdef_tables)
        self.num_sdef = int((deform == DEFORM_SDEF).sum())
        self.num_qdef = int((deform == DEFORM_QDEF).sum())
        bone, w = _bone_sets(deform, self.vertex_bone, self.vertex_weight)
        kind, bone, w = _absorb(deform, bone, w, morphable)
        order, start = _group_order(kind, bone, morphable)
        key = bone[order]
        key[kind[order] == DEFORM_SDEF, 2] = 0  # slot 2 of SDEF is the vertex's table row
        run, self.group_run = _runs(key, start)
        order, self.run = _store_blocks(order, run)
        self.vertex_index = _padded(order)
        self.group_start = start
        self.vertex_bind = _padded(np.concatenate([self.bind_position, self.bind_normal], 1)[order].T)
        rows = [order[start[2 * t]:start[2 * t + 2]] for t in range(len(GROUPS))]
        self.bdef2_weight = _padded(w[rows[1], 1])
        self.bdef4_weight = _padded(w[rows[2]].T)
        srow = self.vertex_bone[rows[3], 2].astype(np.int64)
        self.sdef_table = _padded(np.concatenate([w[rows[3], :1], self.sdef_c[srow], self.sdef_cr0[srow],
                                                  self.sdef_cr1[srow]], 1).T)
        self.qdef_weight = np.ascontiguousarray(w[rows[4]])
        self.chunks = _chunks(self.group_run, self.run)
        self._no_offset = np.zeros((1, 3), np.float32)
        self._no_normal = np.zeros((1, 3), np.float32)
        threads = numba.config.NUMBA_NUM_THREADS > 1
        self.parallel = (V >= PARALLEL_MIN_VERTICES and threads) if parallel is None else bool(parallel)
        self._tables = (self.group_start, self.run, self.vertex_index, self.vertex_bind, self.bdef2_weight,
                        self.bdef4_weight, self.sdef_table, self.qdef_weight)
        _readonly(self.vertex_bone, self.vertex_weight, self.vertex_deform, self.bind_position, self.bind_normal,
                  self.sdef_c, self.sdef_cr0, self.sdef_cr1, self._no_offset, self.chunks, self.group_run,
                  *self._tables)

    def skin(self, bone_skin, vertex_offset, out_position, out_normal, *, parallel: bool | None = None):
        """Write posed positions and unit normals.

        bone_skin (B, 4, 4) float32 C-contiguous; vertex_offset (V, 3) float32 or None (vertex-morph
        offsets added to the bind positions first; read only at the morphable vertices);
        out_position (V, 3) float32 C-contiguous, written in full; out_normal the same, or None to
        skip normals. Allocates nothing.
        """
        shape = (self.num_vertices, 3)
        if bone_skin.shape[0] < self.num_bones or out_position.shape != shape \
                or (out_normal is not None and out_normal.shape != shape):
            raise ValueError("skin: array shapes do not match the model")
        off, has = (self._no_offset, False) if vertex_offset is None else (vertex_offset, True)
        nrm, want = (self._no_normal, False) if out_normal is None else (out_normal, True)
        if self.parallel if parallel is None else parallel:
            skin_groups_parallel(self.chunks, bone_skin, *self._tables, off, has, want, out_position, nrm)
        else:
            skin_groups_serial(self.group_run, bone_skin, *self._tables, off, has, want, out_position, nrm)
