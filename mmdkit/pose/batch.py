"""Batch posing without physics: many frames in one compiled call, split across cores.

In: a Model, a Motion (or VPD Pose, or None), frames (F,) float64. Out: bone_world (F,B,4,4)
float32 model space and morph_weight (F,N) float32. Each chunk of frames runs sequentially
through ``stages.run_stages`` (every stage, no geometry) with its own state started at rest;
chunks run in parallel (numba prange). Frames are independent without physics, so the result
does not depend on the number of chunks.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from mmdkit.animation.binding import bind_motion
from mmdkit.animation.motion import Pose
from mmdkit.animation.vpd import motion_from_pose
from mmdkit.pose.rig import IK_FIELDS, rig_for
from mmdkit.pose.stages import BONES_AFTER_PHYSICS, SAMPLE, motion_in, run_stages
from mmdkit.pose.state import new_bone_state

_PATH_START = IK_FIELDS.index("ik_path_start")


@njit(cache=True, nogil=True, parallel=True)
def pose_frames(frames, num_chunks, motion_keys, bone_in, ik_in, morph_in, coupling, bone_world_out,
                morph_weight_out):
    """frames (F,) float64 → bone_world_out (F,B,4,4) float32, morph_weight_out (F,N) float32,
    in ``num_chunks`` parallel chunks. Inputs as ``stages.run_stages`` takes them."""
    F = frames.shape[0]
    B = bone_world_out.shape[1]
    N = morph_weight_out.shape[1]
    K = ik_in[0].shape[0]
    for c in prange(num_chunks):
        lo = (F * c) // num_chunks
        hi = (F * (c + 1)) // num_chunks
        bone_state = new_bone_state(B, ik_in[_PATH_START])
        morph_state = (np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N))
        morph_weight = np.zeros(N, np.float32)
        morph_out = (morph_weight, np.zeros((0, 3), np.float32), np.zeros((0, 4), np.float32),
                     np.zeros((0, 0, 4), np.float32), np.ones((0, 28)), np.zeros((0, 28)),
                     np.zeros((0, 16), np.float32))
        ik_enabled = np.ones(K, np.uint8)
        visible = np.ones(1, np.uint8)
        bone_skin = np.zeros((0, 4, 4), np.float32)  # not kept: write_matrices skips it
        for i in range(lo, hi):
            frame_out = (ik_enabled, visible, bone_world_out[i], bone_skin)
            run_stages(SAMPLE, BONES_AFTER_PHYSICS, frames[i], False, motion_keys, bone_in, ik_in, morph_in,
                       coupling, bone_state, morph_state, morph_out, frame_out)
            for m in range(N):
                morph_weight_out[i, m] = morph_weight[m]


def pose_batch(model, motion, frames, num_chunks: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(F,) frames → bone_world (F,B,4,4) float32, morph_weight (F,N) float32 (no physics).

    ``motion``: a Motion, a VPD Pose or None (rest pose); ``num_chunks`` defaults to one per
    numba thread (at least 16 frames each)."""
    import numba

    if isinstance(motion, Pose):
        motion = motion_from_pose(motion)
    rig = rig_for(model)
    frames = np.ascontiguousarray(frames, np.float64)
    F = len(frames)
    world = np.empty((F, model.num_bones, 4, 4), np.float32)
    morph = np.empty((F, model.num_morphs), np.float32)
    if num_chunks is None:
        num_chunks = max(1, min(numba.get_num_threads(), F // 16 or 1))
    coupling = (np.zeros(len(rig.ik_target), np.uint8), np.zeros(0, np.int32), np.zeros(0, np.int32))
    pose_frames(frames, num_chunks, motion_in(bind_motion(model, motion)), rig.bone_in, rig.ik_in, rig.morph_in,
                coupling, world, morph)
    return world, morph
