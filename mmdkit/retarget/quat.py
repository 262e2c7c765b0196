"""Vectorised quaternion maths for retargeting (numpy, float64, (…, 4) as x, y, z, w).

In/out: arrays broadcast over leading axes (frames, bones). Rotations act on column vectors;
``qmul(a, b)`` applies b first, then a (as ``mathutil.qmul_scalar``). Model space: MMD's.
"""

from __future__ import annotations

import numpy as np


def qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(…, 4) product a·b (b applied first)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], -1)


def qconj(q: np.ndarray) -> np.ndarray:
    """(…, 4) inverse of unit quaternions."""
    return np.asarray(q, np.float64) * np.array([-1.0, -1.0, -1.0, 1.0])


def qrot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(…, 3) vectors v rotated by unit quaternions q (…, 4)."""
    q, v = np.asarray(q, np.float64), np.asarray(v, np.float64)
    u, w = q[..., :3], q[..., 3:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def qnormalize(q: np.ndarray) -> np.ndarray:
    """(…, 4) unit quaternions (zero rows → identity)."""
    q = np.asarray(q, np.float64)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    out = np.where(n > 1e-12, q / np.maximum(n, 1e-300), np.array([0.0, 0.0, 0.0, 1.0]))
    return out


def qarc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(…, 4) the shortest rotation taking directions a (…, 3) to b (…, 3) (any length); opposite
    directions turn 180° about an axis perpendicular to a; a zero vector gives identity."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a, b = np.broadcast_arrays(a, b)
    na = np.linalg.norm(a, axis=-1, keepdims=True)
    nb = np.linalg.norm(b, axis=-1, keepdims=True)
    ok = (na > 1e-12) & (nb > 1e-12)
    a = np.where(ok, a / np.maximum(na, 1e-300), 0.0)
    b = np.where(ok, b / np.maximum(nb, 1e-300), 0.0)
    d = np.sum(a * b, -1, keepdims=True)
    c = np.cross(a, b)
    q = np.concatenate([c, 1.0 + d], -1)
    opposite = (d[..., 0] < -1.0 + 1e-9) & ok[..., 0]
    if np.any(opposite):
        side = np.where(np.abs(a[..., :1]) < 0.9, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
        axis = np.cross(a, side)
        axis /= np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), 1e-300)
        q = np.where(opposite[..., None], np.concatenate([axis, np.zeros_like(d)], -1), q)
    q = np.where(ok, q, np.array([0.0, 0.0, 0.0, 1.0]))
    return qnormalize(q)


def qyaw(angle: float) -> np.ndarray:
    """(4,) rotation by ``angle`` radians about +y."""
    return np.array([0.0, np.sin(angle / 2), 0.0, np.cos(angle / 2)])


def twist_swing(q: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(twist, swing) with q = twist·swing, twist about ``axis`` (…, 3 unit, applied last)."""
    q = np.asarray(q, np.float64)
    axis = np.asarray(axis, np.float64)
    p = np.sum(q[..., :3] * axis, -1, keepdims=True) * axis
    twist = qnormalize(np.concatenate([p, q[..., 3:]], -1))
    return twist, qmul(qconj(twist), q)


def qpow(q: np.ndarray, t: float) -> np.ndarray:
    """(…, 4) the rotation of q scaled in angle by ``t`` (same axis)."""
    q = qnormalize(q)
    q = np.where(q[..., 3:] < 0, -q, q)
    half = np.arccos(np.clip(q[..., 3], -1.0, 1.0))
    s = np.sin(half)
    axis = np.where(s[..., None] > 1e-12, q[..., :3] / np.maximum(s, 1e-300)[..., None], 0.0)
    return np.concatenate([axis * np.sin(half * t)[..., None], np.cos(half * t)[..., None]], -1)


def angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(…,) angle in radians between direction vectors a and b (…, 3)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    c = np.sum(a * b, -1) / np.maximum(na * nb, 1e-300)
    return np.arccos(np.clip(c, -1.0, 1.0))
