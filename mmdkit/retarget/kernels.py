"""Numba kernels of the retarget: one pass over frames × shared humanoid bones, caller-owned outputs.

In (Model: the ``align.Alignment`` and rest skeletons, fixed for a retarget): per shared humanoid
bone j (J of them) the source bone / its humanoid child (source_bone, source_child (J,) int64, −1
for no child), the source's rest positions source_rest (B_s,3) float64 model space, align_q (J,4),
facing_q (4,) (x,y,z,w); the target bone target_bone (J,) int64 and the row of its nearest shared
humanoid ancestor ancestor_row (J,) int64 (−1: none, a root of the shared set).
Data in: the posed source, src_p (F,B_s,3) / src_q (F,B_s,4) float64 world position / rotation.
Data out: world_out (F,J,4) target world rotations; local_q_out (F,B_t,4) target local rotations
(every bone not in target_bone at rest). Formulas as ``motion`` states them:
D_s = arc(W_s·(rest child − rest bone), posed child − posed bone)·W_s,  W_t = F⁻¹·D_s·A·F,
local = W_t(ancestor)⁻¹·W_t.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import qmul_scalar, qrot_scalar


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def qarc_scalar(ax, ay, az, bx, by, bz):
    """The shortest rotation (x,y,z,w) taking direction a to b, as ``quat.qarc`` (opposite: 180°
    about an axis perpendicular to a; a zero vector: identity)."""
    na = np.sqrt(ax * ax + ay * ay + az * az)
    nb = np.sqrt(bx * bx + by * by + bz * bz)
    if not (na > 1e-12 and nb > 1e-12):
        return 0.0, 0.0, 0.0, 1.0
    ax, ay, az = ax / na, ay / na, az / na
    bx, by, bz = bx / nb, by / nb, bz / nb
    d = ax * bx + ay * by + az * bz
    if d < -1.0 + 1e-9:
        if abs(ax) < 0.9:
            sx, sy, sz = 1.0, 0.0, 0.0
        else:
            sx, sy, sz = 0.0, 1.0, 0.0
        x, y, z = ay * sz - az * sy, az * sx - ax * sz, ax * sy - ay * sx
        w = 0.0
    else:
        x, y, z = ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
        w = 1.0 + d
    n = np.sqrt(x * x + y * y + z * z + w * w)
    if n > 1e-12:
        return x / n, y / n, z / n, w / n
    return 0.0, 0.0, 0.0, 1.0


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def target_world(
    # Model
    source_bone, source_child, source_rest, align_q, facing_q,
    # Data in
    src_p, src_q,
    # Data out
    world_out,
):
    """world_out (F,J,4): each shared humanoid bone's target world rotation (see module)."""
    F, J = world_out.shape[0], world_out.shape[1]
    fx, fy, fz, fw = facing_q[0], facing_q[1], facing_q[2], facing_q[3]
    for f in prange(F):
        for j in range(J):
            b = source_bone[j]
            x, y, z, w = src_q[f, b, 0], src_q[f, b, 1], src_q[f, b, 2], src_q[f, b, 3]
            c = source_child[j]
            if c >= 0:
                r = qrot_scalar(x, y, z, w, source_rest[c, 0] - source_rest[b, 0],
                                source_rest[c, 1] - source_rest[b, 1], source_rest[c, 2] - source_rest[b, 2])
                a = qarc_scalar(r[0], r[1], r[2], src_p[f, c, 0] - src_p[f, b, 0], src_p[f, c, 1] - src_p[f, b, 1],
                                src_p[f, c, 2] - src_p[f, b, 2])
                x, y, z, w = qmul_scalar(a[0], a[1], a[2], a[3], x, y, z, w)
            x, y, z, w = qmul_scalar(x, y, z, w, align_q[j, 0], align_q[j, 1], align_q[j, 2], align_q[j, 3])
            x, y, z, w = qmul_scalar(x, y, z, w, fx, fy, fz, fw)
            x, y, z, w = qmul_scalar(-fx, -fy, -fz, fw, x, y, z, w)
            world_out[f, j, 0], world_out[f, j, 1], world_out[f, j, 2], world_out[f, j, 3] = x, y, z, w


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def target_local(
    # Model
    target_bone, ancestor_row,
    # Data in
    world,
    # Data out
    local_q_out,
):
    """local_q_out (F,B,4): W(ancestor)⁻¹·W on the shared humanoid bones, identity elsewhere."""
    F, B, J = local_q_out.shape[0], local_q_out.shape[1], world.shape[1]
    for f in prange(F):
        for b in range(B):
            local_q_out[f, b, 0], local_q_out[f, b, 1], local_q_out[f, b, 2], local_q_out[f, b, 3] = 0.0, 0.0, 0.0, 1.0
        for j in range(J):
            b = target_bone[j]
            x, y, z, w = world[f, j, 0], world[f, j, 1], world[f, j, 2], world[f, j, 3]
            a = ancestor_row[j]
            if a >= 0:
                x, y, z, w = qmul_scalar(-world[f, a, 0], -world[f, a, 1], -world[f, a, 2], world[f, a, 3], x, y, z, w)
            local_q_out[f, b, 0], local_q_out[f, b, 1], local_q_out[f, b, 2], local_q_out[f, b, 3] = x, y, z, w


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def key_rows(
    # Model
    bones,
    # Data in
    local_t, local_q,
    # Data out
    translation_out, rotation_out,
):
    """The keys of bones (K,) int64, track by track, frames in order: translation_out (K·F,3) and
    rotation_out (K·F,4) float32 from local_t (F,B,3) / local_q (F,B,4) float64 (rotations with
    w ≥ 0)."""
    F = local_q.shape[0]
    for k in prange(bones.shape[0]):
        b = bones[k]
        for f in range(F):
            i = k * F + f
            s = -1.0 if local_q[f, b, 3] < 0 else 1.0
            for c in range(3):
                translation_out[i, c] = local_t[f, b, c]
            for c in range(4):
                rotation_out[i, c] = s * local_q[f, b, c]
