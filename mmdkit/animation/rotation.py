"""Vectorised (numpy) quaternion helpers for code that works on whole arrays at once.

In/out: quaternions (..., 4) float64 (x, y, z, w), rotation matrices (..., 3, 3) float64 acting
on column vectors. The scalar helpers the numba kernels inline are in ``mmdkit.mathutil``.
"""

from __future__ import annotations

import numpy as np


def quat_matrices(q: np.ndarray) -> np.ndarray:
    """(…, 4) quaternions (x, y, z, w), normalised here → (…, 3, 3) float64 rotations."""
    q = np.asarray(q, np.float64)
    q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-30)
    x, y, z, w = np.moveaxis(q, -1, 0)
    return np.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1).reshape(q.shape[:-1] + (3, 3))


def slerp_rows(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Row-wise slerp (T, 4) × (T, 4) by s (T,), shortest path, unit result (float64)."""
    d = np.einsum("ij,ij->i", a, b)
    b = np.where(d[:, None] < 0, -b, b)
    d = np.minimum(np.abs(d), 1.0)
    th = np.arccos(d)
    sin = np.sin(th)
    near = sin < 1e-6
    k0 = np.where(near, 1 - s, np.sin((1 - s) * th) / np.where(near, 1.0, sin))
    k1 = np.where(near, s, np.sin(s * th) / np.where(near, 1.0, sin))
    q = k0[:, None] * a + k1[:, None] * b
    return q / np.linalg.norm(q, axis=1, keepdims=True)
