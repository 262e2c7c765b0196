"""Key reduction for baked channels: keep the fewest frames that interpolation reproduces.

In: per-frame channel values (F, C, n) float64 at times (F,), a tolerance per channel and how it
is measured. Out: (F, C) bool — the frames to keep as keys (first and last always). Recursive
splitting (Douglas–Peucker): a segment whose in-between frames the LINEAR interpolation of its
two end keys reproduces within the tolerance keeps no key inside; otherwise the worst frame
becomes a key and both halves are checked. So every frame is within tolerance of the kept keys'
interpolation, as players interpolate them. Players interpolate rotations two ways: slerp (the
glTF spec, three.js, Babylon.js) and component-wise lerp then normalise (Blender's F-curves);
both trace the same arc at different speeds, so a rotation segment must pass under both, and two
kept keys are never on opposite hemispheres (where shortest-path slerp and the lerp part ways).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import qslerp_scalar

LERP_L2, LERP_WEIGHTED_L1, ROTATION_ANGLE = 0, 1, 2
"""How the error of one frame is measured: Euclidean distance of the lerped vector; Σ_c
scale_c·|Δ_c| of the lerped vector; the larger angle (radians) between the true rotation and the
slerped or the normalised-lerped one (a segment whose end keys' dot product is negative is split
in its middle whatever its errors)."""


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _frame_error(values, c, a, b, f, s, mode, scale):
    """Error at frame f of interpolating channel c between keys a and b at fraction s."""
    if mode == ROTATION_ANGLE:
        ax, ay, az, aw = values[a, c, 0], values[a, c, 1], values[a, c, 2], values[a, c, 3]
        bx, by, bz, bw = values[b, c, 0], values[b, c, 1], values[b, c, 2], values[b, c, 3]
        fx, fy, fz, fw = values[f, c, 0], values[f, c, 1], values[f, c, 2], values[f, c, 3]
        q = qslerp_scalar(ax, ay, az, aw, bx, by, bz, bw, s)
        d = abs(q[0] * fx + q[1] * fy + q[2] * fz + q[3] * fw)
        lx, ly, lz, lw = ax + s * (bx - ax), ay + s * (by - ay), az + s * (bz - az), aw + s * (bw - aw)
        n = math.sqrt(lx * lx + ly * ly + lz * lz + lw * lw)  # ≥ 0.7: keep_keys splits keys with dot < 0
        d = min(d, abs(lx * fx + ly * fy + lz * fz + lw * fw) / n)
        return 2.0 * math.acos(min(d, 1.0))
    err = 0.0
    for k in range(values.shape[2]):
        e = values[a, c, k] + s * (values[b, c, k] - values[a, c, k]) - values[f, c, k]
        err += e * e if mode == LERP_L2 else abs(e) * scale[k]
    return math.sqrt(err) if mode == LERP_L2 else err


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def keep_keys(time, values, tolerance, mode, scale, keep_out):
    """time (F,) float64 increasing; values (F, C, n) float64; tolerance (C,) float64 per channel;
    mode LERP_L2 | LERP_WEIGHTED_L1 | ROTATION_ANGLE; scale (n,) float64 (LERP_WEIGHTED_L1 only)
    → keep_out (F, C) bool: frames kept as keys of each channel."""
    F, C = values.shape[0], values.shape[1]
    for c in prange(C):
        for f in range(F):
            keep_out[f, c] = False
        keep_out[0, c] = True
        keep_out[F - 1, c] = True
        stack = np.empty(2 * F + 2, np.int64)
        top = 0
        if F > 2:
            stack[0], stack[1] = 0, F - 1
            top = 2
        while top > 0:
            b, a = stack[top - 1], stack[top - 2]
            top -= 2
            worst, worst_err = -1, tolerance[c]
            if mode == ROTATION_ANGLE and (values[a, c, 0] * values[b, c, 0] + values[a, c, 1] * values[b, c, 1]
                                           + values[a, c, 2] * values[b, c, 2] + values[a, c, 3] * values[b, c, 3]) < 0.0:
                worst = (a + b) // 2  # opposite hemispheres: players part ways, so a key in between
            else:
                for f in range(a + 1, b):
                    s = (time[f] - time[a]) / (time[b] - time[a])
                    e = _frame_error(values, c, a, b, f, s, mode, scale)
                    if e > worst_err:
                        worst, worst_err = f, e
            if worst >= 0:
                keep_out[worst, c] = True
                if worst - a > 1:
                    stack[top], stack[top + 1] = a, worst
                    top += 2
                if b - worst > 1:
                    stack[top], stack[top + 1] = worst, b
                    top += 2


def continuous_quaternions(q: np.ndarray) -> np.ndarray:
    """(F, C, 4) quaternions with signs flipped so each frame is on the side of the one before
    (q and −q are the same rotation; slerp between neighbours then takes the short way)."""
    if len(q) < 2:
        return q
    dot = np.einsum("fck,fck->fc", q[1:], q[:-1])
    sign = np.cumprod(np.where(dot < 0, -1.0, 1.0), axis=0)
    out = q.copy()
    out[1:] *= sign[..., None]
    return out


def joint_budgets(parent: np.ndarray, moving: np.ndarray, reach: np.ndarray, tolerance: float):
    """Per-joint tolerances that keep every point a joint carries within ``tolerance``.

    parent (J,) int32 joint parents (−1 roots, parents first); moving (J,) bool: joints whose
    local transform leaves the rest pose on some frame (their keys can carry error); reach (J,) float64: farthest point (vertex or descendant joint) the
    joint's subtree carries, from the joint. A point's world error is at most the sum over its
    moving ancestors a of (translation error_a + rotation error_a · reach_a); each moving joint
    gets ``tolerance`` / (the most moving joints on any root-to-leaf path through it), half for
    translation and half for rotation. Returns (translation (J,), rotation (J,) radians) float64.
    """
    J = len(parent)
    depth = np.zeros(J, np.int64)  # moving joints from the root down to and including j
    for j in range(J):
        depth[j] = (depth[parent[j]] if parent[j] >= 0 else 0) + int(moving[j])
    deepest = depth.copy()  # most moving joints on a root-to-leaf path through j
    for j in range(J - 1, -1, -1):
        if parent[j] >= 0:
            deepest[parent[j]] = max(deepest[parent[j]], deepest[j])
    share = tolerance / np.maximum(deepest, 1)
    return share / 2, share / (2 * np.maximum(reach, 1e-9))


def subtree_reach(parent: np.ndarray, joint_position: np.ndarray, point_joint: np.ndarray,
                  point_position: np.ndarray, point_extra: np.ndarray) -> np.ndarray:
    """(J,) float64: for each joint, the farthest of its own points and of its descendants'
    points and joints, measured from the joint's rest position. parent (J,) int32 parents first;
    joint_position (J, 3); point_joint (P,) int joint carrying each point, point_position (P, 3),
    point_extra (P,) float64 added to a point's distance (how far a morph can move it)."""
    J = len(parent)
    reach = np.zeros(J)
    dist = np.linalg.norm(point_position - joint_position[point_joint], axis=1) + point_extra
    np.maximum.at(reach, point_joint, dist)
    # a descendant's points, seen from an ancestor: at most the distance between them + its reach
    for j in range(J - 1, -1, -1):
        p = parent[j]
        if p >= 0:
            reach[p] = max(reach[p], np.linalg.norm(joint_position[j] - joint_position[p]) + reach[j])
    return reach
