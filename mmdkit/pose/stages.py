"""The one stage list of a frame: sample → morphs → bones before physics → [physics] → bones after.

In: a frame number, the motion's keys (``motion_in``), a Rig's grouped arrays and a
``PoseState``'s tuples. Out: the state, rewritten in place. ``run_stages(first, last, ...)`` runs
the stages first..last in MMD's order; the order is written once (``_run``): the fused
per-frame call (one call, or two around physics), the timed path (one call per stage), ``run_frame`` (the same
call with every argument in one ``FrameArgs``, for callers from Python; a stage reads only its own
fields) and the batch kernel (``batch.pose_frames``, every stage per frame) all go through it. The physics
stage itself runs outside numba (``mmdkit.runtime``), between a call that ends with
BONES_BEFORE_PHYSICS and one that starts with BONES_AFTER_PHYSICS.
"""

from __future__ import annotations

from collections import namedtuple

from numba import njit, types
from numba.experimental import structref

from mmdkit.animation.sampling import sample_bones, sample_scalars, sample_steps
from mmdkit.pose.bones import read_driven, refresh_worlds, solve_bones, switch_off_ik, write_matrices
from mmdkit.pose.morph import (apply_bone_morphs, apply_material_morphs, apply_offset_morphs, apply_uv_morphs,
                               expand_weights, unit_rotations)

SAMPLE, MORPH, BONES_BEFORE_PHYSICS, PHYSICS, BONES_AFTER_PHYSICS = range(5)
STAGES = ("sample", "morph", "bones_before_physics", "physics", "bones_after_physics")
"""Stage names in order (index = the stage constants above); ``mmdkit bench`` adds skinning."""

_NB = dict(cache=True, nogil=True)


def motion_in(bound) -> tuple:
    """A ``BoundMotion``'s key arrays in the order ``stage_sample`` unpacks them: bone keys
    (start (B+1,), frame (K,), translation (K,3), rotation (K,4), curve (K,4,4)), morph keys
    (start, frame, weight), IK keys (start, frame, enabled), visibility keys (start, frame, value)."""
    b = bound
    return (b.bone_key_start, b.bone_key_frame, b.bone_key_translation, b.bone_key_rotation, b.bone_key_curve,
            b.morph_key_start, b.morph_key_frame, b.morph_key_weight, b.ik_key_start, b.ik_key_frame,
            b.ik_key_enabled, b.visible_key_start, b.visible_key_frame, b.visible_key_value)


@njit(**_NB)
def stage_sample(frame, motion_keys, coupling, bone_state_out, morph_state_out, frame_out):
    """Keys at ``frame`` → anim_t (B,3) / anim_q (B,4) float64 parent-local (rotations made unit,
    zero or non-finite ones the identity, so no later stage meets them), raw morph weights
    (N,) float64, ik_enabled (K,) uint8 (then switched off where coupling's ik_disabled is set),
    visible (1,) uint8."""
    (bk_start, bk_frame, bk_t, bk_q, bk_curve, mk_start, mk_frame, mk_weight, ik_start, ik_frame, ik_value,
     vis_start, vis_frame, vis_value) = motion_keys
    ik_disabled = coupling[0]
    anim_t, anim_q = bone_state_out[0], bone_state_out[1]
    morph_raw = morph_state_out[0]
    ik_enabled, visible = frame_out[0], frame_out[1]
    sample_bones(frame, bk_start, bk_frame, bk_t, bk_q, bk_curve, anim_t, anim_q)
    unit_rotations(anim_q)
    sample_scalars(frame, mk_start, mk_frame, mk_weight, morph_raw)
    sample_steps(frame, ik_start, ik_frame, ik_value, ik_enabled)
    switch_off_ik(ik_enabled, ik_disabled)
    sample_steps(frame, vis_start, vis_frame, vis_value, visible)


@njit(**_NB)
def stage_morph(geometry, morph_in, bone_state_inout, morph_state_inout, morph_out):
    """Raw weights → effective weights (groups/flips expanded) → bone morphs onto anim_t/anim_q,
    morph_weight (N,) float32; with ``geometry`` also vertex/UV offsets and material factors
    (material_out (M,16) float32 = base × mul + add). The batch path skips geometry."""
    (is_leaf, group_start, group_target, group_weight, kind, bm_start, bm_bone, bm_t, bm_q, vm_start,
     vm_vertex, vm_offset, um_start, um_vertex, um_offset, mm_start, mm_material, mm_op, mm_values,
     material_base) = morph_in
    anim_t, anim_q = bone_state_inout[0], bone_state_inout[1]
    raw, eff, prev_vertex, prev_uv = morph_state_inout
    morph_weight, vertex_offset, uv_offset, add_uv_offset, mat_mul, mat_add, mat_out = morph_out
    if raw.shape[0] > 0:
        expand_weights(raw, is_leaf, group_start, group_target, group_weight, eff)
        apply_bone_morphs(eff, bm_start, bm_bone, bm_t, bm_q, anim_t, anim_q)
        if geometry:
            apply_offset_morphs(eff, prev_vertex, vm_start, vm_vertex, vm_offset, vertex_offset)
            apply_uv_morphs(eff, prev_uv, kind, um_start, um_vertex, um_offset, uv_offset, add_uv_offset)
            apply_material_morphs(eff, mm_start, mm_material, mm_op, mm_values, mat_mul, mat_add)
        for m in range(eff.shape[0]):
            morph_weight[m] = eff[m]
    if geometry:
        for i in range(mat_out.shape[0]):
            for c in range(mat_out.shape[1]):
                mat_out[i, c] = material_base[i, c] * mat_mul[i, c] + mat_add[i, c]


