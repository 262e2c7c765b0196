"""Batch posing without physics: many frames in one compiled call, split across cores.

In: a Rig, a BoundMotion, the Model's bone-morph tables, frames (F,) float64.
Out: bone_world (F,B,4,4) float32 and morph_weight (F,N) float32, written in place.
Each chunk of frames runs sequentially with its own scratch state (frames are independent
when there is no physics), chunks run in parallel (numba prange).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from mmdkit.animation.sampling import sample_bones, sample_scalars, sample_steps
from mmdkit.pose.bones import solve_bones, write_matrices
from mmdkit.pose.morph import apply_bone_morphs, expand_weights


@njit(cache=True, nogil=True, parallel=True)
def pose_frames(frames, num_chunks, order1, order2, parent, position, flags, append_parent,
                append_ratio, fixed_axis, bone_ik, ik_target, ik_loop, ik_limit, ik_link_start,
                ik_link_bone, ik_link_mode, ik_link_lower, ik_link_upper, ik_path_start,
                ik_path_bone, ik_after_start, ik_after_bone, is_leaf, group_start, group_target,
                group_weight, bm_start, bm_bone, bm_t, bm_q, key_start, key_frame, key_t, key_q,
                key_curve, m_start, m_frame, m_weight, ik_start, ik_frame, ik_value,
                out_world, out_morph):
    F = frames.shape[0]
    B = position.shape[0]
    N = out_morph.shape[1]
    K = ik_target.shape[0]
    for c in prange(num_chunks):
        lo = (F * c) // num_chunks
        hi = (F * (c + 1)) // num_chunks
        anim_t = np.zeros((B, 3))
        anim_q = np.zeros((B, 4))
        ik_q = np.zeros((B, 4))
        app_t = np.zeros((B, 3))
        app_q = np.zeros((B, 4))
        local_t = np.zeros((B, 3))
        local_q = np.zeros((B, 4))
        world_p = np.zeros((B, 3))
        world_q = np.zeros((B, 4))
        raw = np.zeros(N)
        eff = np.zeros(N)
        ik_en = np.ones(K, np.uint8)
        skin = np.zeros((B, 4, 4), np.float32)
        for i in range(lo, hi):
            f = frames[i]
            sample_bones(f, key_start, key_frame, key_t, key_q, key_curve, anim_t, anim_q)
            sample_scalars(f, m_start, m_frame, m_weight, raw)
            sample_steps(f, ik_start, ik_frame, ik_value, ik_en)
            expand_weights(raw, is_leaf, group_start, group_target, group_weight, eff)
            apply_bone_morphs(eff, bm_start, bm_bone, bm_t, bm_q, anim_t, anim_q)
            for order in (order1, order2):
                solve_bones(order, parent, position, flags, append_parent, append_ratio, fixed_axis,
                            bone_ik, ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone,
                            ik_link_mode, ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone,
                            ik_after_start, ik_after_bone, ik_en, anim_t, anim_q, ik_q, app_t, app_q,
                            local_t, local_q, world_p, world_q)
            write_matrices(position, world_p, world_q, out_world[i], skin)
            for m in range(N):
                out_morph[i, m] = eff[m]


def pose_batch(model, rig, bound, frames, num_chunks: int | None = None):
    """(F,) frames → bone_world (F,B,4,4) float32, morph_weight (F,N) float32 (no physics)."""
    import numba

    frames = np.ascontiguousarray(frames, np.float64)
    F = len(frames)
    world = np.empty((F, model.num_bones, 4, 4), np.float32)
    morph = np.empty((F, model.num_morphs), np.float32)
    if num_chunks is None:
        num_chunks = max(1, min(numba.get_num_threads(), F // 16 or 1))
    r, b = rig, bound
    pose_frames(frames, num_chunks, r.pass1, r.pass2, r.parent, r.position, r.flags, r.append_parent,
                r.append_ratio, r.fixed_axis, r.bone_ik, r.ik_target, r.ik_loop, r.ik_limit,
                r.ik_link_start, r.ik_link_bone, r.ik_link_mode, r.ik_link_lower, r.ik_link_upper,
                r.ik_path_start, r.ik_path_bone, r.ik_after_start, r.ik_after_bone, r.morph_is_leaf,
                r.group_start, r.group_target, r.group_weight, model.bone_morph_start,
                model.bone_morph_bone, model.bone_morph_translation, model.bone_morph_rotation,
                b.bone_key_start, b.bone_key_frame, b.bone_key_translation, b.bone_key_rotation,
                b.bone_key_curve, b.morph_key_start, b.morph_key_frame, b.morph_key_weight,
                b.ik_key_start, b.ik_key_frame, b.ik_key_enabled, world, morph)
    return world, morph
