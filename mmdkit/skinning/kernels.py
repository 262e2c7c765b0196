"""CPU skinning kernels over runs of vertices that share their bones (numba, float32).

In: skinning matrices ``bone_skin`` (B, 4, 4) float32 and the run-ordered tables that
``cpu.CpuSkinner`` builds once: vertices grouped by deform type, inside a group by bone slots, cut
into runs of at most ``scratch.SCRATCH`` rows that share all their bones. Out: posed positions and
unit normals written at the vertices' original rows.

BDEF1/2/4 and SDEF run kernels read a run's matrices (SDEF: bone quaternions) once, as broadcast
constants, then compute the run's positions and normals in straight-line, branch-free loops over the
structure-of-arrays bind data (LLVM vectorises them 8 wide with AVX2/FMA) into a stack scratch
buffer, which a second short loop scatters to the output rows (``scratch``). QDEF vertices go one
by one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import qfrom_matrix3_scalar, qrot_scalar
from mmdkit.skinning.scratch import NX, NY, NZ, OX, OY, OZ, PX, PY, PZ, gather_offsets, scatter, scratch, zero_offsets

__all__ = ["GROUPS", "skin_runs", "skin_groups_serial", "skin_groups_parallel"]

#: LLVM fast-math flags of the kernels: reassociation, fused multiply-add, approximate reciprocal and
#: functions; not nnan/ninf, so NaN/inf inputs still propagate as in IEEE arithmetic
FAST = {"contract", "arcp", "afn", "reassoc", "nsz"}

#: the PMX deform types; vertex group g holds type GROUPS[g // 2], without (g even) or with (g odd)
#: vertex-morph offsets, so vertices no vertex morph moves never read the offsets
GROUPS = ("bdef1", "bdef2", "bdef4", "sdef", "qdef")

@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _unit(nx, ny, nz):
    """Normalised (nx, ny, nz); (0, 1, 0) when a bone matrix squashed the normal away (scalars).
    Branch-free (selects), so it vectorises."""
    l2 = nx * nx + ny * ny + nz * nz
    inv = np.float32(1.0) / np.sqrt(l2)
    ok = l2 > np.float32(1e-30)
    return (nx * inv if ok else np.float32(0.0), ny * inv if ok else np.float32(1.0),
            nz * inv if ok else np.float32(0.0))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _sin_half_pi(x):
    """sin(x) for x in [0, π/2] (the slerp angles of shortest-arc unit quaternions): odd Taylor
    polynomial to x^13, error < 6e-8 there; float32 in and out (float32 coefficients)."""
    x2 = x * x
    return x * (np.float32(1.0) + x2 * (np.float32(-1.0 / 6.0) + x2 * (np.float32(1.0 / 120.0) + x2 * (
        np.float32(-1.0 / 5040.0) + x2 * (np.float32(1.0 / 362880.0) + x2 * (
            np.float32(-1.0 / 39916800.0) + x2 * np.float32(1.0 / 6227020800.0)))))))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _posed_position(s, k, v, a, vertex_bind):
    """Scratch row k = permuted row v's bind position + the scratch's morph offset, under the
    matrix rows 0-2 ``a`` (12-tuple)."""
    px = vertex_bind[0, v] + s[OX + k]; py = vertex_bind[1, v] + s[OY + k]
    pz = vertex_bind[2, v] + s[OZ + k]
    s[PX + k] = a[0] * px + a[1] * py + a[2] * pz + a[3]
    s[PY + k] = a[4] * px + a[5] * py + a[6] * pz + a[7]
    s[PZ + k] = a[8] * px + a[9] * py + a[10] * pz + a[11]


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _posed_normal(s, k, v, a, vertex_bind):
    """Scratch normal row k = permuted row v's bind normal under the 3×3 of the matrix rows 0-2
    ``a`` (12-tuple), made unit length."""
    nx = vertex_bind[3, v]; ny = vertex_bind[4, v]; nz = vertex_bind[5, v]
    s[NX + k], s[NY + k], s[NZ + k] = _unit(a[0] * nx + a[1] * ny + a[2] * nz, a[4] * nx + a[5] * ny + a[6] * nz,
                                            a[8] * nx + a[9] * ny + a[10] * nz)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST, _nrt=False)
def _bdef1(r0, r1, M, run, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
           vertex_position_out, vertex_normal_out):
    """Runs [r0, r1), BDEF1: one matrix per run."""
    s = scratch()
    if not has_offset:
        zero_offsets(s)
    for r in range(r0, r1):
        lo = run[r, 0]; end = run[r, 2]; b = run[r, 3]
        m00 = M[b, 0, 0]; m01 = M[b, 0, 1]; m02 = M[b, 0, 2]; m03 = M[b, 0, 3]
        m10 = M[b, 1, 0]; m11 = M[b, 1, 1]; m12 = M[b, 1, 2]; m13 = M[b, 1, 3]
        m20 = M[b, 2, 0]; m21 = M[b, 2, 1]; m22 = M[b, 2, 2]; m23 = M[b, 2, 3]
        if has_offset:
            gather_offsets(s, lo, end, vertex_index, vertex_offset)
        a = (m00, m01, m02, m03, m10, m11, m12, m13, m20, m21, m22, m23)
        for k in range(np.int64(end - lo)):
            _posed_position(s, k, lo + np.uint64(k), a, vertex_bind)
        if want_normal:
            for k in range(np.int64(end - lo)):
                _posed_normal(s, k, lo + np.uint64(k), a, vertex_bind)
        scatter(s, run, r, vertex_index, want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _bdef2_position(s, k, v, w1, a, b, vertex_bind):
    """Scratch row k = permuted row v's posed position (bind position + the scratch's morph offset)
    under (1 − w1) A + w1 B (a, b: rows 0-2 of A and B as 12-tuples); returns the blend (12-tuple)."""
    w0 = np.float32(1.0) - w1
    c = (w0 * a[0] + w1 * b[0], w0 * a[1] + w1 * b[1], w0 * a[2] + w1 * b[2], w0 * a[3] + w1 * b[3],
         w0 * a[4] + w1 * b[4], w0 * a[5] + w1 * b[5], w0 * a[6] + w1 * b[6], w0 * a[7] + w1 * b[7],
         w0 * a[8] + w1 * b[8], w0 * a[9] + w1 * b[9], w0 * a[10] + w1 * b[10], w0 * a[11] + w1 * b[11])
    _posed_position(s, k, v, c, vertex_bind)
    return c


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST, _nrt=False)
def _bdef2(r0, r1, g0, M, run, bdef2_weight, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
           vertex_position_out, vertex_normal_out):
    """Runs [r0, r1), BDEF2: (1 − w1) M0 + w1 M1 blended per vertex, then one transform (weights
    exactly (1, 0) or (0, 1) give M0 or M1 bit for bit); g0 = the type's first permuted row
    (bdef2_weight is indexed from it)."""
    s = scratch()
    if not has_offset:
        zero_offsets(s)
    for r in range(r0, r1):
        lo = run[r, 0]; end = run[r, 2]; b0 = run[r, 3]; b1 = run[r, 4]
        a = (M[b0, 0, 0], M[b0, 0, 1], M[b0, 0, 2], M[b0, 0, 3], M[b0, 1, 0], M[b0, 1, 1], M[b0, 1, 2], M[b0, 1, 3],
             M[b0, 2, 0], M[b0, 2, 1], M[b0, 2, 2], M[b0, 2, 3])
        b = (M[b1, 0, 0], M[b1, 0, 1], M[b1, 0, 2], M[b1, 0, 3], M[b1, 1, 0], M[b1, 1, 1], M[b1, 1, 2], M[b1, 1, 3],
             M[b1, 2, 0], M[b1, 2, 1], M[b1, 2, 2], M[b1, 2, 3])
        if has_offset:
            gather_offsets(s, lo, end, vertex_index, vertex_offset)
        if want_normal:  # one loop per case, as _bdef4
            for k in range(np.int64(end - lo)):
                v = lo + np.uint64(k)
                c = _bdef2_position(s, k, v, bdef2_weight[v - g0], a, b, vertex_bind)
                _posed_normal(s, k, v, c, vertex_bind)
        else:
            for k in range(np.int64(end - lo)):
                v = lo + np.uint64(k)
                _bdef2_position(s, k, v, bdef2_weight[v - g0], a, b, vertex_bind)
        scatter(s, run, r, vertex_index, want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _blend4(M, b0, b1, b2, b3, w0, w1, w2, w3):
    """Rows 0-2 of w0 M[b0] + w1 M[b1] + w2 M[b2] + w3 M[b3] as a 12-tuple (row-major scalars)."""
    return (w0 * M[b0, 0, 0] + w1 * M[b1, 0, 0] + w2 * M[b2, 0, 0] + w3 * M[b3, 0, 0],
            w0 * M[b0, 0, 1] + w1 * M[b1, 0, 1] + w2 * M[b2, 0, 1] + w3 * M[b3, 0, 1],
            w0 * M[b0, 0, 2] + w1 * M[b1, 0, 2] + w2 * M[b2, 0, 2] + w3 * M[b3, 0, 2],
            w0 * M[b0, 0, 3] + w1 * M[b1, 0, 3] + w2 * M[b2, 0, 3] + w3 * M[b3, 0, 3],
            w0 * M[b0, 1, 0] + w1 * M[b1, 1, 0] + w2 * M[b2, 1, 0] + w3 * M[b3, 1, 0],
            w0 * M[b0, 1, 1] + w1 * M[b1, 1, 1] + w2 * M[b2, 1, 1] + w3 * M[b3, 1, 1],
            w0 * M[b0, 1, 2] + w1 * M[b1, 1, 2] + w2 * M[b2, 1, 2] + w3 * M[b3, 1, 2],
            w0 * M[b0, 1, 3] + w1 * M[b1, 1, 3] + w2 * M[b2, 1, 3] + w3 * M[b3, 1, 3],
            w0 * M[b0, 2, 0] + w1 * M[b1, 2, 0] + w2 * M[b2, 2, 0] + w3 * M[b3, 2, 0],
            w0 * M[b0, 2, 1] + w1 * M[b1, 2, 1] + w2 * M[b2, 2, 1] + w3 * M[b3, 2, 1],
            w0 * M[b0, 2, 2] + w1 * M[b1, 2, 2] + w2 * M[b2, 2, 2] + w3 * M[b3, 2, 2],
            w0 * M[b0, 2, 3] + w1 * M[b1, 2, 3] + w2 * M[b2, 2, 3] + w3 * M[b3, 2, 3])


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _bdef4_position(s, k, v, j, M, b0, b1, b2, b3, W, vertex_bind):
    """Scratch row k = permuted row v's posed position (bind position + the scratch's morph offset)
    under its four matrices blended with its weights W[:, j]; returns the blend's rows 0-2 (12-tuple)."""
    a = _blend4(M, b0, b1, b2, b3, W[0, j], W[1, j], W[2, j], W[3, j])
    _posed_position(s, k, v, a, vertex_bind)
    return a


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST, _nrt=False)
def _bdef4(r0, r1, g0, M, run, bdef4_weight, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
           vertex_position_out, vertex_normal_out):
    """Runs [r0, r1), BDEF4: the four matrices of the run blended per vertex with its weights as
    stored (bdef4_weight (4, n4 + PAD), indexed from g0; unused slots weigh 0), then one transform."""
    s = scratch()
    if not has_offset:
        zero_offsets(s)
    for r in range(r0, r1):
        lo = run[r, 0]; end = run[r, 2]
        b0 = run[r, 3]; b1 = run[r, 4]; b2 = run[r, 5]; b3 = run[r, 6]
        if has_offset:
            gather_offsets(s, lo, end, vertex_index, vertex_offset)
        if want_normal:  # one loop per case: a branch inside would be if-converted to masked moves
            for k in range(np.int64(end - lo)):
                v = lo + np.uint64(k)
                a = _bdef4_position(s, k, v, v - g0, M, b0, b1, b2, b3, bdef4_weight, vertex_bind)
                _posed_normal(s, k, v, a, vertex_bind)
        else:
            for k in range(np.int64(end - lo)):
                v = lo + np.uint64(k)
                _bdef4_position(s, k, v, v - g0, M, b0, b1, b2, b3, bdef4_weight, vertex_bind)
        scatter(s, run, r, vertex_index, want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _qrot32(x, y, z, w, vx, vy, vz):
    """(vx, vy, vz) rotated by the unit quaternion (x, y, z, w), all float32 (no float64 literals, so
    a loop of it vectorises 8 wide): v + w t + q × t with t = 2 q × v."""
    tx = y * vz - z * vy; ty = z * vx - x * vz; tz = x * vy - y * vx
    tx += tx; ty += ty; tz += tz
    return vx + w * tx + (y * tz - z * ty), vy + w * ty + (z * tx - x * tz), vz + w * tz + (x * ty - y * tx)


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _slerp32(w0, w1, x0, y0, z0, q0, x1, y1, z1, q1, sgn, th, inv_sn, near):
    """Unit slerp(q0, q1, w1) (float32 scalars; sgn = ±1 picks the shortest arc, th the arc's angle,
    inv_sn = 1 / sin th): MMD's slerp weights, or a normalised lerp when ``near`` (q0 ≈ ±q1)."""
    wa = w0 if near else _sin_half_pi(w0 * th) * inv_sn
    wb = sgn * (w1 if near else _sin_half_pi(w1 * th) * inv_sn)
    qx = wa * x0 + wb * x1; qy = wa * y0 + wb * y1; qz = wa * z0 + wb * z1; qw = wa * q0 + wb * q1
    inv = np.float32(1.0) / np.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    return qx * inv, qy * inv, qz * inv, qw * inv


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST, _nrt=False)
def _sdef(r0, r1, g0, M, run, sdef_table, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
          vertex_position_out, vertex_normal_out):
    """Runs [r0, r1), SDEF: rotate about C by slerp(q0, q1, w1), translate by the blended C' points,
    w0 (M0 CR0) + w1 (M1 CR1). The bone quaternions, their angle and the rows of M0, M1 are made once
    per run (one bone pair); per vertex, sdef_table (10, ns + PAD) float32 rows w0, C, CR0, CR1
    (indexed from g0). The normal is the unit bind normal turned by the unit quaternion."""
    s = scratch()
    if not has_offset:
        zero_offsets(s)
    for r in range(r0, r1):
        lo = run[r, 0]; end = run[r, 2]; b0 = run[r, 3]; b1 = run[r, 4]
        x0, y0, z0, q0 = qfrom_matrix3_scalar(M[b0, 0, 0], M[b0, 0, 1], M[b0, 0, 2], M[b0, 1, 0], M[b0, 1, 1],
                                              M[b0, 1, 2], M[b0, 2, 0], M[b0, 2, 1], M[b0, 2, 2])
        x1, y1, z1, q1 = qfrom_matrix3_scalar(M[b1, 0, 0], M[b1, 0, 1], M[b1, 0, 2], M[b1, 1, 0], M[b1, 1, 1],
                                              M[b1, 1, 2], M[b1, 2, 0], M[b1, 2, 1], M[b1, 2, 2])
        x0 = np.float32(x0); y0 = np.float32(y0); z0 = np.float32(z0); q0 = np.float32(q0)
        x1 = np.float32(x1); y1 = np.float32(y1); z1 = np.float32(z1); q1 = np.float32(q1)
        d = x0 * x1 + y0 * y1 + z0 * z1 + q0 * q1
        sgn = np.float32(-1.0) if d < 0.0 else np.float32(1.0)  # shortest arc
        d = abs(d)
        near = d > 0.9995  # nearly equal rotations: normalised lerp
        th = np.float32(math.acos(min(d, 1.0)))
        inv_sn = np.float32(0.0) if near else np.float32(1.0 / math.sin(th))
        if has_offset:
            gather_offsets(s, lo, end, vertex_index, vertex_offset)
        for k in range(np.int64(end - lo)):
            v = lo + np.uint64(k)
            j = v - g0
            w0 = sdef_table[0, j]
            w1 = np.float32(1.0) - w0
            qx, qy, qz, qw = _slerp32(w0, w1, x0, y0, z0, q0, x1, y1, z1, q1, sgn, th, inv_sn, near)
            rx, ry, rz = _qrot32(qx, qy, qz, qw, vertex_bind[0, v] + s[OX + k] - sdef_table[1, j],
                                 vertex_bind[1, v] + s[OY + k] - sdef_table[2, j],
                                 vertex_bind[2, v] + s[OZ + k] - sdef_table[3, j])
            ax = sdef_table[4, j]; ay = sdef_table[5, j]; az = sdef_table[6, j]
            bx = sdef_table[7, j]; by = sdef_table[8, j]; bz = sdef_table[9, j]
            s[PX + k] = rx + (w0 * (M[b0, 0, 0] * ax + M[b0, 0, 1] * ay + M[b0, 0, 2] * az + M[b0, 0, 3])
                               + w1 * (M[b1, 0, 0] * bx + M[b1, 0, 1] * by + M[b1, 0, 2] * bz + M[b1, 0, 3]))
            s[PY + k] = ry + (w0 * (M[b0, 1, 0] * ax + M[b0, 1, 1] * ay + M[b0, 1, 2] * az + M[b0, 1, 3])
                               + w1 * (M[b1, 1, 0] * bx + M[b1, 1, 1] * by + M[b1, 1, 2] * bz + M[b1, 1, 3]))
            s[PZ + k] = rz + (w0 * (M[b0, 2, 0] * ax + M[b0, 2, 1] * ay + M[b0, 2, 2] * az + M[b0, 2, 3])
                               + w1 * (M[b1, 2, 0] * bx + M[b1, 2, 1] * by + M[b1, 2, 2] * bz + M[b1, 2, 3]))
        if want_normal:
            for k in range(np.int64(end - lo)):
                v = lo + np.uint64(k)
                w0 = sdef_table[0, v - g0]
                qx, qy, qz, qw = _slerp32(w0, np.float32(1.0) - w0, x0, y0, z0, q0, x1, y1, z1, q1, sgn, th, inv_sn,
                                          near)
                s[NX + k], s[NY + k], s[NZ + k] = _qrot32(qx, qy, qz, qw, vertex_bind[3, v], vertex_bind[4, v],
                                                             vertex_bind[5, v])
        scatter(s, run, r, vertex_index, want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST, _nrt=False)
