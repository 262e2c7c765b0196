"""CPU skinning: bind mesh + skinning matrices → posed positions and unit normals.

In: a ``Model`` (precomputed once into ``CpuSkinner``), per frame ``bone_skin`` (B, 4, 4) float32
(= bone_world @ translate(-bone_position)) and optional vertex-morph offsets (V, 3) float32.
Out: caller-owned (V, 3) float32 positions and normals. Kernels: BDEF1/2/4 (linear blend, weights
used as stored), SDEF (MMD's spherical deform) and QDEF (dual quaternions), compiled with numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import put3, qfrom_matrix3_scalar, qrot_scalar, qslerp_scalar
from mmdkit.errors import BuildError
from mmdkit.model.deform import effective_weights, used_slots
from mmdkit.model.model import DEFORM_QDEF, DEFORM_SDEF

__all__ = ["CpuSkinner", "prepare_normals", "skin_range", "skin_serial", "skin_parallel"]

# vertices per parallel work item: big enough that scheduling is noise, small enough to balance
CHUNK = 2048


# --- small math on float32 scalars (inlined into the kernels) ----------------------------
@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _unit(nx, ny, nz):
    """Normalised (nx, ny, nz); (0, 1, 0) when a bone matrix squashed the normal away.
    Scalars only: the kernels write the result, so numba keeps no per-vertex reference count."""
    l2 = nx * nx + ny * ny + nz * nz
    if l2 > 1e-30:
        inv = 1.0 / np.sqrt(l2)
        return nx * inv, ny * inv, nz * inv
    return nx * 0.0, ny * 0.0 + 1.0, nz * 0.0


# --- the kernel ---------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def skin_range(lo, hi, bone_skin, vertex_deform, vertex_bone, vertex_weight, vertex_bind_position,
               vertex_bind_normal, sdef_c, sdef_cr0, sdef_cr1, vertex_offset, has_offset,
               vertex_position_out, vertex_normal_out):
    """Skin vertices [lo, hi): posed positions and unit normals, model space.

    Model inputs: bone_skin (B, 4, 4) float32 skinning matrices (bone_world @ translate(-bone
    position)); vertex_deform (V,) uint8 DEFORM_*; vertex_bone (V, 4) uint16|int32 (slot 2 of an
    SDEF vertex = its row S in the sdef_* tables; unused slots 0); vertex_weight (V, 4) float32 from
    ``model.deform.effective_weights``; vertex_bind_position, vertex_bind_normal (V, 3) float32 bind
    pose (unit normals); sdef_c, sdef_cr0, sdef_cr1 (S, 3) float32 SDEF centre and blended C' points.
    State in: vertex_offset (V, 3) float32 vertex-morph offsets, read when has_offset.
    State out: vertex_position_out, vertex_normal_out (V, 3) float32, rows [lo, hi) written.
    """
    M = bone_skin  # the matrix blends below read as algebra
    for v in range(lo, hi):
        # every branch computes the skinned position (ox, oy, oz) and normal (mx, my, mz); the
        # one write at the end keeps numba from reference-counting the outputs per vertex
        px = vertex_bind_position[v, 0]
        py = vertex_bind_position[v, 1]
        pz = vertex_bind_position[v, 2]
        if has_offset:
            px += vertex_offset[v, 0]; py += vertex_offset[v, 1]; pz += vertex_offset[v, 2]
        nx = vertex_bind_normal[v, 0]
        ny = vertex_bind_normal[v, 1]
        nz = vertex_bind_normal[v, 2]
        d = vertex_deform[v]
        if d == 0:  # BDEF1: one matrix
            b = vertex_bone[v, 0]
            ox = M[b, 0, 0] * px + M[b, 0, 1] * py + M[b, 0, 2] * pz + M[b, 0, 3]
            oy = M[b, 1, 0] * px + M[b, 1, 1] * py + M[b, 1, 2] * pz + M[b, 1, 3]
            oz = M[b, 2, 0] * px + M[b, 2, 1] * py + M[b, 2, 2] * pz + M[b, 2, 3]
            mx = M[b, 0, 0] * nx + M[b, 0, 1] * ny + M[b, 0, 2] * nz
            my = M[b, 1, 0] * nx + M[b, 1, 1] * ny + M[b, 1, 2] * nz
            mz = M[b, 2, 0] * nx + M[b, 2, 1] * ny + M[b, 2, 2] * nz
        elif d == 1 or d == 2:  # BDEF2 / BDEF4: blend the 3x4 matrices, then transform once
            b = vertex_bone[v, 0]
            w = vertex_weight[v, 0]
            a00 = w * M[b, 0, 0]; a01 = w * M[b, 0, 1]; a02 = w * M[b, 0, 2]; a03 = w * M[b, 0, 3]
            a10 = w * M[b, 1, 0]; a11 = w * M[b, 1, 1]; a12 = w * M[b, 1, 2]; a13 = w * M[b, 1, 3]
            a20 = w * M[b, 2, 0]; a21 = w * M[b, 2, 1]; a22 = w * M[b, 2, 2]; a23 = w * M[b, 2, 3]
            nk = 2 if d == 1 else 4
            for k in range(1, nk):
                w = vertex_weight[v, k]
                if w != 0.0:
                    b = vertex_bone[v, k]
                    a00 += w * M[b, 0, 0]; a01 += w * M[b, 0, 1]; a02 += w * M[b, 0, 2]; a03 += w * M[b, 0, 3]
                    a10 += w * M[b, 1, 0]; a11 += w * M[b, 1, 1]; a12 += w * M[b, 1, 2]; a13 += w * M[b, 1, 3]
                    a20 += w * M[b, 2, 0]; a21 += w * M[b, 2, 1]; a22 += w * M[b, 2, 2]; a23 += w * M[b, 2, 3]
            ox = a00 * px + a01 * py + a02 * pz + a03
            oy = a10 * px + a11 * py + a12 * pz + a13
            oz = a20 * px + a21 * py + a22 * pz + a23
            mx = a00 * nx + a01 * ny + a02 * nz
            my = a10 * nx + a11 * ny + a12 * nz
            mz = a20 * nx + a21 * ny + a22 * nz
        elif d == 3:  # SDEF: rotate about C by slerp(q0, q1, w1), translate by the blended C' points
            b0 = vertex_bone[v, 0]
            b1 = vertex_bone[v, 1]
            s = vertex_bone[v, 2]
            w0 = vertex_weight[v, 0]
            w1 = np.float32(1.0) - w0
            x0, y0, z0, q0w = qfrom_matrix3_scalar(M[b0, 0, 0], M[b0, 0, 1], M[b0, 0, 2], M[b0, 1, 0], M[b0, 1, 1],
                                                 M[b0, 1, 2], M[b0, 2, 0], M[b0, 2, 1], M[b0, 2, 2])
            x1, y1, z1, q1w = qfrom_matrix3_scalar(M[b1, 0, 0], M[b1, 0, 1], M[b1, 0, 2], M[b1, 1, 0], M[b1, 1, 1],
                                                 M[b1, 1, 2], M[b1, 2, 0], M[b1, 2, 1], M[b1, 2, 2])
            qx, qy, qz, qw = qslerp_scalar(x0, y0, z0, q0w, x1, y1, z1, q1w, w1)  # shortest arc
            ql = np.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
            qx /= ql; qy /= ql; qz /= ql; qw /= ql
            cx = sdef_c[s, 0]; cy = sdef_c[s, 1]; cz = sdef_c[s, 2]
            rx, ry, rz = qrot_scalar(qx, qy, qz, qw, px - cx, py - cy, pz - cz)
            ax = sdef_cr0[s, 0]; ay = sdef_cr0[s, 1]; az = sdef_cr0[s, 2]
            bx = sdef_cr1[s, 0]; by = sdef_cr1[s, 1]; bz = sdef_cr1[s, 2]
            ox = rx + (w0 * (M[b0, 0, 0] * ax + M[b0, 0, 1] * ay + M[b0, 0, 2] * az + M[b0, 0, 3])
                       + w1 * (M[b1, 0, 0] * bx + M[b1, 0, 1] * by + M[b1, 0, 2] * bz + M[b1, 0, 3]))
            oy = ry + (w0 * (M[b0, 1, 0] * ax + M[b0, 1, 1] * ay + M[b0, 1, 2] * az + M[b0, 1, 3])
                       + w1 * (M[b1, 1, 0] * bx + M[b1, 1, 1] * by + M[b1, 1, 2] * bz + M[b1, 1, 3]))
            oz = rz + (w0 * (M[b0, 2, 0] * ax + M[b0, 2, 1] * ay + M[b0, 2, 2] * az + M[b0, 2, 3])
                       + w1 * (M[b1, 2, 0] * bx + M[b1, 2, 1] * by + M[b1, 2, 2] * bz + M[b1, 2, 3]))
            mx, my, mz = qrot_scalar(qx, qy, qz, qw, nx, ny, nz)
        else:  # QDEF: blend unit dual quaternions of up to four bones
            rx = np.float32(0.0); ry = np.float32(0.0); rz = np.float32(0.0); rw = np.float32(0.0)
            dx = np.float32(0.0); dy = np.float32(0.0); dz = np.float32(0.0); dw = np.float32(0.0)
            fx = np.float32(0.0); fy = np.float32(0.0); fz = np.float32(0.0); fw = np.float32(0.0)
            first = True
            for k in range(4):
                w = vertex_weight[v, k]
                if w == 0.0:
                    continue
                b = vertex_bone[v, k]
                x, y, z, qw = qfrom_matrix3_scalar(M[b, 0, 0], M[b, 0, 1], M[b, 0, 2], M[b, 1, 0], M[b, 1, 1],
                                                  M[b, 1, 2], M[b, 2, 0], M[b, 2, 1], M[b, 2, 2])
                if first:
                    fx = x; fy = y; fz = z; fw = qw
                    first = False
                elif fx * x + fy * y + fz * z + fw * qw < 0.0:  # same hemisphere as the first
                    x = -x; y = -y; z = -z; qw = -qw
                tx = M[b, 0, 3]; ty = M[b, 1, 3]; tz = M[b, 2, 3]
                # dual part = 0.5 * (t, 0) * q
                ex = 0.5 * (tx * qw + ty * z - tz * y)
                ey = 0.5 * (ty * qw + tz * x - tx * z)
                ez = 0.5 * (tz * qw + tx * y - ty * x)
                ew = -0.5 * (tx * x + ty * y + tz * z)
                rx += w * x; ry += w * y; rz += w * z; rw += w * qw
                dx += w * ex; dy += w * ey; dz += w * ez; dw += w * ew
            ln = np.sqrt(rx * rx + ry * ry + rz * rz + rw * rw)
            if ln < 1e-20:  # no weight at all: leave the vertex at its bind pose
                ox = px; oy = py; oz = pz
                mx = nx; my = ny; mz = nz
            else:
                inv = 1.0 / ln
                rx *= inv; ry *= inv; rz *= inv; rw *= inv
                dx *= inv; dy *= inv; dz *= inv; dw *= inv
                # translation = 2 * (d * conj(r)).xyz
                tx = 2.0 * (-dw * rx + dx * rw - dy * rz + dz * ry)
                ty = 2.0 * (-dw * ry + dy * rw - dz * rx + dx * rz)
                tz = 2.0 * (-dw * rz + dz * rw - dx * ry + dy * rx)
                ox, oy, oz = qrot_scalar(rx, ry, rz, rw, px, py, pz)
                ox += tx; oy += ty; oz += tz
                mx, my, mz = qrot_scalar(rx, ry, rz, rw, nx, ny, nz)
        put3(vertex_position_out, v, ox, oy, oz)
        nx, ny, nz = _unit(mx, my, mz)
        put3(vertex_normal_out, v, nx, ny, nz)


@njit(cache=True, nogil=True, error_model="numpy")
def skin_serial(bone_skin, vertex_deform, vertex_bone, vertex_weight, vertex_bind_position,
                vertex_bind_normal, sdef_c, sdef_cr0, sdef_cr1, vertex_offset, has_offset,
                vertex_position_out, vertex_normal_out):
    """All V vertices on one thread; parameters as ``skin_range``."""
    skin_range(0, vertex_deform.shape[0], bone_skin, vertex_deform, vertex_bone, vertex_weight,
               vertex_bind_position, vertex_bind_normal, sdef_c, sdef_cr0, sdef_cr1, vertex_offset,
               has_offset, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def skin_parallel(bone_skin, vertex_deform, vertex_bone, vertex_weight, vertex_bind_position,
                  vertex_bind_normal, sdef_c, sdef_cr0, sdef_cr1, vertex_offset, has_offset,
                  vertex_position_out, vertex_normal_out):
    """All V vertices in chunks of ``CHUNK`` over numba's threads; parameters as ``skin_range``."""
    n = vertex_deform.shape[0]
    nchunk = (n + CHUNK - 1) // CHUNK
    for c in prange(nchunk):
        lo = c * CHUNK
        hi = min(n, lo + CHUNK)
        skin_range(lo, hi, bone_skin, vertex_deform, vertex_bone, vertex_weight, vertex_bind_position,
                   vertex_bind_normal, sdef_c, sdef_cr0, sdef_cr1, vertex_offset, has_offset,
                   vertex_position_out, vertex_normal_out)


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


