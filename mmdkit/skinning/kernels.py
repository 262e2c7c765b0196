"""CPU skinning kernels over vertices grouped by deform type (numba, float32).

In: skinning matrices ``bone_skin`` (B, 4, 4) float32 and one group's rows of the permuted vertex
tables that ``cpu.CpuSkinner`` builds once (each group holds one deform type, so no loop branches on
the type). Out: posed positions and unit normals written at the vertices' original rows.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import put3, qfrom_matrix3_scalar, qrot_scalar

__all__ = ["GROUPS", "skin_span", "skin_groups_serial", "skin_groups_parallel"]

#: LLVM fast-math flags of the kernels: reassociation, fused multiply-add, approximate reciprocal and
#: functions; not nnan/ninf, so NaN/inf inputs still propagate as in IEEE arithmetic
FAST = {"contract", "arcp", "afn", "reassoc", "nsz"}

#: the PMX deform types; vertex group g holds type GROUPS[g // 2], without (g even) or with (g odd)
#: vertex-morph offsets, so vertices no vertex morph moves never read the offsets
GROUPS = ("bdef1", "bdef2", "bdef4", "sdef", "qdef")


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _unit(nx, ny, nz):
    """Normalised (nx, ny, nz); (0, 1, 0) when a bone matrix squashed the normal away (scalars)."""
    l2 = nx * nx + ny * ny + nz * nz
    if l2 > 1e-30:
        inv = np.float32(1.0) / np.sqrt(l2)
        return nx * inv, ny * inv, nz * inv
    return nx * 0.0, ny * 0.0 + 1.0, nz * 0.0


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _sin_half_pi(x):
    """sin(x) for x in [0, π/2] (the slerp angles of shortest-arc unit quaternions): odd Taylor
    polynomial to x^13, error < 6e-8 there, in the argument's float type."""
    x2 = x * x
    return x * (1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (
        1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0)))))))