@njit(**_NB)
def stage_bones_before_physics(write, bone_in, ik_in, bone_state_inout, frame_out):
    """Pass 1 (bones not flagged after-physics) → bone_world/bone_skin (B,4,4) float32 model
    space when ``write`` (physics reads them next; skipped when pass 2 follows at once)."""
    bone_pass_before, position = bone_in[0], bone_in[3]
    ik_enabled, bone_world, bone_skin = frame_out[0], frame_out[2], frame_out[3]
    solve_bones(bone_pass_before, bone_in, ik_in, ik_enabled, bone_state_inout)
    if write:
        write_matrices(position, bone_state_inout[7], bone_state_inout[8], bone_world, bone_skin)


@njit(**_NB)
def stage_bones_after_physics(bone_in, ik_in, coupling, bone_state_inout, frame_out):
    """Driven bones back from bone_world, their non-driven descendants refreshed, pass 2
    (after-physics bones) → bone_world/bone_skin (B,4,4) float32 model space."""
    bone_pass_after, parent, position = bone_in[1], bone_in[2], bone_in[3]
    bone_driven, bone_refresh = coupling[1], coupling[2]
    local_t, local_q, world_p, world_q = bone_state_inout[5], bone_state_inout[6], bone_state_inout[7], \
        bone_state_inout[8]
    ik_enabled, bone_world, bone_skin = frame_out[0], frame_out[2], frame_out[3]
    read_driven(bone_driven, bone_world, world_p, world_q)
    refresh_worlds(bone_refresh, parent, position, local_t, local_q, world_p, world_q)
    solve_bones(bone_pass_after, bone_in, ik_in, ik_enabled, bone_state_inout)
    write_matrices(position, world_p, world_q, bone_world, bone_skin)


_StageArgs = namedtuple("_StageArgs", ["motion_keys", "bone_in", "ik_in", "morph_in", "coupling", "bone_state",
                                       "morph_state", "morph_out", "frame_out"])


@njit(inline="always", **_NB)
def _run(first, last, frame, geometry, a):
    """The stage order, once. ``a``: a FrameArgs or a _StageArgs; each stage reads only its own
    fields (a FrameArgs field read takes a reference to every array in it: ~1.3 µs for all)."""
    if first <= SAMPLE <= last:
        stage_sample(frame, a.motion_keys, a.coupling, a.bone_state, a.morph_state, a.frame_out)
    if first <= MORPH <= last:
        stage_morph(geometry, a.morph_in, a.bone_state, a.morph_state, a.morph_out)
    if first <= BONES_BEFORE_PHYSICS <= last:
        stage_bones_before_physics(last < BONES_AFTER_PHYSICS, a.bone_in, a.ik_in, a.bone_state, a.frame_out)
    if first <= BONES_AFTER_PHYSICS <= last:
        stage_bones_after_physics(a.bone_in, a.ik_in, a.coupling, a.bone_state, a.frame_out)


@njit(**_NB)
def run_stages(first, last, frame, geometry, motion_keys, bone_in, ik_in, morph_in, coupling, bone_state_inout,
               morph_state_inout, morph_out, frame_out):
    """Run the stages ``first``..``last`` (SAMPLE..BONES_AFTER_PHYSICS) of ``frame`` in order.

    Model inputs: motion_keys (``motion_in``), bone_in / ik_in / morph_in (``Rig``), coupling
    (``PoseState.coupling``). State in/out: ``PoseState.bone_state``, ``morph_state``; out:
    ``morph_out`` (morph weights, vertex/UV offsets, material factors), ``frame_out``
    (ik_enabled, visible, bone_world, bone_skin). ``geometry`` False skips vertex/UV/material
    morphs. PHYSICS is never run here: a caller with physics stops at BONES_BEFORE_PHYSICS.
    """
    _run(first, last, frame, geometry, _StageArgs(motion_keys, bone_in, ik_in, morph_in, coupling, bone_state_inout,
                                                  morph_state_inout, morph_out, frame_out))


@structref.register
class FrameArgsType(types.StructRef):
    """numba type of ``FrameArgs`` (fields: the tuples ``run_stages`` takes, in its order)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(t)) for name, t in fields)


class FrameArgs(structref.StructRefProxy):
    """Every array argument of ``run_stages`` in one object: FrameArgs(motion_keys, bone_in,
    ik_in, morph_in, coupling, bone_state, morph_state, morph_out, frame_out). numba unboxes it
    as one pointer (~1 µs per call from Python) instead of ~80 arrays (~85 ns each). Build it
    again when a tuple is replaced (``PoseState.set_driven`` replaces ``coupling``)."""


structref.define_proxy(FrameArgs, FrameArgsType, ["motion_keys", "bone_in", "ik_in", "morph_in", "coupling",
                                                  "bone_state", "morph_state", "morph_out", "frame_out"])


@njit(cache=True)
def frame_args(motion_keys, bone_in, ik_in, morph_in, coupling, bone_state, morph_state, morph_out, frame_out):
    """``FrameArgs(...)`` built in a compiled, disk-cached function: the proxy's own constructor
    is compiled anew in every process (~2 s for ~80 array fields); this loads from numba's cache,
    which is invalidated with this file, where the fields are defined."""
    return FrameArgs(motion_keys, bone_in, ik_in, morph_in, coupling, bone_state, morph_state, morph_out, frame_out)


@njit(**_NB)
def run_frame(first, last, frame, geometry, args):
    """``run_stages(first, last, frame, geometry, ...)`` with the arrays from ``args`` (FrameArgs)."""
    _run(first, last, frame, geometry, args)