class CpuSkinner:
    """Precomputed, read-only skinning data of one ``Model``; ``skin`` is safe to call from many
    threads and characters at once (it keeps no per-call state).

    Attributes (all read-only): ``bind_position`` (V, 3) float32, ``bind_normal`` (V, 3) float32
    (unit, zero-length file normals repaired), ``vertex_deform`` (V,) uint8, ``vertex_bone``
    (V, 4) uint16|int32 (slot 2 of an SDEF vertex = its row in ``sdef_c``/``sdef_cr0``/``sdef_cr1``
    (S, 3) float32), ``vertex_weight`` (V, 4) float32, ``num_vertices``, ``num_bones``.
    ``parallel``: None = threaded when the mesh is large enough to pay (≥ 16k vertices).
    """

    def __init__(self, model, *, parallel: bool | None = None):
        V = model.num_vertices
        B = model.num_bones
        self.num_vertices = V
        self.num_bones = B
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
        small = B <= 65535 and len(sdef_rows) <= 65535
        self.vertex_bone = np.ascontiguousarray(bone, np.uint16 if small else np.int32)
        self.vertex_weight = weight
        self.vertex_deform = deform
        self.bind_position = np.ascontiguousarray(model.vertex_position, np.float32).copy()
        self.bind_normal = prepare_normals(model.vertex_position, model.vertex_normal,
                                           model.face_vertex_index if model.face_vertex_index is not None
                                           else np.zeros((0, 3), np.int32))
        if len(sdef_rows):
            self.sdef_c, self.sdef_cr0, self.sdef_cr1 = _sdef_tables(model, sdef_rows)
        else:
            self.sdef_c = self.sdef_cr0 = self.sdef_cr1 = np.zeros((1, 3), np.float32)
        self.num_sdef = len(sdef_rows)
        self.num_qdef = int((deform == DEFORM_QDEF).sum())
        self._no_offset = np.zeros((1, 3), np.float32)
        self.parallel = (V >= 16384) if parallel is None else bool(parallel)
        _readonly(self.vertex_bone, self.vertex_weight, self.vertex_deform, self.bind_position,
                  self.bind_normal, self.sdef_c, self.sdef_cr0, self.sdef_cr1, self._no_offset)

    def skin(self, bone_skin, vertex_offset, out_position, out_normal, *, parallel: bool | None = None):
        """Write posed positions and unit normals.

        bone_skin (B, 4, 4) float32 C-contiguous; vertex_offset (V, 3) float32 or None (vertex-morph
        offsets added to the bind positions first); out_position, out_normal (V, 3) float32
        C-contiguous, written in full. Allocates nothing.
        """
        if bone_skin.shape[0] < self.num_bones or out_position.shape[0] != self.num_vertices \
                or out_normal.shape[0] != self.num_vertices:
            raise ValueError("skin: array shapes do not match the model")
        if vertex_offset is None:
            off, has = self._no_offset, False
        else:
            off, has = vertex_offset, True
        fn = skin_parallel if (self.parallel if parallel is None else parallel) else skin_serial
        fn(bone_skin, self.vertex_deform, self.vertex_bone, self.vertex_weight, self.bind_position,
           self.bind_normal, self.sdef_c, self.sdef_cr0, self.sdef_cr1, off, has, out_position, out_normal)

