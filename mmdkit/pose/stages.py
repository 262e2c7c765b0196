"""The one stage list of a frame: sample → morphs → bones before physics → [physics] → bones after.

In: a frame number, the motion's keys (``motion_in``: ``MotionKeys``), a Rig's named groups and a
``PoseState``'s (each field read by name; kernel parameters labelled ``# Model`` / ``# Data in/out``
/ ``# Data out``, with ``_in`` / ``_inout`` / ``_out`` names). Out: the state, rewritten in place.
``run_stages(first, last, ...)`` runs the stages first..last in MMD's order; the order is written
once (``_run``): the fused per-frame call (one call, or two around physics), the timed path (one
call per stage), ``run_frame`` (the same call with every argument in one ``FrameArgs``, for callers
from Python; a stage reads only its own fields) and the batch kernel (``batch.pose_frames``, every
stage per frame) all go through it. The physics stage itself runs outside numba
(``mmdkit.runtime``), between a call that ends with BONES_BEFORE_PHYSICS and one that starts with
BONES_AFTER_PHYSICS.
"""

from __future__ import annotations

from collections import namedtuple

from numba import njit, types
from numba.experimental import structref

from mmdkit.animation.sampling import sample_bones, sample_scalars, sample_steps
from mmdkit.pose.bones import read_driven, refresh_worlds, solve_bones, switch_off_ik, write_matrices, write_rows
from mmdkit.pose.fields import Field, group
from mmdkit.pose.morph import (apply_bone_morphs, apply_material_morphs, apply_offset_morphs, apply_uv_morphs,
                               expand_weights, unit_rotations)

SAMPLE, MORPH, BONES_BEFORE_PHYSICS, PHYSICS, BONES_AFTER_PHYSICS = range(5)
STAGES = ("sample", "morph", "bones_before_physics", "physics", "bones_after_physics")
"""Stage names in order (index = the stage constants above); ``mmdkit bench`` adds skinning."""

_NB = dict(cache=True, nogil=True)
_STAGE = dict(_NB, _nrt=False)  # the stages: no reference counting of their ~60 arrays (bones._NB)


MotionKeys = group("MotionKeys", (  # Kb bone keys, Km morph keys, Ki IK keys, Kv visibility keys
    Field("bone_key_start", ("B+1",), "int32", "", "CSR of each bone's keys"),
    Field("bone_key_frame", ("Kb",), "float64", "", "key frames"),
    Field("bone_key_translation", ("Kb", 3), "float64", "parent-local", "translations"),
    Field("bone_key_rotation", ("Kb", 4), "float64", "parent-local", "rotations (x, y, z, w)"),
    Field("bone_key_curve", ("Kb", 4, 4), "float64", "", "interpolation curves"),
    Field("morph_key_start", ("N+1",), "int32", "", "CSR of each morph's keys"),
    Field("morph_key_frame", ("Km",), "float64", "", "key frames"),
    Field("morph_key_weight", ("Km",), "float64", "", "weights"),
    Field("ik_key_start", ("K+1",), "int32", "", "CSR of each IK solver's keys"),
    Field("ik_key_frame", ("Ki",), "float64", "", "key frames"),
    Field("ik_key_enabled", ("Ki",), "uint8", "", "solver on from the key on"),
    Field("visible_key_start", (2,), "int32", "", "CSR of the visibility keys"),
    Field("visible_key_frame", ("Kv",), "float64", "", "key frames"),
    Field("visible_key_value", ("Kv",), "uint8", "", "model shown from the key on"),
), "A BoundMotion's keys (``motion_in``): the kernels' ``motion_in`` (# Model).", __name__)


def motion_in(bound) -> MotionKeys:
    """A ``BoundMotion``'s key arrays as the group ``MotionKeys`` (``stage_sample`` reads them)."""
    return MotionKeys(**{name: getattr(bound, name) for name in MotionKeys._fields})


