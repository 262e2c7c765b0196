"""Sample VMD camera and light tracks at any frames.

In: a ``Motion`` and frames (F,). Out: dict of arrays — camera: distance (F,), position (F,3)
(the target point), rotation (F,3) Euler radians (lerped as Euler so multi-turn spins survive),
fov (F,) degrees, perspective (F,) bool; light: color (F,3), direction (F,3); self-shadow:
mode (F,) int (0 off, 1/2 MMD's modes), distance (F,) (step keys: the last key at or before).
Camera keys one frame apart are a cut: the earlier key's value holds, never interpolated.
Each of the 6 camera channels (x, y, z, rotation, distance, fov) has its own Bézier curve,
stored on the later key as (x1, x2, y1, y2) bytes.
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.sampling import bezier_weight


def _segments(key_frame: np.ndarray, frames: np.ndarray):
    """Sorted order of keys, and for each frame (a, b, s): key indices and segment fraction."""
    order = np.argsort(key_frame, kind="stable")
    kf = key_frame[order].astype(np.float64)
    # several keys on one frame: keep the last
    keep = np.ones(len(kf), bool)
    keep[:-1] = kf[1:] != kf[:-1]
    order, kf = order[keep], kf[keep]
    i = np.searchsorted(kf, frames, side="right")
    a = np.clip(i - 1, 0, len(kf) - 1)
    b = np.clip(i, 0, len(kf) - 1)
    span = kf[b] - kf[a]
    s = np.where(span > 0, (frames - kf[a]) / np.where(span > 0, span, 1), 0.0)
    s = np.clip(s, 0.0, 1.0)
    cut = span <= 1.0  # one-frame gap (or before first / after last key): hold key a
    s[cut] = 0.0
    return order[a], order[b], s


def sample_camera(motion, frames) -> dict:
    """Camera values at ``frames``; ``None`` if the motion has no camera keys."""
    if motion is None or motion.num_camera_keys == 0:
        return None
    frames = np.atleast_1d(np.asarray(frames, np.float64))
    a, b, s = _segments(motion.camera_key_frame, frames)
    ip = motion.camera_key_interpolation.astype(np.float64) / 127.0
    w = np.empty((len(frames), 6))
    for i in range(len(frames)):
        c = ip[b[i]].reshape(6, 4)  # x1, x2, y1, y2 per channel
        for ch in range(6):
            w[i, ch] = bezier_weight(c[ch, 0], c[ch, 2], c[ch, 1], c[ch, 3], s[i]) if s[i] > 0 else 0.0

    def lerp(arr, ch):
        va, vb = arr[a].astype(np.float64), arr[b].astype(np.float64)
        wt = w[:, ch]
        if va.ndim == 2:
            wt = wt.reshape(len(frames), -1)
        return va + (vb - va) * wt

    pos = lerp(motion.camera_key_position, [0, 1, 2])
    rot = lerp(motion.camera_key_rotation, [3, 3, 3])
    dist = lerp(motion.camera_key_distance, 4)
    fov = lerp(motion.camera_key_fov.astype(np.float64), 5)
    persp = motion.camera_key_perspective[a] == 0
    return {"distance": dist, "position": pos, "rotation": rot, "fov": fov, "perspective": persp}


def sample_light(motion, frames) -> dict:
    """Light colour and direction at ``frames`` (linear); ``None`` without light keys."""
    if motion is None or motion.num_light_keys == 0:
        return None
    frames = np.atleast_1d(np.asarray(frames, np.float64))
    order = np.argsort(motion.light_key_frame, kind="stable")
    kf = motion.light_key_frame[order].astype(np.float64)
    out = {}
    for name, arr in (("color", motion.light_key_color), ("direction", motion.light_key_direction)):
        v = arr[order].astype(np.float64)
        out[name] = np.stack([np.interp(frames, kf, v[:, c]) for c in range(3)], axis=1)
    return out


def sample_shadow(motion, frames) -> dict:
    """Self-shadow mode and distance at ``frames`` (held from the last key); ``None`` without keys."""
    if motion is None or motion.num_shadow_keys == 0:
        return None
    frames = np.atleast_1d(np.asarray(frames, np.float64))
    a, _, _ = _segments(motion.shadow_key_frame, frames)
    return {"mode": np.asarray(motion.shadow_key_mode)[a].astype(np.int64),
            "distance": np.asarray(motion.shadow_key_distance)[a].astype(np.float64)}

