"""Small numba helpers for quaternions (x, y, z, w) and rigid transforms.

In/out: plain float64 scalars, quaternions as (x, y, z, w) tuples — the helpers are inlined into
the pose kernels, so the per-bone loops touch no heap and create no array views; ``put3``/``put4``
write one row of an array without a row view.
Rotations act on column vectors; ``qmul_scalar(a, b)`` applies b first, then a (like A @ B).
"""

from __future__ import annotations

import math

from numba import njit

import mmdkit.numba_inline  # noqa: F401  (faster cold compiles of the kernels inlining these helpers)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qmul_scalar(ax, ay, az, aw, bx, by, bz, bw):
    """Quaternion product a*b on scalars, returned as a tuple (no heap allocation)."""
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qrot_scalar(x, y, z, w, vx, vy, vz):
    """Rotate (vx, vy, vz) by unit quaternion (x, y, z, w): v + 2w(q×v) + 2q×(q×v), as a tuple."""
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    return (vx + w * tx + (y * tz - z * ty),
            vy + w * ty + (z * tx - x * tz),
            vz + w * tz + (x * ty - y * tx))


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qslerp_scalar(ax, ay, az, aw, bx, by, bz, bw, t):
    """Spherical interpolation from a (t=0) to b (t=1), shortest path, on scalars (tuple out)."""
    d = ax * bx + ay * by + az * bz + aw * bw
    s = 1.0
    if d < 0.0:
        d = -d
        s = -1.0
    if d > 0.9995:  # nearly equal: normalised lerp
        x = ax + t * (s * bx - ax)
        y = ay + t * (s * by - ay)
        z = az + t * (s * bz - az)
        w = aw + t * (s * bw - aw)
        n = math.sqrt(x * x + y * y + z * z + w * w)
        if n < 1e-12:
            return 0.0, 0.0, 0.0, 1.0
        return x / n, y / n, z / n, w / n
    th = math.acos(d)
    sn = math.sin(th)
    wa = math.sin((1.0 - t) * th) / sn
    wb = s * math.sin(t * th) / sn
    return wa * ax + wb * bx, wa * ay + wb * by, wa * az + wb * bz, wa * aw + wb * bw


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qscale_angle_scalar(x, y, z, w, t):
    """slerp(identity, q, t) on scalars — negative t inverts the rotation."""
    if t >= 0.0:
        return qslerp_scalar(0.0, 0.0, 0.0, 1.0, x, y, z, w, t)
    return qslerp_scalar(0.0, 0.0, 0.0, 1.0, -x, -y, -z, w, -t)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qto_matrix3_scalar(x, y, z, w):
    """Unit quaternion (x, y, z, w) → its 3×3 rotation as 9 scalars, row-major (column vectors)."""
    return (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w),
            2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
            2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y))


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qfrom_matrix3_scalar(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """Unit quaternion (tuple) of an orthonormal 3×3 rotation given row by row."""
    tr = m00 + m11 + m22
    if tr > 0.0:
        s = math.sqrt(tr + 1.0) * 2.0
        x, y, z, w = (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, 0.25 * s
    elif m00 > m11 and m00 > m22:
        s = math.sqrt(1.0 + m00 - m11 - m22) * 2.0
        x, y, z, w = 0.25 * s, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s
    elif m11 > m22:
        s = math.sqrt(1.0 + m11 - m00 - m22) * 2.0
        x, y, z, w = (m01 + m10) / s, 0.25 * s, (m12 + m21) / s, (m02 - m20) / s
    else:
        s = math.sqrt(1.0 + m22 - m00 - m11) * 2.0
        x, y, z, w = (m02 + m20) / s, (m12 + m21) / s, 0.25 * s, (m10 - m01) / s
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if n < 1e-12:
        return 0.0, 0.0, 0.0, 1.0
    return x / n, y / n, z / n, w / n


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def put3(a, i, x, y, z):
    """a[i] = (x, y, z). Straight-line, so inlining it keeps numba's reference counting pruned."""
    a[i, 0] = x
    a[i, 1] = y
    a[i, 2] = z


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def put4(a, i, x, y, z, w):
    """a[i] = (x, y, z, w), like put3."""
    a[i, 0] = x
    a[i, 1] = y
    a[i, 2] = z
    a[i, 3] = w