def _qdef(r0, r1, g0, M, run, qdef_weight, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
          vertex_position_out, vertex_normal_out):
    """Runs [r0, r1), QDEF: blend unit dual quaternions of the run's four bones with each vertex's
    weights (qdef_weight (nq, 4), indexed from g0)."""
    for r in range(r0, r1):
        lo = run[r, 0]; hi = run[r, 1]
        for v in range(lo, hi):
            i = vertex_index[v]
            j = v - g0
            px = vertex_bind[0, v]; py = vertex_bind[1, v]; pz = vertex_bind[2, v]
            if has_offset:
                px += vertex_offset[i, 0]; py += vertex_offset[i, 1]; pz += vertex_offset[i, 2]
            nx = vertex_bind[3, v]; ny = vertex_bind[4, v]; nz = vertex_bind[5, v]
            rx = np.float32(0.0); ry = np.float32(0.0); rz = np.float32(0.0); rw = np.float32(0.0)
            dx = np.float32(0.0); dy = np.float32(0.0); dz = np.float32(0.0); dw = np.float32(0.0)
            fx = np.float32(0.0); fy = np.float32(0.0); fz = np.float32(0.0); fw = np.float32(0.0)
            first = True
            for k in range(4):
                w = qdef_weight[j, k]
                if w == 0.0:
                    continue
                b = run[r, 3 + k]
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
            vertex_position_out[i, 0] = ox; vertex_position_out[i, 1] = oy; vertex_position_out[i, 2] = oz
            if want_normal:
                mx, my, mz = _unit(mx, my, mz)
                vertex_normal_out[i, 0] = mx; vertex_normal_out[i, 1] = my; vertex_normal_out[i, 2] = mz


