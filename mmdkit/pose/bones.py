"""Bone stages of one frame: append (付与), fixed axis, FK (``fk``) and CCD IK (``ik``), in float64.

In: a ``Rig``'s groups (``bone_in``, ``ik_in``: ``rig.BoneIn``, ``rig.IkIn``), the pose state's animated
translation/rotation (B,3)/(B,4) float64 (keys + bone morphs), IK enabled flags (K,) uint8.
Out (in place): local and world rotation/position per bone (float64), then ``write_matrices`` →
bone_world / bone_skin (B,4,4) float32; ``read_driven``/``refresh_worlds`` take a simulator's
bones back between the passes.
Composition: local rotation = ik ⊗ append ⊗ animated (animated applied first); world =
parent ∘ (rest offset + local translation, local rotation). Append 'local' flag: the source's
world-space rotation relative to its parent chain is used (documented choice: like nanoem).
"""

from __future__ import annotations

from numba import njit

from mmdkit.mathutil import put3, put4, qfrom_matrix3_scalar, qto_matrix3_scalar
from mmdkit.pose.fk import update_local, update_world
from mmdkit.pose.ik import solve_ik
from mmdkit.pose.ik_lanes import solve_lanes

# _nrt=False: no reference counting. These kernels allocate nothing and take their arrays in named groups;
# with it numba would increment and decrement the count of every array (~80 for solve_bones) on each call
# (an atomic operation each: ~10 µs a frame on a rig with many solvers).
_NB = dict(cache=True, nogil=True, _nrt=False, error_model="numpy")


@njit(**_NB)
def switch_off_ik(ik_enabled_inout, ik_disabled):
    """ik_enabled_inout (K,) uint8 = 0 where ik_disabled (K,) uint8 is set (solvers whose links
    physics drives: MMD skips them)."""
    for k in range(ik_disabled.shape[0]):
        if ik_disabled[k] != 0:
            ik_enabled_inout[k] = 0


@njit(**_NB)
def solve_bones(
    bones,
    # Model
    bone_in, ik_in,
    # Data in
    ik_enabled_in,
    # Data in/out
    bone_state_inout,
):
    """Evaluate ``bones`` (P,) int32 in evaluation order (one pass): append, local, world, then
    each bone's IK solver where ik_enabled_in (K,) uint8 allows — a solver of a lane group
    (``Rig.ik_group``) at the group's last IK bone, with the other members (``ik_lanes``; the
    group is formed only where that gives the same result as solving each at its own bone).

    bone_in: ``BoneIn``; ik_in: ``IkIn``; bone_state_inout: ``BoneState`` — reads
    bone_anim_t/bone_anim_q, writes the IK/append/local/world arrays of ``bones``.
    """
    m, st = bone_in, bone_state_inout
    bone_ik, ik_group, ik_group_start, ik_group_solver = m.bone_ik, ik_in.ik_group, ik_in.ik_group_start, \
        ik_in.ik_group_solver
    ik_q, local_t, local_q, world_p, world_q = st.bone_ik_q, st.bone_local_t, st.bone_local_q, st.bone_world_p, \
        st.bone_world_q
    for i in range(bones.shape[0]):
        put4(ik_q, bones[i], 0.0, 0.0, 0.0, 1.0)
    for i in range(bones.shape[0]):
        b = bones[i]
        update_local(b, m.bone_flags, m.bone_append_parent, m.bone_append_ratio, m.bone_fixed_axis, st.bone_anim_t,
                     st.bone_anim_q, ik_q, st.bone_append_t, st.bone_append_q, local_t, local_q, world_q)
        update_world(b, m.bone_parent, m.bone_position, local_t, local_q, world_p, world_q)
        k = bone_ik[b]
        if k < 0:
            continue
        g = ik_group[k]
        if g < 0:
            if ik_enabled_in[k] != 0:
                solve_ik(k, b, bone_in, ik_in, bone_state_inout)
        elif ik_group_solver[ik_group_start[g + 1] - 1] == k:  # the group's last member: solve them all
            solve_lanes(g, bone_in, ik_in, ik_enabled_in, bone_state_inout)


