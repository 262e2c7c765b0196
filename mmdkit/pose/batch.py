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
from mmdkit.pose.fields import allocate, copy_group
from mmdkit.pose.rig import build_rig
from mmdkit.pose.stages import BONES_AFTER_PHYSICS, SAMPLE, motion_in, run_stages
from mmdkit.pose.state import BoneState, Coupling, FrameOut, MorphOut, MorphState, state_sizes


@njit(cache=True, nogil=True, parallel=True)
def pose_frames(
    frames, num_chunks,
    # Model
    motion_in, bone_in, ik_in, morph_in, coupling_in,
    # Data in (each chunk starts from a copy)
    bone_state_in, morph_state_in, morph_out_in, frame_out_in,
    # Data out
    bone_world_out, morph_weight_out, bone_world_p_out, bone_world_q_out,
):
    """frames (F,) float64 → bone_world_out (F,B,4,4) float32, morph_weight_out (F,N) float32 and,
    unless they have 0 rows, bone_world_p_out (F,B,3) / bone_world_q_out (F,B,4) float64 model space
    (the pose state's world position and rotation (x,y,z,w)), in ``num_chunks`` parallel chunks.
    Model inputs as ``stages.run_stages`` takes them; the Data in groups (``BoneState``,
    ``MorphState``, ``MorphOut`` without geometry, ``FrameOut`` without bone_skin: ``batch_state``)
    are the state at rest, copied by each chunk."""
    F = frames.shape[0]
    N = morph_weight_out.shape[1]
    keep_p, keep_q = bone_world_p_out.shape[0] != 0, bone_world_q_out.shape[0] != 0
    for c in prange(num_chunks):
        lo = (F * c) // num_chunks
        hi = (F * (c + 1)) // num_chunks
        bone_state = copy_group(bone_state_in)
        morph_state = copy_group(morph_state_in)
        morph_out = copy_group(morph_out_in)
        rest = copy_group(frame_out_in)
        morph_weight = morph_out.morph_weight
        for i in range(lo, hi):
            frame_out = FrameOut(ik_enabled=rest.ik_enabled, visible=rest.visible, bone_world=bone_world_out[i],
                                 bone_skin=rest.bone_skin)
            run_stages(SAMPLE, BONES_AFTER_PHYSICS, frames[i], False, motion_in, bone_in, ik_in, morph_in,
                       coupling_in, bone_state, morph_state, morph_out, frame_out)
            for m in range(N):
                morph_weight_out[i, m] = morph_weight[m]
            if keep_p:
                bone_world_p_out[i] = bone_state.bone_world_p
            if keep_q:
                bone_world_q_out[i] = bone_state.bone_world_q


def batch_state(rig) -> tuple:
    """The rest state ``pose_frames`` copies into each chunk: (BoneState, MorphState, MorphOut,
    FrameOut, Coupling) — no geometry (V = M = 0) and no skin matrices (bone_skin (0,4,4): not
    kept), no simulator."""
    sizes = dict(state_sizes(rig), V=0, A=0, M=0)
    frame_out = allocate(FrameOut, dict(sizes, B=0))
    return (allocate(BoneState, sizes), allocate(MorphState, sizes), allocate(MorphOut, sizes), frame_out,
            allocate(Coupling, sizes))


def pose_batch(model, motion, frames, num_chunks: int | None = None, *, rig=None, bound=None, world_p_out=None,
               world_q_out=None) -> tuple[np.ndarray, np.ndarray]:
    """(F,) frames → bone_world (F,B,4,4) float32, morph_weight (F,N) float32 (no physics).

    ``motion``: a Motion, a VPD Pose or None (rest pose); ``num_chunks`` defaults to one per
    numba thread (at least 16 frames each); ``rig``, ``bound``: the model's Rig and the motion bound
to it (``animation.binding.bind_motion``), made here when not given;
    ``world_p_out`` (F,B,3) / ``world_q_out`` (F,B,4) float64, when given, receive each bone's
    world position and rotation (x,y,z,w) model space from the pose state."""
    import numba

    if isinstance(motion, Pose):
        motion = motion_from_pose(motion)
    rig = build_rig(model) if rig is None else rig
    frames = np.ascontiguousarray(frames, np.float64)
    F = len(frames)
    world = np.empty((F, model.num_bones, 4, 4), np.float32)
    morph = np.empty((F, model.num_morphs), np.float32)
    if num_chunks is None:
        num_chunks = max(1, min(numba.get_num_threads(), F // 16 or 1))
    bone_state, morph_state, morph_out, frame_out, coupling = batch_state(rig)
    pose_frames(frames, num_chunks, motion_in(bind_motion(model, motion) if bound is None else bound), rig.bone_in, rig.ik_in, rig.morph_in,
                coupling, bone_state, morph_state, morph_out, frame_out, world, morph,
                np.empty((0, model.num_bones, 3)) if world_p_out is None else world_p_out,
                np.empty((0, model.num_bones, 4)) if world_q_out is None else world_q_out)
    return world, morph
