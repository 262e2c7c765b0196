"""VMD interpolation blocks: curves ⇄ the raw bytes MMD stores on each key.

In: Bézier control points (x1, y1, x2, y2) in 0..127 per channel, or raw blocks.
Out: bone blocks (64,) uint8 and camera blocks (24,) uint8 laid out as MMD writes them;
unpacked bone curves (K, 4, 4) float64 in 0..1; the per-key physics flag (K,) bool.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import BuildError

LINEAR_CURVE = (20, 20, 107, 107)  # x1, y1, x2, y2 of a straight line in 0..127 units
# Row 0 bytes 2-3 of a bone key's interpolation block: (99, 15) = physics off from this key.
PHYSICS_OFF = (99, 15)


def interpolation_block(curves=None, physics: bool = True) -> np.ndarray:
    """VMD bone interpolation bytes (64,) uint8 from ``curves``: None (linear) or a dict with
    keys 'x', 'y', 'z', 'r' (missing = linear), each (x1, y1, x2, y2) in 0..127. Laid out as MMD
    writes it: row k = the 16-byte sequence shifted by k; row 0 bytes 2–3 hold the physics
    flag ((0, 0) on, (99, 15) off)."""
    curves = curves or {}
    ch = [tuple(int(v) for v in curves.get(k, LINEAR_CURVE)) for k in ("x", "y", "z", "r")]
    for c in ch:
        if len(c) != 4 or min(c) < 0 or max(c) > 127:
            raise BuildError(f"interpolation curve {c} must be 4 values in 0..127", section="interpolation")
    return interpolation_blocks(np.array([ch], np.uint8), np.array([physics]))[0]


def interpolation_blocks(curve: np.ndarray, physics: np.ndarray) -> np.ndarray:
    """(K, 64) uint8 VMD bone interpolation blocks from curve (K, 4, 4) uint8 — channel (X, Y, Z,
    rotation) × (x1, y1, x2, y2) in 0..127 — and physics (K,) bool (False: the physics-off flag),
    laid out as ``interpolation_block`` says."""
    curve = np.asarray(curve, np.uint8)
    K = len(curve)
    seq = curve.transpose(0, 2, 1).reshape(K, 16)  # x1 of X, Y, Z, R; y1 ...; x2 ...; y2 ...
    padded = np.concatenate([seq, np.tile(np.array([1, 0, 0], np.uint8), (K, 1))], axis=1)
    block = np.stack([padded[:, k:k + 16] for k in range(4)], axis=1).reshape(K, 64)
    off = ~np.asarray(physics, bool)
    block[:, 2:4] = 0
    block[off, 2], block[off, 3] = PHYSICS_OFF
    return block


def camera_interpolation_block(curves=None) -> np.ndarray:
    """VMD camera interpolation bytes (24,) uint8: 6 channels (x, y, z, rotation, distance,
    fov), each stored as x1, x2, y1, y2; ``curves`` dict of (x1, y1, x2, y2), missing = linear."""
    curves = curves or {}
    out = []
    for k in ("x", "y", "z", "r", "d", "fov"):
        x1, y1, x2, y2 = curves.get(k, LINEAR_CURVE)
        out += [x1, x2, y1, y2]
    return np.array(out, np.uint8)


def bone_key_physics(interpolation: np.ndarray) -> np.ndarray:
    """(K, 64) uint8 interpolation blocks → (K,) bool, True where physics stays on."""
    ip = np.asarray(interpolation)
    return ~((ip[:, 2] == PHYSICS_OFF[0]) & (ip[:, 3] == PHYSICS_OFF[1]))


def interpolation_curves(block: np.ndarray) -> np.ndarray:
    """(K, 64) uint8 VMD bone interpolation blocks → (K, 4, 4) float64 curves in 0..1.

    Channel c (X, Y, Z, rotation) reads row c at columns 0, 4, 8, 12 as (x1, y1, x2, y2)/127
    (the diagonal read: row 0 bytes 2–3 hold MMD's per-key physics flag, not a curve).
    """
    b = np.asarray(block).reshape(-1, 4, 16)[:, :, [0, 4, 8, 12]]  # pick the 16 bytes first, then convert
    return b.astype(np.float64) / 127.0