@njit(**_NB)
def refresh_worlds(bones, parent, position, local_t, local_q, world_p, world_q):
    """Recompute world_p (B,3) / world_q (B,4) float64 of ``bones`` (P,) int32 (evaluation
    order) from local_t (B,3) / local_q (B,4) and the parents' worlds; parent (B,) int32,
    position (B,3) float64 rest positions."""
    for i in range(bones.shape[0]):
        update_world(bones[i], parent, position, local_t, local_q, world_p, world_q)


@njit(inline="always", **_NB)
def _write_row(b, position, world_p, world_q, bone_world_out, bone_skin_out, skin):
    """Row b of bone_world_out (and with ``skin`` of bone_skin_out): see ``write_matrices``."""
    x, y, z, w = world_q[b, 0], world_q[b, 1], world_q[b, 2], world_q[b, 3]
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = qto_matrix3_scalar(x, y, z, w)
    px, py, pz = world_p[b, 0], world_p[b, 1], world_p[b, 2]
    rot = (r00, r01, r02, r10, r11, r12, r20, r21, r22)
    for i in range(3):
        for j in range(3):
            bone_world_out[b, i, j] = rot[3 * i + j]
    bone_world_out[b, 0, 3] = px
    bone_world_out[b, 1, 3] = py
    bone_world_out[b, 2, 3] = pz
    for j in range(3):
        bone_world_out[b, 3, j] = 0.0
    bone_world_out[b, 3, 3] = 1.0
    if skin:
        bx, by, bz = position[b, 0], position[b, 1], position[b, 2]
        for i in range(3):
            for j in range(3):
                bone_skin_out[b, i, j] = rot[3 * i + j]
        bone_skin_out[b, 0, 3] = px - (r00 * bx + r01 * by + r02 * bz)
        bone_skin_out[b, 1, 3] = py - (r10 * bx + r11 * by + r12 * bz)
        bone_skin_out[b, 2, 3] = pz - (r20 * bx + r21 * by + r22 * bz)
        for j in range(3):
            bone_skin_out[b, 3, j] = 0.0
        bone_skin_out[b, 3, 3] = 1.0


@njit(**_NB)
def write_matrices(position, world_p, world_q, bone_world_out, bone_skin_out):
    """bone_world_out (B,4,4) float32 from world_p (B,3) / world_q (B,4) float64 (model space)
    and bone_skin_out (B,4,4) float32 = world @ translate(-position (B,3) rest position); a
    (0,4,4) bone_skin_out is left out (the batch keeps no skin matrices)."""
    skin = bone_skin_out.shape[0] != 0
    for b in range(world_p.shape[0]):
        _write_row(b, position, world_p, world_q, bone_world_out, bone_skin_out, skin)


@njit(**_NB)
def write_rows(bones, position, world_p, world_q, bone_world_out, bone_skin_out):
    """``write_matrices`` for the rows ``bones`` (R,) int32 alone (the others keep their matrices)."""
    skin = bone_skin_out.shape[0] != 0
    for i in range(bones.shape[0]):
        _write_row(bones[i], position, world_p, world_q, bone_world_out, bone_skin_out, skin)


@njit(**_NB)
def read_driven(bone_driven, bone_world, world_p_out, world_q_out):
    """world_p_out (B,3) / world_q_out (B,4) float64 of the bones ``bone_driven`` (D,) int32 taken
    back from bone_world (B,4,4) float32 model space (where a simulator wrote them)."""
    for i in range(bone_driven.shape[0]):
        b = bone_driven[i]
        q = qfrom_matrix3_scalar(bone_world[b, 0, 0], bone_world[b, 0, 1], bone_world[b, 0, 2],
                                 bone_world[b, 1, 0], bone_world[b, 1, 1], bone_world[b, 1, 2],
                                 bone_world[b, 2, 0], bone_world[b, 2, 1], bone_world[b, 2, 2])
        put4(world_q_out, b, q[0], q[1], q[2], q[3])
        put3(world_p_out, b, bone_world[b, 0, 3], bone_world[b, 1, 3], bone_world[b, 2, 3])
