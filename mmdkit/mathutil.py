"""Small numba helpers for quaternions (x, y, z, w), rigid transforms and Euler angles.

In: float64 arrays (quaternions (4,), vectors (3,)). Out: new small arrays or in-place writes.
Rotations act on column vectors; ``quat_mul(a, b)`` applies b first, then a (like A @ B).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_NB = dict(cache=True, nogil=True, fastmath=False)


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


@njit(**_NB)
def quat_mul(a, b):
    """Hamilton product a*b of (x, y, z, w) quaternions (b applied first)."""
    ax, ay, az, aw = a[0], a[1], a[2], a[3]
    bx, by, bz, bw = b[0], b[1], b[2], b[3]
    out = np.empty(4)
    out[0] = aw * bx + ax * bw + ay * bz - az * by
    out[1] = aw * by - ax * bz + ay * bw + az * bx
    out[2] = aw * bz + ax * by - ay * bx + az * bw
    out[3] = aw * bw - ax * bx - ay * by - az * bz
    return out


@njit(**_NB)
def quat_conj(q):
    out = np.empty(4)
    out[0] = -q[0]
    out[1] = -q[1]
    out[2] = -q[2]
    out[3] = q[3]
    return out


@njit(**_NB)
def quat_normalize(q):
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    out = np.empty(4)
    if n < 1e-12:
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        out[3] = 1.0
        return out
    for i in range(4):
        out[i] = q[i] / n
    return out


@njit(**_NB)
def quat_rotate(q, v):
    """Rotate vector v (3,) by unit quaternion q."""
    x, y, z, w = q[0], q[1], q[2], q[3]
    # t = 2 * cross(q.xyz, v)
    tx = 2.0 * (y * v[2] - z * v[1])
    ty = 2.0 * (z * v[0] - x * v[2])
    tz = 2.0 * (x * v[1] - y * v[0])
    out = np.empty(3)
    out[0] = v[0] + w * tx + (y * tz - z * ty)
    out[1] = v[1] + w * ty + (z * tx - x * tz)
    out[2] = v[2] + w * tz + (x * ty - y * tx)
    return out


@njit(**_NB)
def quat_slerp(a, b, t):
    """Spherical interpolation from a (t=0) to b (t=1), shortest path."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    s = 1.0
    if d < 0.0:
        d = -d
        s = -1.0
    out = np.empty(4)
    if d > 0.9995:
        for i in range(4):
            out[i] = a[i] + t * (s * b[i] - a[i])
        return quat_normalize(out)
    th = math.acos(d)
    sn = math.sin(th)
    wa = math.sin((1.0 - t) * th) / sn
    wb = s * math.sin(t * th) / sn
    for i in range(4):
        out[i] = wa * a[i] + wb * b[i]
    return out


@njit(**_NB)
def quat_scale_angle(q, t):
    """slerp(identity, q, t) — also valid for negative t (inverts the rotation)."""
    ident = np.zeros(4)
    ident[3] = 1.0
    if t >= 0.0:
        return quat_slerp(ident, q, t)
    return quat_slerp(ident, quat_conj(q), -t)


@njit(**_NB)
def quat_axis_angle(axis, angle):
    h = 0.5 * angle
    s = math.sin(h)
    out = np.empty(4)
    out[0] = axis[0] * s
    out[1] = axis[1] * s
    out[2] = axis[2] * s
    out[3] = math.cos(h)
    return out


@njit(**_NB)
def quat_to_matrix3(q, out):
    """Write the 3×3 rotation of unit quaternion q into out[:3, :3]."""
    x, y, z, w = q[0], q[1], q[2], q[3]
    out[0, 0] = 1 - 2 * (y * y + z * z)
    out[0, 1] = 2 * (x * y - z * w)
    out[0, 2] = 2 * (x * z + y * w)
    out[1, 0] = 2 * (x * y + z * w)
    out[1, 1] = 1 - 2 * (x * x + z * z)
    out[1, 2] = 2 * (y * z - x * w)
    out[2, 0] = 2 * (x * z - y * w)
    out[2, 1] = 2 * (y * z + x * w)
    out[2, 2] = 1 - 2 * (x * x + y * y)


@njit(**_NB)
def matrix3_to_quat(m):
    """Unit quaternion of the rotation in m[:3, :3] (assumed orthonormal)."""
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    q = np.empty(4)
    if tr > 0.0:
        s = math.sqrt(tr + 1.0) * 2.0
        q[3] = 0.25 * s
        q[0] = (m[2, 1] - m[1, 2]) / s
        q[1] = (m[0, 2] - m[2, 0]) / s
        q[2] = (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2.0
        q[3] = (m[2, 1] - m[1, 2]) / s
        q[0] = 0.25 * s
        q[1] = (m[0, 1] + m[1, 0]) / s
        q[2] = (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2.0
        q[3] = (m[0, 2] - m[2, 0]) / s
        q[0] = (m[0, 1] + m[1, 0]) / s
        q[1] = 0.25 * s
        q[2] = (m[1, 2] + m[2, 1]) / s
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2.0
        q[3] = (m[1, 0] - m[0, 1]) / s
        q[0] = (m[0, 2] + m[2, 0]) / s
        q[1] = (m[1, 2] + m[2, 1]) / s
        q[2] = 0.25 * s
    return quat_normalize(q)


@njit(**_NB)
def quat_to_euler_xyz(q):
    """Angles (rx, ry, rz) with R = Rx·Ry·Rz (column vectors)."""
    m = np.empty((3, 3))
    quat_to_matrix3(q, m)
    out = np.empty(3)
    sy = max(-1.0, min(1.0, m[0, 2]))
    out[1] = math.asin(sy)
    if abs(sy) < 0.999999:
        out[0] = math.atan2(-m[1, 2], m[2, 2])
        out[2] = math.atan2(-m[0, 1], m[0, 0])
    else:
        out[0] = math.atan2(m[2, 1], m[1, 1])
        out[2] = 0.0
    return out


@njit(**_NB)
def euler_xyz_to_quat(e):
    """Quaternion of R = Rx(e0)·Ry(e1)·Rz(e2)."""
    ax = np.zeros(3)
    ax[0] = 1.0
    qx = quat_axis_angle(ax, e[0])
    ay = np.zeros(3)
    ay[1] = 1.0
    qy = quat_axis_angle(ay, e[1])
    az = np.zeros(3)
    az[2] = 1.0
    qz = quat_axis_angle(az, e[2])
    return quat_mul(quat_mul(qx, qy), qz)


def translation_matrix(t) -> np.ndarray:
    """(4, 4) float64 translation by t (3,)."""
    m = np.eye(4)
    m[:3, 3] = t
    return m