@njit(cache=True, nogil=True, error_model="numpy")
def skin_runs(group, r0, r1, bone_skin, group_start, run, vertex_index, vertex_bind, bdef2_weight, bdef4_weight,
              sdef_table, qdef_weight, vertex_offset, has_offset, want_normal,
              vertex_position_out, vertex_normal_out):
    """Skin runs [r0, r1) of vertex group ``group`` (type ``GROUPS[group // 2]``, morphed when odd).

    Model inputs (``CpuSkinner``'s tables): bone_skin (B, 4, 4) float32; group_start (11,) uint64 first
    permuted row of each group + V; run (R, 10) uint64 (first row, end row, end row of the 8-wide
    loop, bone slots 0-3, end of its rows in eights of consecutive output rows, end of its rows in
    fours, end of its rows in pairs);
    vertex_index (V + PAD,) uint32 original row of each permuted row;
    vertex_bind (6, V + PAD) float32 bind position and unit normal (x, y, z rows), model space;
    weights as applied, per type in permuted order from the type's first row: bdef2_weight
    (n2 + PAD,) w1, bdef4_weight (4, n4 + PAD), sdef_table (10, ns + PAD) rows w0, C, CR0, CR1,
    qdef_weight (nq, 4).
    State in: vertex_offset (V, 3) float32 morph offsets at original rows, read when has_offset.
    State out: vertex_position_out, vertex_normal_out (V, 3) float32 C-contiguous, at original rows
    (unit normals only when want_normal).
    """
    kind = group // 2
    g0 = group_start[2 * kind]  # the type's rows: its unmorphed then its morphed vertices
    has_offset = has_offset and group % 2 == 1
    if kind == 0:
        _bdef1(r0, r1, bone_skin, run, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
               vertex_position_out, vertex_normal_out)
    elif kind == 1:
        _bdef2(r0, r1, g0, bone_skin, run, bdef2_weight, vertex_index, vertex_bind, vertex_offset, has_offset,
               want_normal, vertex_position_out, vertex_normal_out)
    elif kind == 2:
        _bdef4(r0, r1, g0, bone_skin, run, bdef4_weight, vertex_index, vertex_bind, vertex_offset, has_offset,
               want_normal, vertex_position_out, vertex_normal_out)
    elif kind == 3:
        _sdef(r0, r1, g0, bone_skin, run, sdef_table, vertex_index, vertex_bind, vertex_offset, has_offset,
              want_normal, vertex_position_out, vertex_normal_out)
    else:
        _qdef(r0, r1, g0, bone_skin, run, qdef_weight, vertex_index, vertex_bind, vertex_offset, has_offset,
              want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, error_model="numpy")
