"""Sample bound keyframe tracks at a (fractional) frame: Bézier bones, linear morphs, IK switches.

In: ``BoundMotion`` CSR arrays (see binding.py) and a frame number.
Out: written in place — per-bone translation (B,3) and rotation (B,4) float64, per-morph
weight (N,) float64, per-IK-solver enabled flags (K,) uint8.
MMD rules: the curve stored on key i shapes the segment from key i−1 to key i; before the
first key the first key's value, after the last the last's; rotations slerp.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmdkit.mathutil import qslerp_scalar

_NB = dict(cache=True, nogil=True)


@njit(**_NB)
def bezier_weight(x1, y1, x2, y2, s):
    """y(t) where x(t) = s on the cubic Bézier (0,0),(x1,y1),(x2,y2),(1,1); all in 0..1."""
    if x1 == y1 and x2 == y2:
        return s
    t = s
    for _ in range(12):  # Newton, falling back to bisection bounds
        it = 1.0 - t
        x = 3.0 * it * it * t * x1 + 3.0 * it * t * t * x2 + t * t * t
        dx = 3.0 * it * it * x1 + 6.0 * it * t * (x2 - x1) + 3.0 * t * t * (1.0 - x2)
        err = x - s
        if abs(err) < 1e-6:
            break
        if abs(dx) < 1e-8:
            break
        t -= err / dx
        if t < 0.0:
            t = 0.0
        elif t > 1.0:
            t = 1.0
    # verify; if Newton failed, bisect
    it = 1.0 - t
    x = 3.0 * it * it * t * x1 + 3.0 * it * t * t * x2 + t * t * t
    if abs(x - s) > 1e-5:
        lo, hi = 0.0, 1.0
        for _ in range(40):
            t = 0.5 * (lo + hi)
            it = 1.0 - t
            x = 3.0 * it * it * t * x1 + 3.0 * it * t * t * x2 + t * t * t
            if x < s:
                lo = t
            else:
                hi = t
        it = 1.0 - t
    return 3.0 * it * it * t * y1 + 3.0 * it * t * t * y2 + t * t * t


@njit(**_NB)
def _find(frames, lo, hi, f):
    """Index of the first key in [lo, hi) with frame > f (hi if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if frames[mid] <= f:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(**_NB)
def sample_bones(frame, key_start, key_frame, key_translation, key_rotation, key_curve,
                 bone_translation_out, bone_rotation_out):
    """Each bone's keyed local value at ``frame`` (float); bones without keys get zero
    translation and identity rotation.

    Bound keys (see ``BoundMotion``): key_start (B+1,) int32, key rows of bone b are
    [key_start[b], key_start[b+1]) sorted by frame; key_frame (K,) float64; key_translation (K, 3)
    float64, parent space; key_rotation (K, 4) float64 xyzw; key_curve (K, 4, 4) float64, per
    channel (X, Y, Z, rotation) the Bézier (x1, y1, x2, y2) in 0..1.
    Out: bone_translation_out (B, 3), bone_rotation_out (B, 4) xyzw float64, parent space.
    """
    for b in range(bone_translation_out.shape[0]):
        s0 = key_start[b]
        s1 = key_start[b + 1]
        if s0 == s1:
            bone_translation_out[b, 0] = 0.0
            bone_translation_out[b, 1] = 0.0
            bone_translation_out[b, 2] = 0.0
            bone_rotation_out[b, 0] = 0.0
            bone_rotation_out[b, 1] = 0.0
            bone_rotation_out[b, 2] = 0.0
            bone_rotation_out[b, 3] = 1.0
            continue
        i = _find(key_frame, s0, s1, frame)
        if i == s0 or i == s1:
            k = s0 if i == s0 else s1 - 1
            for c in range(3):
                bone_translation_out[b, c] = key_translation[k, c]
            for c in range(4):
                bone_rotation_out[b, c] = key_rotation[k, c]
            continue
        a = i - 1
        span = key_frame[i] - key_frame[a]
        s = (frame - key_frame[a]) / span
        for c in range(3):
            w = bezier_weight(key_curve[i, c, 0], key_curve[i, c, 1], key_curve[i, c, 2], key_curve[i, c, 3], s)
            bone_translation_out[b, c] = key_translation[a, c] + (key_translation[i, c] - key_translation[a, c]) * w
        w = bezier_weight(key_curve[i, 3, 0], key_curve[i, 3, 1], key_curve[i, 3, 2], key_curve[i, 3, 3], s)
        q = qslerp_scalar(key_rotation[a, 0], key_rotation[a, 1], key_rotation[a, 2], key_rotation[a, 3],
                          key_rotation[i, 0], key_rotation[i, 1], key_rotation[i, 2], key_rotation[i, 3], w)
        for c in range(4):
            bone_rotation_out[b, c] = q[c]


@njit(**_NB)
def sample_bone_physics(frame, key_start, key_frame, key_physics, bone_physics_out):
    """bone_physics_out (B,) bool: the per-key physics flag (key_physics (K,) bool) of each bone's
    last key at or before ``frame``, True for bones without keys. key_start (B+1,) int32 and
    key_frame (K,) float64 as in ``sample_bones``."""
    for b in range(bone_physics_out.shape[0]):
        s0 = key_start[b]
        s1 = key_start[b + 1]
        if s0 == s1:
            bone_physics_out[b] = True
            continue
        i = _find(key_frame, s0, s1, frame)
        bone_physics_out[b] = key_physics[s0] if i == s0 else key_physics[i - 1]


@njit(**_NB)
def sample_scalars(frame, key_start, key_frame, key_value, value_out):
    """Linear sampling of per-entity scalar tracks (morph weights): value_out (N,) float64 from
    key_start (N+1,) int32, key_frame (K,) float64 and key_value (K,) float64; 0 without keys."""
    for m in range(value_out.shape[0]):
        s0 = key_start[m]
        s1 = key_start[m + 1]
        if s0 == s1:
            value_out[m] = 0.0
            continue
        i = _find(key_frame, s0, s1, frame)
        if i == s0:
            value_out[m] = key_value[s0]
        elif i == s1:
            value_out[m] = key_value[s1 - 1]
        else:
            a = i - 1
            s = (frame - key_frame[a]) / (key_frame[i] - key_frame[a])
            value_out[m] = key_value[a] + (key_value[i] - key_value[a]) * s


@njit(**_NB)
def sample_steps(frame, key_start, key_frame, key_value, value_out):
    """Step sampling (IK on/off, visibility): value_out (N,) uint8 = key_value (K,) uint8 of the
    last key at or before ``frame``, 1 before the first key and without keys."""
    for k in range(value_out.shape[0]):
        s0 = key_start[k]
        s1 = key_start[k + 1]
        if s0 == s1:
            value_out[k] = 1
            continue
        i = _find(key_frame, s0, s1, frame)
        value_out[k] = 1 if i == s0 else key_value[i - 1]


def sample_bone_tracks(bound, frames) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised convenience: (F,) frames → translations (F,B,3), rotations (F,B,4) float64."""
    frames = np.atleast_1d(np.asarray(frames, np.float64))
    B = len(bound.bone_key_start) - 1
    t = np.zeros((len(frames), B, 3))
    q = np.zeros((len(frames), B, 4))
    for i, f in enumerate(frames):
        sample_bones(f, bound.bone_key_start, bound.bone_key_frame, bound.bone_key_translation,
                     bound.bone_key_rotation, bound.bone_key_curve, t[i], q[i])
    return t, q