@njit(cache=True, nogil=True, inline="always", error_model="numpy", fastmath=FAST)
def _is_rotation(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """True when the 3×3 rows are orthonormal to float32 precision: it keeps unit vectors unit."""
    tol = 2e-6
    return (abs(m00 * m00 + m01 * m01 + m02 * m02 - 1.0) < tol and abs(m10 * m10 + m11 * m11 + m12 * m12 - 1.0) < tol
            and abs(m20 * m20 + m21 * m21 + m22 * m22 - 1.0) < tol and abs(m00 * m10 + m01 * m11 + m02 * m12) < tol
            and abs(m00 * m20 + m01 * m21 + m02 * m22) < tol and abs(m10 * m20 + m11 * m21 + m12 * m22) < tol)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _bdef1(lo, hi, g0, M, bdef1_bone, vertex_index, vertex_bind, vertex_offset, has_offset, want_normal,
           vertex_position_out, vertex_normal_out):
    """Rows [lo, hi) of the permuted tables, BDEF1 (one matrix); g0 = the group's first row. The
    group is sorted by bone: the matrix is read, and checked for being a rotation, once per run."""
    pb = -1
    m00 = m01 = m02 = m03 = m10 = m11 = m12 = m13 = m20 = m21 = m22 = m23 = np.float32(0.0)
    rigid = False
    for v in range(lo, hi):
        i = vertex_index[v]
        b = bdef1_bone[v - g0]
        if b != pb:
            m00 = M[b, 0, 0]; m01 = M[b, 0, 1]; m02 = M[b, 0, 2]; m03 = M[b, 0, 3]
            m10 = M[b, 1, 0]; m11 = M[b, 1, 1]; m12 = M[b, 1, 2]; m13 = M[b, 1, 3]
            m20 = M[b, 2, 0]; m21 = M[b, 2, 1]; m22 = M[b, 2, 2]; m23 = M[b, 2, 3]
            rigid = _is_rotation(m00, m01, m02, m10, m11, m12, m20, m21, m22)
            pb = b
        px = vertex_bind[v, 0]; py = vertex_bind[v, 1]; pz = vertex_bind[v, 2]
        if has_offset:
            px += vertex_offset[i, 0]; py += vertex_offset[i, 1]; pz += vertex_offset[i, 2]
        put3(vertex_position_out, i, m00 * px + m01 * py + m02 * pz + m03, m10 * px + m11 * py + m12 * pz + m13,
             m20 * px + m21 * py + m22 * pz + m23)
        if want_normal:
            nx = vertex_bind[v, 3]; ny = vertex_bind[v, 4]; nz = vertex_bind[v, 5]
            mx = m00 * nx + m01 * ny + m02 * nz
            my = m10 * nx + m11 * ny + m12 * nz
            mz = m20 * nx + m21 * ny + m22 * nz
            if not rigid:  # a rotation keeps the unit bind normal unit
                mx, my, mz = _unit(mx, my, mz)
            put3(vertex_normal_out, i, mx, my, mz)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _bdef2(lo, hi, g0, M, bdef2_bone, bdef2_weight, vertex_index, vertex_bind, vertex_offset, has_offset,
           want_normal, vertex_position_out, vertex_normal_out):
    """Rows [lo, hi), BDEF2: M0 + w1 (M1 − M0), then transform once. The group is sorted by bone
    pair: M0 and M1 − M0 are read once per run."""
    pb0 = pb1 = -1
    m00 = m01 = m02 = m03 = m10 = m11 = m12 = m13 = m20 = m21 = m22 = m23 = np.float32(0.0)
    d00 = d01 = d02 = d03 = d10 = d11 = d12 = d13 = d20 = d21 = d22 = d23 = np.float32(0.0)
    for v in range(lo, hi):
        i = vertex_index[v]
        j = v - g0
        b0 = bdef2_bone[j, 0]
        b1 = bdef2_bone[j, 1]
        if b0 != pb0 or b1 != pb1:
            m00 = M[b0, 0, 0]; m01 = M[b0, 0, 1]; m02 = M[b0, 0, 2]; m03 = M[b0, 0, 3]
            m10 = M[b0, 1, 0]; m11 = M[b0, 1, 1]; m12 = M[b0, 1, 2]; m13 = M[b0, 1, 3]
            m20 = M[b0, 2, 0]; m21 = M[b0, 2, 1]; m22 = M[b0, 2, 2]; m23 = M[b0, 2, 3]
            d00 = M[b1, 0, 0] - m00; d01 = M[b1, 0, 1] - m01; d02 = M[b1, 0, 2] - m02; d03 = M[b1, 0, 3] - m03
            d10 = M[b1, 1, 0] - m10; d11 = M[b1, 1, 1] - m11; d12 = M[b1, 1, 2] - m12; d13 = M[b1, 1, 3] - m13
            d20 = M[b1, 2, 0] - m20; d21 = M[b1, 2, 1] - m21; d22 = M[b1, 2, 2] - m22; d23 = M[b1, 2, 3] - m23
            pb0 = b0
            pb1 = b1
        w = bdef2_weight[j, 1]
        a00 = m00 + w * d00; a01 = m01 + w * d01; a02 = m02 + w * d02; a03 = m03 + w * d03
        a10 = m10 + w * d10; a11 = m11 + w * d11; a12 = m12 + w * d12; a13 = m13 + w * d13
        a20 = m20 + w * d20; a21 = m21 + w * d21; a22 = m22 + w * d22; a23 = m23 + w * d23
        px = vertex_bind[v, 0]; py = vertex_bind[v, 1]; pz = vertex_bind[v, 2]
        if has_offset:
            px += vertex_offset[i, 0]; py += vertex_offset[i, 1]; pz += vertex_offset[i, 2]
        put3(vertex_position_out, i, a00 * px + a01 * py + a02 * pz + a03, a10 * px + a11 * py + a12 * pz + a13,
             a20 * px + a21 * py + a22 * pz + a23)
        if want_normal:
            nx = vertex_bind[v, 3]; ny = vertex_bind[v, 4]; nz = vertex_bind[v, 5]
            mx, my, mz = _unit(a00 * nx + a01 * ny + a02 * nz, a10 * nx + a11 * ny + a12 * nz,
                               a20 * nx + a21 * ny + a22 * nz)
            put3(vertex_normal_out, i, mx, my, mz)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _bdef4(lo, hi, g0, M, group_bone, group_weight, vertex_index, vertex_bind, vertex_offset, has_offset,
           want_normal, vertex_position_out, vertex_normal_out):
    """Rows [lo, hi), BDEF4 (group_bone/group_weight (n, 4)): blend the 3×4 matrices with the
    weights as stored (unused slots 1, 2 weigh 0 on bone 0; a zero 4th weight is skipped), then
    transform once."""
    for v in range(lo, hi):
        i = vertex_index[v]
        j = v - g0
        b = group_bone[j, 0]
        w = group_weight[j, 0]
        a00 = w * M[b, 0, 0]; a01 = w * M[b, 0, 1]; a02 = w * M[b, 0, 2]; a03 = w * M[b, 0, 3]
        a10 = w * M[b, 1, 0]; a11 = w * M[b, 1, 1]; a12 = w * M[b, 1, 2]; a13 = w * M[b, 1, 3]
        a20 = w * M[b, 2, 0]; a21 = w * M[b, 2, 1]; a22 = w * M[b, 2, 2]; a23 = w * M[b, 2, 3]
        for k in range(1, 4):
            w = group_weight[j, k]
            if k == 3 and w == 0.0:  # three bones (sorted first, so the branch predicts well)
                break
            b = group_bone[j, k]
            a00 += w * M[b, 0, 0]; a01 += w * M[b, 0, 1]; a02 += w * M[b, 0, 2]; a03 += w * M[b, 0, 3]
            a10 += w * M[b, 1, 0]; a11 += w * M[b, 1, 1]; a12 += w * M[b, 1, 2]; a13 += w * M[b, 1, 3]
            a20 += w * M[b, 2, 0]; a21 += w * M[b, 2, 1]; a22 += w * M[b, 2, 2]; a23 += w * M[b, 2, 3]
        px = vertex_bind[v, 0]; py = vertex_bind[v, 1]; pz = vertex_bind[v, 2]
        if has_offset:
            px += vertex_offset[i, 0]; py += vertex_offset[i, 1]; pz += vertex_offset[i, 2]
        put3(vertex_position_out, i, a00 * px + a01 * py + a02 * pz + a03, a10 * px + a11 * py + a12 * pz + a13,
             a20 * px + a21 * py + a22 * pz + a23)
        if want_normal:
            nx = vertex_bind[v, 3]; ny = vertex_bind[v, 4]; nz = vertex_bind[v, 5]
            mx, my, mz = _unit(a00 * nx + a01 * ny + a02 * nz, a10 * nx + a11 * ny + a12 * nz,
                               a20 * nx + a21 * ny + a22 * nz)
            put3(vertex_normal_out, i, mx, my, mz)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _sdef(lo, hi, g0, M, sdef_bone, sdef_weight, sdef_c, sdef_cr0, sdef_cr1, vertex_index, vertex_bind,
          vertex_offset, has_offset, want_normal, vertex_position_out, vertex_normal_out):
    """Rows [lo, hi), SDEF: rotate about C by slerp(q0, q1, w1), translate by the blended C' points.
    The group is sorted by bone pair, so the two bone quaternions and their angle are made once per
    run of vertices sharing a pair; the slerp weights stay per vertex (MMD's formula)."""
    pb0 = -1
    pb1 = -1
    x0 = y0 = z0 = w0_ = x1 = y1 = z1 = w1_ = sgn = th = inv_sn = 0.0
    near = True
    for v in range(lo, hi):
        i = vertex_index[v]
        j = v - g0
        b0 = sdef_bone[j, 0]
        b1 = sdef_bone[j, 1]
        if b0 != pb0 or b1 != pb1:
            x0, y0, z0, w0_ = qfrom_matrix3_scalar(M[b0, 0, 0], M[b0, 0, 1], M[b0, 0, 2], M[b0, 1, 0], M[b0, 1, 1],
                                                   M[b0, 1, 2], M[b0, 2, 0], M[b0, 2, 1], M[b0, 2, 2])
            x1, y1, z1, w1_ = qfrom_matrix3_scalar(M[b1, 0, 0], M[b1, 0, 1], M[b1, 0, 2], M[b1, 1, 0], M[b1, 1, 1],
                                                   M[b1, 1, 2], M[b1, 2, 0], M[b1, 2, 1], M[b1, 2, 2])
            d = x0 * x1 + y0 * y1 + z0 * z1 + w0_ * w1_
            sgn = 1.0
            if d < 0.0:  # shortest arc
                d = -d
                sgn = -1.0
            near = d > 0.9995
            th = math.acos(min(d, 1.0))
            inv_sn = 1.0 / math.sin(th) if not near else 0.0
            pb0 = b0
            pb1 = b1
        w0 = sdef_weight[j]
        w1 = np.float32(1.0) - w0
        if near:  # nearly equal rotations: normalised lerp
            qx = x0 + w1 * (sgn * x1 - x0); qy = y0 + w1 * (sgn * y1 - y0)
            qz = z0 + w1 * (sgn * z1 - z0); qw = w0_ + w1 * (sgn * w1_ - w0_)
        else:
            wa = _sin_half_pi((1.0 - w1) * th) * inv_sn
            wb = sgn * _sin_half_pi(w1 * th) * inv_sn
            qx = wa * x0 + wb * x1; qy = wa * y0 + wb * y1; qz = wa * z0 + wb * z1; qw = wa * w0_ + wb * w1_
        ql = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
        qx /= ql; qy /= ql; qz /= ql; qw /= ql
        px = vertex_bind[v, 0]; py = vertex_bind[v, 1]; pz = vertex_bind[v, 2]
        if has_offset:
            px += vertex_offset[i, 0]; py += vertex_offset[i, 1]; pz += vertex_offset[i, 2]
        cx = sdef_c[j, 0]; cy = sdef_c[j, 1]; cz = sdef_c[j, 2]
        rx, ry, rz = qrot_scalar(qx, qy, qz, qw, px - cx, py - cy, pz - cz)
        ax = sdef_cr0[j, 0]; ay = sdef_cr0[j, 1]; az = sdef_cr0[j, 2]
        bx = sdef_cr1[j, 0]; by = sdef_cr1[j, 1]; bz = sdef_cr1[j, 2]
        put3(vertex_position_out, i,
             rx + (w0 * (M[b0, 0, 0] * ax + M[b0, 0, 1] * ay + M[b0, 0, 2] * az + M[b0, 0, 3])
                   + w1 * (M[b1, 0, 0] * bx + M[b1, 0, 1] * by + M[b1, 0, 2] * bz + M[b1, 0, 3])),
             ry + (w0 * (M[b0, 1, 0] * ax + M[b0, 1, 1] * ay + M[b0, 1, 2] * az + M[b0, 1, 3])
                   + w1 * (M[b1, 1, 0] * bx + M[b1, 1, 1] * by + M[b1, 1, 2] * bz + M[b1, 1, 3])),
             rz + (w0 * (M[b0, 2, 0] * ax + M[b0, 2, 1] * ay + M[b0, 2, 2] * az + M[b0, 2, 3])
                   + w1 * (M[b1, 2, 0] * bx + M[b1, 2, 1] * by + M[b1, 2, 2] * bz + M[b1, 2, 3])))
        if want_normal:
            # a unit quaternion turns the unit bind normal into a unit normal: no normalising
            mx, my, mz = qrot_scalar(qx, qy, qz, qw, vertex_bind[v, 3], vertex_bind[v, 4], vertex_bind[v, 5])
            put3(vertex_normal_out, i, mx, my, mz)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _qdef(lo, hi, g0, M, qdef_bone, qdef_weight, vertex_index, vertex_bind, vertex_offset, has_offset,
          want_normal, vertex_position_out, vertex_normal_out):
    """Rows [lo, hi), QDEF: blend unit dual quaternions of up to four bones."""
    for v in range(lo, hi):
        i = vertex_index[v]
        j = v - g0
        px = vertex_bind[v, 0]; py = vertex_bind[v, 1]; pz = vertex_bind[v, 2]
        if has_offset:
            px += vertex_offset[i, 0]; py += vertex_offset[i, 1]; pz += vertex_offset[i, 2]
        nx = vertex_bind[v, 3]; ny = vertex_bind[v, 4]; nz = vertex_bind[v, 5]
        rx = np.float32(0.0); ry = np.float32(0.0); rz = np.float32(0.0); rw = np.float32(0.0)
        dx = np.float32(0.0); dy = np.float32(0.0); dz = np.float32(0.0); dw = np.float32(0.0)
        fx = np.float32(0.0); fy = np.float32(0.0); fz = np.float32(0.0); fw = np.float32(0.0)
        first = True
        for k in range(4):
            w = qdef_weight[j, k]
            if w == 0.0:
                continue
            b = qdef_bone[j, k]
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
        put3(vertex_position_out, i, ox, oy, oz)
        if want_normal:
            mx, my, mz = _unit(mx, my, mz)
            put3(vertex_normal_out, i, mx, my, mz)


@njit(cache=True, nogil=True, error_model="numpy")
def skin_span(group, lo, hi, bone_skin, group_start, vertex_index, vertex_bind, bdef1_bone, bdef2_bone,
              bdef2_weight, bdef4_bone, bdef4_weight, sdef_bone, sdef_weight, sdef_c, sdef_cr0, sdef_cr1,
              qdef_bone, qdef_weight, vertex_offset, has_offset, want_normal, vertex_position_out,
              vertex_normal_out):
    """Skin permuted rows [lo, hi) of vertex group ``group`` (type ``GROUPS[group // 2]``, morphed
    when odd).

    Model inputs (``CpuSkinner``'s tables): bone_skin (B, 4, 4) float32; group_start (11,) uint64 first
    permuted row of each group + V; vertex_index (V,) uint32 original row of each permuted row;
    vertex_bind (V, 6) float32 bind position and unit normal, model space; per group its bone slots
    (uint16|int32) and weights as applied (float32): bdef1_bone (n1,), bdef2_* (n2, 2), bdef4_*
    (n4, 4), sdef_bone (ns, 2), sdef_weight (ns,) w0, sdef_c/cr0/cr1 (ns, 3), qdef_* (nq, 4).
    State in: vertex_offset (V, 3) float32 morph offsets at original rows, read when has_offset.
    State out: vertex_position_out, vertex_normal_out (V, 3) float32 at original rows (unit normals
    only when want_normal).
    """
    kind = group // 2
    g0 = group_start[2 * kind]  # the type's rows: its unmorphed then its morphed vertices
    has_offset = has_offset and group % 2 == 1
    if kind == 0:
        _bdef1(lo, hi, g0, bone_skin, bdef1_bone, vertex_index, vertex_bind, vertex_offset, has_offset,
               want_normal, vertex_position_out, vertex_normal_out)
    elif kind == 1:
        _bdef2(lo, hi, g0, bone_skin, bdef2_bone, bdef2_weight, vertex_index, vertex_bind, vertex_offset,
               has_offset, want_normal, vertex_position_out, vertex_normal_out)
    elif kind == 2:
        _bdef4(lo, hi, g0, bone_skin, bdef4_bone, bdef4_weight, vertex_index, vertex_bind, vertex_offset,
               has_offset, want_normal, vertex_position_out, vertex_normal_out)
    elif kind == 3:
        _sdef(lo, hi, g0, bone_skin, sdef_bone, sdef_weight, sdef_c, sdef_cr0, sdef_cr1, vertex_index,
              vertex_bind, vertex_offset, has_offset, want_normal, vertex_position_out, vertex_normal_out)
    else:
        _qdef(lo, hi, g0, bone_skin, qdef_bone, qdef_weight, vertex_index, vertex_bind, vertex_offset,
              has_offset, want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, error_model="numpy")
def skin_groups_serial(bone_skin, group_start, vertex_index, vertex_bind, bdef1_bone, bdef2_bone, bdef2_weight,
                       bdef4_bone, bdef4_weight, sdef_bone, sdef_weight, sdef_c, sdef_cr0, sdef_cr1, qdef_bone,
                       qdef_weight, vertex_offset, has_offset, want_normal, vertex_position_out,
                       vertex_normal_out):
    """Every group on one thread; parameters as ``skin_span``."""
    for g in range(group_start.shape[0] - 1):
        if group_start[g + 1] > group_start[g]:
            skin_span(g, group_start[g], group_start[g + 1], bone_skin, group_start, vertex_index, vertex_bind,
                      bdef1_bone, bdef2_bone, bdef2_weight, bdef4_bone, bdef4_weight, sdef_bone, sdef_weight,
                      sdef_c, sdef_cr0, sdef_cr1, qdef_bone, qdef_weight, vertex_offset, has_offset,
                      want_normal, vertex_position_out, vertex_normal_out)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def skin_groups_parallel(chunks, bone_skin, group_start, vertex_index, vertex_bind, bdef1_bone, bdef2_bone,
                         bdef2_weight, bdef4_bone, bdef4_weight, sdef_bone, sdef_weight, sdef_c, sdef_cr0,
                         sdef_cr1, qdef_bone, qdef_weight, vertex_offset, has_offset, want_normal,
                         vertex_position_out, vertex_normal_out):
    """Work items ``chunks`` (C, 3) uint64 rows (group, lo, hi), each inside one group, over numba's
    threads; other parameters as ``skin_span``."""
    for c in prange(chunks.shape[0]):
        skin_span(chunks[c, 0], chunks[c, 1], chunks[c, 2], bone_skin, group_start, vertex_index, vertex_bind,
                  bdef1_bone, bdef2_bone, bdef2_weight, bdef4_bone, bdef4_weight, sdef_bone, sdef_weight,
                  sdef_c, sdef_cr0, sdef_cr1, qdef_bone, qdef_weight, vertex_offset, has_offset,
                  want_normal, vertex_position_out, vertex_normal_out)
