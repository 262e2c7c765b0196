"""Forward kinematics over many frames of a retarget target (no IK, no append: what the retarget
writes, posed plainly so its positions can be read).

In: bone_parent (B,) int32 (−1 root), order (B,) int32 parents before children, bone_position (B,3)
float64 rest model space, local_t (F,B,3) float64 translation keys, local_q (F,B,4) float64 local
rotations (x,y,z,w). Out: world_p (F,B,3), world_q (F,B,4) float64 model space (MMD units):
world = parent ∘ (rest offset + local_t, local_q), as ``pose.fk.update_world`` composes a bone.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import qmul_scalar, qrot_scalar


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def world_frames(bone_parent, order, bone_position, local_t, local_q, world_p_out, world_q_out):
    """Fill world_p_out (F,B,3) / world_q_out (F,B,4) from the locals (see module)."""
    F = local_q.shape[0]
    for f in prange(F):
        for i in range(order.shape[0]):
            b = order[i]
            p = bone_parent[b]
            ox = bone_position[b, 0] + local_t[f, b, 0]
            oy = bone_position[b, 1] + local_t[f, b, 1]
            oz = bone_position[b, 2] + local_t[f, b, 2]
            lx, ly, lz, lw = local_q[f, b, 0], local_q[f, b, 1], local_q[f, b, 2], local_q[f, b, 3]
            if p < 0:
                world_p_out[f, b, 0], world_p_out[f, b, 1], world_p_out[f, b, 2] = ox, oy, oz
                world_q_out[f, b, 0], world_q_out[f, b, 1] = lx, ly
                world_q_out[f, b, 2], world_q_out[f, b, 3] = lz, lw
                continue
            ox -= bone_position[p, 0]
            oy -= bone_position[p, 1]
            oz -= bone_position[p, 2]
            px, py, pz, pw = world_q_out[f, p, 0], world_q_out[f, p, 1], world_q_out[f, p, 2], world_q_out[f, p, 3]
            v = qrot_scalar(px, py, pz, pw, ox, oy, oz)
            world_p_out[f, b, 0] = world_p_out[f, p, 0] + v[0]
            world_p_out[f, b, 1] = world_p_out[f, p, 1] + v[1]
            world_p_out[f, b, 2] = world_p_out[f, p, 2] + v[2]
            q = qmul_scalar(px, py, pz, pw, lx, ly, lz, lw)
            world_q_out[f, b, 0], world_q_out[f, b, 1], world_q_out[f, b, 2], world_q_out[f, b, 3] = q


def world_poses(bone_parent, order, bone_position, local_t, local_q) -> tuple[np.ndarray, np.ndarray]:
    """(world_p (F,B,3), world_q (F,B,4)) float64 of the locals (see module). ``order`` may list
    only some bones (each after its parent, ancestors included): the other rows stay zero."""
    F, B = local_q.shape[:2]
    world_p = np.zeros((F, B, 3))
    world_q = np.zeros((F, B, 4))
    world_frames(np.ascontiguousarray(bone_parent, np.int32), np.ascontiguousarray(order, np.int32),
                 np.ascontiguousarray(bone_position, np.float64), np.ascontiguousarray(local_t, np.float64),
                 np.ascontiguousarray(local_q, np.float64), world_p, world_q)
    return world_p, world_q