@njit(**_STAGE)
def stage_sample(
    frame,
    # Model
    motion_in, coupling_in,
    # Data out
    bone_state_out, morph_state_out, frame_out,
):
    """Keys at ``frame`` → bone_anim_t (B,3) / bone_anim_q (B,4) float64 parent-local (rotations made
    unit, zero or non-finite ones the identity, so no later stage meets them), morph_raw_weight
    (N,) float64, ik_enabled (K,) uint8 (then switched off where coupling's ik_disabled is set),
    visible (1,) uint8."""
    k = motion_in
    anim_t, anim_q = bone_state_out.bone_anim_t, bone_state_out.bone_anim_q
    ik_enabled = frame_out.ik_enabled
    sample_bones(frame, k.bone_key_start, k.bone_key_frame, k.bone_key_translation, k.bone_key_rotation,
                 k.bone_key_curve, anim_t, anim_q)
    unit_rotations(anim_q)
    sample_scalars(frame, k.morph_key_start, k.morph_key_frame, k.morph_key_weight, morph_state_out.morph_raw_weight)
    sample_steps(frame, k.ik_key_start, k.ik_key_frame, k.ik_key_enabled, ik_enabled)
    switch_off_ik(ik_enabled, coupling_in.ik_disabled)
    sample_steps(frame, k.visible_key_start, k.visible_key_frame, k.visible_key_value, frame_out.visible)


@njit(**_STAGE)
def stage_morph(
    geometry,
    # Model
    morph_in,
    # Data in/out
    bone_state_inout, morph_state_inout,
    # Data out
    morph_out,
):
    """Raw weights → effective weights (groups/flips expanded) → bone morphs onto bone_anim_t/q,
    morph_weight (N,) float32; with ``geometry`` also vertex/UV offsets and material factors
    (material_out (M,16) float32 = base × mul + add). The batch path skips geometry."""
    m, st, out = morph_in, morph_state_inout, morph_out
    raw, eff = st.morph_raw_weight, st.morph_effective_weight
    morph_weight, mat_mul, mat_add, mat_out = out.morph_weight, out.material_mul, out.material_add, out.material_out
    if raw.shape[0] > 0:
        expand_weights(raw, m.morph_is_leaf, m.morph_group_start, m.morph_group_target, m.morph_group_weight, eff)
        apply_bone_morphs(eff, m.bone_morph_start, m.bone_morph_bone, m.bone_morph_translation,
                          m.bone_morph_rotation, bone_state_inout.bone_anim_t, bone_state_inout.bone_anim_q)
        if geometry:
            apply_offset_morphs(eff, st.morph_vertex_prev, m.vertex_morph_start, m.vertex_morph_vertex,
                                m.vertex_morph_offset, out.vertex_offset)
            apply_uv_morphs(eff, st.morph_uv_prev, m.morph_kind, m.uv_morph_start, m.uv_morph_vertex,
                            m.uv_morph_offset, out.uv_offset, out.additional_uv_offset)
            apply_material_morphs(eff, m.material_morph_start, m.material_morph_material, m.material_morph_op,
                                  m.material_morph_values, mat_mul, mat_add)
        for i in range(eff.shape[0]):
            morph_weight[i] = eff[i]
    if geometry:
        material_base = m.material_base
        for i in range(mat_out.shape[0]):
            for c in range(mat_out.shape[1]):
                mat_out[i, c] = material_base[i, c] * mat_mul[i, c] + mat_add[i, c]


@njit(**_STAGE)
def stage_bones_before_physics(
    write,
    # Model
    bone_in, ik_in,
    # Data in/out
    bone_state_inout,
    # Data out
    frame_out,
):
    """Pass 1 (bones not flagged after-physics) → bone_world/bone_skin (B,4,4) float32 model
    space when ``write`` (physics reads them next; skipped when pass 2 follows at once)."""
    solve_bones(bone_in.bone_pass_before, bone_in, ik_in, frame_out.ik_enabled, bone_state_inout)
    if write:
        write_matrices(bone_in.bone_position, bone_state_inout.bone_world_p, bone_state_inout.bone_world_q,
                       frame_out.bone_world, frame_out.bone_skin)


