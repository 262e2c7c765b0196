"""Palette batches (what D3DX's ConvertToIndexedBlendedMesh did): split each material's triangles
into batches that reference at most P bones, duplicating vertices shared across batches.

In: a ``Model`` and P. Out: ``PaletteBatches`` — batches in material order, each a contiguous
range of the new face list, a palette of ≤ P global bone ids, and new vertices (V', 4) whose bone
slots index their batch's palette. Greedy per material: grow a batch by the triangle that needs
the fewest new bones (triangles whose bones are all present join for free).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from mmdkit.errors import BuildError
from mmdkit.model.deform import effective_weights, used_slots

__all__ = ["PaletteBatches", "build_palette_batches", "vertex_bone_sets"]


def vertex_bone_sets(model):
    """Bones each vertex needs in its palette: (V, 4) int32 (unused -1), sorted unique per row.
    The slots skinning reads (``model.deform.used_slots``)."""
    d = np.asarray(model.vertex_deform)
    bi = np.asarray(model.vertex_bone_index, np.int32)
    need = used_slots(d, effective_weights(d, model.vertex_bone_weight))
    vb = np.where(need, bi, np.int32(2 ** 31 - 1))
    vb.sort(axis=1)
    dup = np.zeros_like(need)
    dup[:, 1:] = vb[:, 1:] == vb[:, :-1]
    vb[dup] = 2 ** 31 - 1
    vb.sort(axis=1)
    vb[vb == 2 ** 31 - 1] = -1
    return vb


@njit(cache=True, nogil=True)
def _triangle_bones(face_vertex_index, vertex_bones):
    """The distinct bones each triangle needs → (triangle_bone (F, 12) int32, -1 padded;
    triangle_bone_count (F,) int32). face_vertex_index (F, 3) int32; vertex_bones (V, 4) int32 from
    ``vertex_bone_sets`` (-1 = slot unused)."""
    F = face_vertex_index.shape[0]
    triangle_bone = np.full((F, 12), -1, np.int32)
    triangle_bone_count = np.zeros(F, np.int32)
    for t in range(F):
        n = 0
        for c in range(3):
            v = face_vertex_index[t, c]
            for k in range(4):
                b = vertex_bones[v, k]
                if b < 0:
                    break
                seen = False
                for j in range(n):
                    if triangle_bone[t, j] == b:
                        seen = True
                        break
                if not seen:
                    triangle_bone[t, n] = b
                    n += 1
        triangle_bone_count[t] = n
    return triangle_bone, triangle_bone_count


@njit(cache=True, nogil=True)
def _build(face_vertex_index, material_face_start, vertex_bones, vertex_bone_index, num_bones, P, keep_order):
    """Greedy palette batches per material (the fields of ``PaletteBatches``, in its order), or
    None when a triangle needs more than P bones.

    face_vertex_index (F, 3) int32; material_face_start (M+1,) int32; vertex_bones (V, 4) int32
    from ``vertex_bone_sets``; vertex_bone_index (V, 4) int32 as stored; num_bones B; P palette size;
    keep_order: batches are runs of consecutive triangles. Build time only (allocates).
    """
    F = face_vertex_index.shape[0]
    V = vertex_bones.shape[0]
    triangle_bone, triangle_bone_count = _triangle_bones(face_vertex_index, vertex_bones)
    # bone → faces (CSR, faces ascending)
    cnt = np.zeros(num_bones + 1, np.int64)
    for t in range(F):
        for j in range(triangle_bone_count[t]):
            cnt[triangle_bone[t, j] + 1] += 1
    start = np.cumsum(cnt)
    fill = start[:-1].copy()
    inc = np.empty(start[-1], np.int32)
    for t in range(F):
        for j in range(triangle_bone_count[t]):
            b = triangle_bone[t, j]
            inc[fill[b]] = t
            fill[b] += 1

    out_face = np.empty((F, 3), np.int32)
    face_source = np.empty(F, np.int32)
    batch_material = np.empty(F + 1, np.int32)
    batch_face_start = np.zeros(F + 2, np.int32)
    batch_palette = np.full((F + 1, P), -1, np.int32)
    vertex_source = np.empty(3 * F, np.int32)
    vertex_pal = np.zeros((3 * F, 4), np.int32)
    batch_vertex_start = np.zeros(F + 2, np.int32)

    taken = np.zeros(F, np.bool_)
    missing = np.zeros(F, np.int32)
    pal_stamp = np.full(num_bones, -1, np.int32)
    pal_pos = np.zeros(num_bones, np.int32)
    vstamp = np.full(V, -1, np.int32)
    vnew = np.zeros(V, np.int32)
    members = np.empty(F, np.int32)

    nb = 0
    nf = 0
    nv = 0
    M = material_face_start.shape[0] - 1
    for m in range(M):
        f0 = material_face_start[m]
        f1 = material_face_start[m + 1]
        left = f1 - f0
        first = f0  # lowest index not yet taken
        while left > 0:
            while taken[first]:
                first += 1
            psize = 0
            nmem = 0
            if keep_order:
                # sequential: take triangles in file order while the palette still fits them
                t = first
                while t < f1:
                    extra = 0
                    for j in range(triangle_bone_count[t]):
                        if pal_stamp[triangle_bone[t, j]] != nb:
                            extra += 1
                    if psize + extra > P:
                        break
                    for j in range(triangle_bone_count[t]):
                        b = triangle_bone[t, j]
                        if pal_stamp[b] != nb:
                            pal_stamp[b] = nb
                            pal_pos[b] = psize
                            batch_palette[nb, psize] = b
                            psize += 1
                    taken[t] = True
                    members[nmem] = t
                    nmem += 1
                    t += 1
            else:
                for t in range(first, f1):
                    if not taken[t]:
                        missing[t] = triangle_bone_count[t]
                seed = first
                while seed >= 0:
                    # add the seed's missing bones; triangles completed by them join the batch
                    for j in range(triangle_bone_count[seed]):
                        b = triangle_bone[seed, j]
                        if pal_stamp[b] == nb:
                            continue
                        pal_stamp[b] = nb
                        pal_pos[b] = psize
                        batch_palette[nb, psize] = b
                        psize += 1
                        # faces of this material that use b (CSR rows are ascending: binary search f0)
                        lo = start[b]
                        hi = start[b + 1]
                        a = lo
                        z = hi
                        while a < z:
                            mid = (a + z) // 2
                            if inc[mid] < first:
                                a = mid + 1
                            else:
                                z = mid
                        for r in range(a, hi):
                            t = inc[r]
                            if t >= f1:
                                break
                            if taken[t]:
                                continue
                            missing[t] -= 1
                            if missing[t] == 0:
                                taken[t] = True
                                members[nmem] = t
                                nmem += 1
                    # next seed: the untaken triangle needing the fewest new bones that still fit
                    room = P - psize
                    seed = -1
                    best = room + 1
                    if room > 0:
                        for t in range(first, f1):
                            if not taken[t] and missing[t] < best:
                                best = missing[t]
                                seed = t
                                if best == 1:
                                    break
                # keep file order inside the batch
                members[:nmem].sort()
            if nmem == 0:
                return None  # a triangle needs more than P bones (checked by the caller first)
            # emit the batch: faces, new vertices, palette slots
            batch_material[nb] = m
            batch_face_start[nb] = nf
            batch_vertex_start[nb] = nv
            for i in range(nmem):
                t = members[i]
                face_source[nf] = t
                for c in range(3):
                    v = face_vertex_index[t, c]
                    if vstamp[v] != nb:
                        vstamp[v] = nb
                        vnew[v] = nv
                        vertex_source[nv] = v
                        for k in range(4):
                            b = vertex_bone_index[v, k]
                            if b >= 0 and b < num_bones and pal_stamp[b] == nb:
                                vertex_pal[nv, k] = pal_pos[b]
                            else:  # slot not needed (zero weight): any palette entry will do
                                vertex_pal[nv, k] = 0
                        nv += 1
                    out_face[nf, c] = vnew[v]
                nf += 1
            left -= nmem
            nb += 1
    batch_face_start[nb] = nf
    batch_vertex_start[nb] = nv
    return (batch_material[:nb].copy(), batch_face_start[:nb + 1].copy(), batch_palette[:nb].copy(),
            out_face, face_source, vertex_source[:nv].copy(), vertex_pal[:nv].copy(),
            batch_vertex_start[:nb + 1].copy())


@dataclass(frozen=True, eq=False)
class PaletteBatches:
    """Batches of one Model for a bone palette of ``palette_size`` matrices.

    batch_material (nb,) int32; batch_face_start (nb+1,) int32 into face_vertex_index (F, 3) int32
    (new vertex ids; all triangles kept, materials in file order, file order inside a batch);
    face_source (F,) int32 original triangle; batch_palette (nb, P) int32 global bone ids, -1 pad;
    batch_vertex_start (nb+1,) int32: a batch's vertices are contiguous; vertex_source (V',) int32
    original vertex; vertex_palette_index (V', 4) int32 slot → index into its batch's palette;
    vertex_batch (V',) int32.
    """

    palette_size: int
    batch_material: np.ndarray
    batch_face_start: np.ndarray
    face_vertex_index: np.ndarray
    face_source: np.ndarray
    batch_palette: np.ndarray
    batch_vertex_start: np.ndarray
    vertex_source: np.ndarray
    vertex_palette_index: np.ndarray
    vertex_batch: np.ndarray
    num_source_vertices: int

    @property
    def num_batches(self) -> int:
        return len(self.batch_material)

    @property
    def num_vertices(self) -> int:
        return len(self.vertex_source)

    @property
    def num_duplicated_vertices(self) -> int:
        """New vertices beyond one per distinct original vertex that the triangles use."""
        return self.num_vertices - len(np.unique(self.vertex_source))

    def palette_matrices(self, bone_skin, out=None):
        """Gather each batch's palette: bone_skin (B, 4, 4) → (nb, P, 4, 4) float32 (pad = identity)."""
        if out is None:
            out = np.empty((self.num_batches, self.palette_size, 4, 4), np.float32)
        pal = self.batch_palette
        out[...] = np.asarray(bone_skin, np.float32)[np.maximum(pal, 0)]
        out[pal < 0] = np.eye(4, dtype=np.float32)
        return out


def _ascending_palettes(batch_palette, vertex_palette_index, vertex_batch):
    """Each batch's palette sorted by global bone id (pads last), the vertices' palette slots
    remapped: palette-local slot order then follows the model's bone order, so ``CpuSkinner``'s
    bone-sorted runs (and float rounding) are the same in a batch as in the whole mesh.
    batch_palette (nb, P) int32, vertex_palette_index (V', 4) int32, vertex_batch (V',) int32 → the
    first two, new."""
    key = np.where(batch_palette < 0, np.iinfo(np.int32).max, batch_palette)
    order = np.argsort(key, axis=1, kind="stable")  # new slot → old slot
    rank = np.argsort(order, axis=1).astype(np.int32)  # old slot → new slot
    return (np.ascontiguousarray(np.take_along_axis(batch_palette, order, 1)),
            np.ascontiguousarray(rank[vertex_batch[:, None], vertex_palette_index]))


def build_palette_batches(model, palette_size: int = 36, *, keep_order: bool = False) -> PaletteBatches:
    """Split ``model``'s triangles per material into batches of ≤ ``palette_size`` bones.

    keep_order=False (default): triangles of a material may move between its batches (fewer
    batches); True: each batch is a run of consecutive triangles (draw order kept exactly, which
    matters for self-overlapping translucent materials). Raises BuildError when one triangle alone
    needs more bones than the palette holds (at most 12 are ever needed).
    """
    P = int(palette_size)
    if P < 1:
        raise BuildError(f"palette_size must be ≥ 1, got {P}", section="palette")
    face = np.ascontiguousarray(model.face_vertex_index, np.int32)
    vertex_bones = np.ascontiguousarray(vertex_bone_sets(model))
    _, triangle_bone_count = _triangle_bones(face, vertex_bones)
    if len(triangle_bone_count) and triangle_bone_count.max() > P:
        t = int(np.argmax(triangle_bone_count))
        raise BuildError(f"triangle {t} needs {int(triangle_bone_count[t])} bones, more than palette_size={P}",
                         path=getattr(model, "source_path", "") or "", section="palette")
    res = _build(face, np.ascontiguousarray(model.material_face_start, np.int32), vertex_bones,
                 np.ascontiguousarray(model.vertex_bone_index, np.int32), model.num_bones, P, bool(keep_order))
    bm, bfs, bp, fv, fs, vs, vp, bvs = res
    vbatch = np.repeat(np.arange(len(bm), dtype=np.int32), np.diff(bvs))
    bp, vp = _ascending_palettes(bp, vp, vbatch)
    pb = PaletteBatches(P, bm, bfs, fv, fs, bp, bvs, vs, vp, vbatch, model.num_vertices)
    for a in (bm, bfs, fv, fs, bp, bvs, vs, vp, vbatch):
        a.flags.writeable = False
    return pb