def skin_groups_serial(group_run, bone_skin, group_start, run, vertex_index, vertex_bind, bdef2_weight,
                       bdef4_weight, sdef_table, qdef_weight, vertex_offset,
                       has_offset, want_normal, vertex_position_out, vertex_normal_out):
    """Every group on one thread; group_run (11,) uint64 first run of each group + R; other
    parameters as ``skin_runs``."""
    for g in range(group_run.shape[0] - 1):
        if group_run[g + 1] > group_run[g]:
            skin_runs(g, group_run[g], group_run[g + 1], bone_skin, group_start, run, vertex_index, vertex_bind,
                      bdef2_weight, bdef4_weight, sdef_table, qdef_weight,
                      vertex_offset, has_offset, want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def skin_groups_parallel(chunks, bone_skin, group_start, run, vertex_index, vertex_bind, bdef2_weight,
                         bdef4_weight, sdef_table, qdef_weight, vertex_offset,
                         has_offset, want_normal, vertex_position_out, vertex_normal_out):
    """Work items ``chunks`` (C, 3) uint64 (group, first run, end run), each inside one group, over
    numba's threads; other parameters as ``skin_runs``."""
    for c in prange(chunks.shape[0]):
        skin_runs(chunks[c, 0], chunks[c, 1], chunks[c, 2], bone_skin, group_start, run, vertex_index,
                  vertex_bind, bdef2_weight, bdef4_weight, sdef_table, qdef_weight,
                  vertex_offset, has_offset, want_normal, vertex_position_out, vertex_normal_out)