@njit(**_STAGE)
def stage_bones_after_physics(
    all_rows,
    # Model
    bone_in, ik_in, coupling_in,
    # Data in/out
    bone_state_inout,
    # Data out
    frame_out,
):
    """Driven bones back from bone_world, their non-driven descendants refreshed, pass 2
    (after-physics bones) → bone_world/bone_skin (B,4,4) float32 model space: every row with
    ``all_rows`` (pass 1 wrote none), else only the rows this stage may change (driven, refreshed,
    ``bone_rewrite_after``): the others keep what pass 1 wrote from the same world."""
    parent, position = bone_in.bone_parent, bone_in.bone_position
    st = bone_state_inout
    world_p, world_q = st.bone_world_p, st.bone_world_q
    bone_world = frame_out.bone_world
    read_driven(coupling_in.bone_driven, bone_world, world_p, world_q)
    refresh_worlds(coupling_in.bone_refresh, parent, position, st.bone_local_t, st.bone_local_q, world_p, world_q)
    solve_bones(bone_in.bone_pass_after, bone_in, ik_in, frame_out.ik_enabled, bone_state_inout)
    bone_skin = frame_out.bone_skin
    if all_rows:
        write_matrices(position, world_p, world_q, bone_world, bone_skin)
    else:
        write_rows(bone_in.bone_rewrite_after, position, world_p, world_q, bone_world, bone_skin)
        write_rows(coupling_in.bone_driven, position, world_p, world_q, bone_world, bone_skin)
        write_rows(coupling_in.bone_refresh, position, world_p, world_q, bone_world, bone_skin)


FRAME_ARGS = ("motion_keys", "bone_in", "ik_in", "morph_in", "coupling", "bone_state", "morph_state", "morph_out",
              "frame_out")
"""The groups ``run_stages`` takes after its scalars, in order: the fields of ``FrameArgs``."""
_StageArgs = namedtuple("_StageArgs", FRAME_ARGS)


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
        # a call starting after BONES_BEFORE_PHYSICS follows one that ended with it (every matrix written)
        stage_bones_after_physics(first <= BONES_BEFORE_PHYSICS, a.bone_in, a.ik_in, a.coupling, a.bone_state,
                                  a.frame_out)


@njit(**_NB)
def run_stages(
    first, last, frame, geometry,
    # Model
    motion_in, bone_in, ik_in, morph_in, coupling_in,
    # Data in/out
    bone_state_inout, morph_state_inout,
    # Data out
    morph_out, frame_out,
):
    """Run the stages ``first``..``last`` (SAMPLE..BONES_AFTER_PHYSICS) of ``frame`` in order.

    Model: motion_in (``MotionKeys``, ``motion_in``), bone_in / ik_in / morph_in (``Rig``: ``BoneIn``,
    ``IkIn``, ``MorphIn``), coupling_in (``PoseState.coupling``: ``Coupling``). Data in/out:
    ``PoseState.bone_state`` (``BoneState``), ``morph_state`` (``MorphState``). Data out:
    ``morph_out`` (``MorphOut``: morph weights, vertex/UV offsets, material factors), ``frame_out``
    (``FrameOut``: ik_enabled, visible, bone_world, bone_skin). ``geometry`` False skips
    vertex/UV/material morphs. PHYSICS is never run here: a caller with physics stops at
    BONES_BEFORE_PHYSICS.
    """
    _run(first, last, frame, geometry, _StageArgs(motion_in, bone_in, ik_in, morph_in, coupling_in, bone_state_inout,
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


structref.define_proxy(FrameArgs, FrameArgsType, list(FRAME_ARGS))


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
