"""The CCD IK of several structurally equal solvers at once, one SIMD lane each (float64).

In: a lane group g of the rig (``Rig.ik_group*``, found by ``ik_groups.ik_lane_groups``: solvers with
the same link rows and link modes — free, Euler limits or a hinge, each lane its own limits —
independent of each other), the pose state. Out (in place): what ``ik.solve_ik`` writes for each
member solver (ik_q/local_q of the links, world of the path, local and world of the bones below
the chain), bit for bit the same.

Why: hair and skirt chains that never reach their targets run every iteration. Here every step
and every row refresh of the chain is one branch-free loop over LANES lanes (``ik_lane_steps``:
for a free link both the capped and the uncapped turn are computed and one is selected), which
LLVM vectorises 4 wide (AVX2 ``vsqrtpd``/``vdivpd``/``vmulpd`` on ``%ymm``); a limited link's
limits (trigonometry) then run lane by lane with the scalar solver's own functions. The lanes
run the same operations in the same order as the scalar solver, so each lane's result is the
scalar one. Each lane keeps its own iteration count, as ``ik.solve_ik`` does: the first half of
its loop count turns hinges about their own axis and reflects at the limits, and an iteration in
which none of its links turned sends it to the second half (or ends it there; at once for free
links alone, whose halves are the same steps). Lanes past the group's members copy a member and
stay frozen, as does a lane whose solver is switched off, whose target reached its goal or whose
iterations have ended; the group iterates while a lane is active. A lazy link (``Rig.ik_link_lazy``)
turns the lane's target with it and the rows are refreshed at the iteration's end; after a step
on a row where some lane's link is not lazy, the rows from there down are refreshed and those
lanes read their target back (``ik.solve_ik``'s order for such a link) — except after the
iteration's last step, where the iteration's refresh gives the same values.

The working set lives in stack buffers of the solving call (no allocation, and LLVM can tell
them apart): the chain rows, structure of arrays (row r, field f, lane l at
(r · FIELDS + f) · LANES + l; a lane's path aligned so its target is the group's last row, rows
above it padding at rest that never turns), and per-lane registers (goal, target position,
active flag, turned flag). Each row keeps its parent's world (fixed for a parent outside the
path, passed on by the row above's refresh otherwise), so no loop selects between loaded
values: LLVM would load through selected pointers, one lane at a time. Selections are LLVM
``select``s (``_pick``), not branches, and a store that may keep the old value stores it
through ``_kept``: both keep the loops straight-line vector code (see their docstrings). No
fast-math: every operation rounds as the scalar solver's does.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mmdkit.mathutil import put3, put4
from mmdkit.pose.fk import compose_world, local_offset, update_local, update_world
from mmdkit.pose.ik import _REACHED, put_ik_rotation, take_off_ik
from mmdkit.pose.ik_lane_steps import (_ACT, _AX, _AXEND, _CAP, _G, _HALF, _IN, _IT, _LAZY, _LINK, _LO, _LOOP, _LQ,
                                       _MOV, _NB, _OFF, _OUT, _PP, _PQ, _REGS, _RS, _T, _TRN, _UP, _WP, _WQ, FIELDS,
                                       LANES, MAX_ROWS, _kept, _lane_step, _lane_step_limited, _parent, _pick,
                                       _stack_buffer)

_chain_buffer = _stack_buffer(MAX_ROWS * _RS)
_register_buffer = _stack_buffer(_REGS * LANES)
_step_buffer = _stack_buffer(15 * LANES)  # a step's axes, lengths, parent-frame axis (or turned rotation)
_kind_buffer = _stack_buffer(2 * MAX_ROWS + 1)  # per row: 0/1/2 (_lane_refresh's below); 1.0 an eager link


@njit(inline="always", **_NB)
def _put_pq(c, o, fp, fq, w):
    """Fields fp (a position, 3) and fq (a rotation, 4) of the row at o = the 7-tuple w (p, then q)."""
    c[o + (fp + 0) * LANES] = w[0]
    c[o + (fp + 1) * LANES] = w[1]
    c[o + (fp + 2) * LANES] = w[2]
    c[o + (fq + 0) * LANES] = w[3]
    c[o + (fq + 1) * LANES] = w[4]
    c[o + (fq + 2) * LANES] = w[5]
    c[o + (fq + 3) * LANES] = w[6]


@njit(inline="always", **_NB)
def _put_parent(c, o, w):
    """The parent world p, q of the row at o = the 7-tuple w (world p, then q)."""
    _put_pq(c, o, _PP, _PQ, w)


@njit(inline="always", **_NB)
def _compose(c, o):
    """fk.compose_world with a parent: world (p, q) of the row at o under its parent's world,
    as a 7-tuple."""
    p = _parent(c, o)
    vx, vy, vz = c[o + (_OFF + 0) * LANES], c[o + (_OFF + 1) * LANES], c[o + (_OFF + 2) * LANES]
    lx, ly, lz, lw = c[o + (_LQ + 0) * LANES], c[o + (_LQ + 1) * LANES], c[o + (_LQ + 2) * LANES], \
        c[o + (_LQ + 3) * LANES]
    return compose_world(True, p[0], p[1], p[2], p[3], p[4], p[5], p[6], vx, vy, vz, lx, ly, lz, lw)


@njit(inline="always", **_NB)
def _put_world(c, o, w):
    """The row at o's world p, q = the 7-tuple w."""
    _put_pq(c, o, _WP, _WQ, w)


@njit(inline="always", **_NB)
def _lane_refresh(c, r, below):
    """World p/q of chain row r in every lane from its local offset and rotation and its parent's
    world (``ik._chain_refresh`` per lane), passed on as the parent world of row r + 1 in the
    lanes where row r is its parent. below: row r + 1's kind — 0 row r is its parent in every
    lane, 1 in none (or there is no row r + 1), 2 in some (blended with the outside parent's
    world kept in the others: three loops, so each is straight-line)."""
    base = r * _RS
    if below == 0:
        for l in range(LANES):
            w = _compose(c, base + l)
            _put_world(c, base + l, w)
            _put_parent(c, base + _RS + l, w)
    elif below == 1:
        for l in range(LANES):
            _put_world(c, base + l, _compose(c, base + l))
    else:
        for l in range(LANES):
            w = _compose(c, base + l)
            _put_world(c, base + l, w)
            inside = c[base + _RS + _OUT * LANES + l] == 0.0
            p = _parent(c, base + _RS + l)  # (q, p) order
            _put_parent(c, base + _RS + l, (_pick(inside, w[0], _kept(p[4])), _pick(inside, w[1], _kept(p[5])),
                                            _pick(inside, w[2], _kept(p[6])), _pick(inside, w[3], _kept(p[0])),
                                            _pick(inside, w[4], _kept(p[1])), _pick(inside, w[5], _kept(p[2])),
                                            _pick(inside, w[6], _kept(p[3]))))


@njit(inline="always", **_NB)
def _fill_lane(
    c, reg, l, k, R, on,
    # Model
    bone_in, ik_in,
    # Data in/out
    bone_state_inout,
):
    """Lane l of the buffers from solver k: rows R − n..R − 1 its path of n rows (local rotation
    and offset, the parent's world, link caps and flags), rows above them padding at rest. With
    ``on`` the lane is active and the links' IK rotations are first taken off in the state
    (``ik.solve_ik``'s set-up: local_q = pre-IK, ik_q holds the pre-IK rotation); without, the
    lane only mirrors the state (a switched-off solver, or a spare lane)."""
    parent, position = bone_in.bone_parent, bone_in.bone_position
    ik_link_start, ik_link_bone, ik_link_cap = ik_in.ik_link_start, ik_in.ik_link_bone, ik_in.ik_link_cap
    ik_link_mode, ik_link_lower, ik_link_upper = ik_in.ik_link_mode, ik_in.ik_link_lower, ik_in.ik_link_upper
    ik_link_path, ik_link_lazy, ik_path_start = ik_in.ik_link_path, ik_in.ik_link_lazy, ik_in.ik_path_start
    ik_path_bone, ik_path_parent, ik_link_inside = ik_in.ik_path_bone, ik_in.ik_path_parent, ik_in.ik_link_inside
    st = bone_state_inout
    ik_q, local_t, local_q, world_p, world_q = st.bone_ik_q, st.bone_local_t, st.bone_local_q, st.bone_world_p, \
        st.bone_world_q
    l0, l1 = ik_link_start[k], ik_link_start[k + 1]
    p0, p1 = ik_path_start[k], ik_path_start[k + 1]
    n = p1 - p0
    if on:
        take_off_ik(l0, l1, ik_link_bone, ik_q, local_q)
    top = R - n
    for sr in range(top):  # the padding: at rest, under an outside parent at rest
        o = sr * _RS + l
        for f in range(FIELDS):
            c[o + f * LANES] = 0.0
        c[o + (_WQ + 3) * LANES] = 1.0
        c[o + (_LQ + 3) * LANES] = 1.0
        c[o + (_PQ + 3) * LANES] = 1.0
        c[o + _OUT * LANES] = 1.0
    for r in range(n):
        b = ik_path_bone[p0 + r]
        o = (top + r) * _RS + l
        pb = parent[b]
        s = pb if pb >= 0 else b
        for f in range(FIELDS):
            c[o + f * LANES] = 0.0
        for i in range(4):
            c[o + (_LQ + i) * LANES] = local_q[b, i]
            c[o + (_PQ + i) * LANES] = world_q[s, i]
        v = local_offset(np.uint64(b), parent, position, local_t)
        for i in range(3):
            c[o + (_OFF + i) * LANES] = v[i]
            c[o + (_PP + i) * LANES] = world_p[s, i]
        c[o + _OUT * LANES] = 1.0 if ik_path_parent[p0 + r] < 0 else 0.0
    limited = False
    for j in range(l0, l1):
        o = (top + ik_link_path[j] - p0) * _RS + l
        for i in range(3):
            c[o + (_CAP + i) * LANES] = ik_link_cap[j, i]
            c[o + (_LO + i) * LANES] = ik_link_lower[j, i]
            c[o + (_UP + i) * LANES] = ik_link_upper[j, i]
        for i in range(10):
            c[o + (_IN + i) * LANES] = ik_link_inside[j, i]
        c[o + _LINK * LANES] = 1.0
        c[o + _LAZY * LANES] = 1.0 if ik_link_lazy[j] != 0 and ik_link_mode[j] == 0 else 0.0
        limited = limited or ik_link_mode[j] != 0
    loops = ik_in.ik_loop[k]
    reg[_ACT * LANES + l] = 1.0 if on else 0.0
    reg[_MOV * LANES + l] = 0.0
    reg[_LOOP * LANES + l] = loops
    reg[_IT * LANES + l] = 0.0
    reg[_AXEND * LANES + l] = loops // 2
    reg[_HALF * LANES + l] = loops // 2 if limited else 0


@njit(_nrt=False, **_NB)  # no reference counting (bones._NB)
def solve_lanes(
    g,
    # Model
    bone_in, ik_in,
    # Data in
    ik_enabled_in,
    # Data in/out
    bone_state_inout,
):
    """CCD for every member of lane group g whose ik_enabled_in (K,) uint8 is set, as ``ik.solve_ik``
    would solve them one by one in the group's order (each pulling its target to its IK bone),
    bit for bit. Nothing is allocated (the working set is on the stack).

    bone_in: ``BoneIn``; ik_in: ``IkIn``; bone_state_inout: ``BoneState`` — writes bone_ik_q /
    bone_local_q of the members' links, the world of their paths, then local and world of every
    bone below each member's chain, member by member."""
    m, st = bone_in, bone_state_inout
    parent, position = m.bone_parent, m.bone_position
    ik_link_start, ik_link_bone = ik_in.ik_link_start, ik_in.ik_link_bone
    ik_path_start, ik_path_bone = ik_in.ik_path_start, ik_in.ik_path_bone
    ik_after_start, ik_after_bone = ik_in.ik_after_start, ik_in.ik_after_bone
    ik_group_start, ik_group_solver, ik_group_bone = ik_in.ik_group_start, ik_in.ik_group_solver, ik_in.ik_group_bone
    ik_group_rows, ik_group_link_start, ik_group_link_row = ik_in.ik_group_rows, ik_in.ik_group_link_start, \
        ik_in.ik_group_link_row
    ik_group_link_mode = ik_in.ik_group_link_mode
    ik_enabled = ik_enabled_in
    ik_q, local_t, local_q, world_p, world_q = st.bone_ik_q, st.bone_local_t, st.bone_local_q, st.bone_world_p, \
        st.bone_world_q
    c = _chain_buffer()
    reg = _register_buffer()
    s0, s1 = ik_group_start[g], ik_group_start[g + 1]
    nl = s1 - s0
    R = ik_group_rows[g]
    any_on = False
    for l in range(LANES):
        k = ik_group_solver[s0 + l % nl]
        on = l < nl and ik_enabled[k] != 0
        any_on = any_on or on
        _fill_lane(c, reg, l, k, R, on, bone_in, ik_in, bone_state_inout)
        gb = ik_group_bone[s0 + l % nl]  # the goal: the IK bone's world position, fixed
        reg[(_G + 0) * LANES + l] = world_p[gb, 0]
        reg[(_G + 1) * LANES + l] = world_p[gb, 1]
        reg[(_G + 2) * LANES + l] = world_p[gb, 2]
    if not any_on:
        return
    kinds = _kind_buffer()
    sb = _step_buffer()
    for r in range(R):  # per row: its lanes' parents all above (0), all outside (1) or mixed (2)
        outside = 0
        for l in range(LANES):
            outside += 1 if c[r * _RS + _OUT * LANES + l] != 0.0 else 0
        kinds[r] = 0.0 if outside == 0 else (1.0 if outside == LANES else 2.0)
    kinds[R] = 1.0
    for r in range(R):  # per row: 1.0 where it is a link in some lane that is not lazy (eager)
        eager = 0.0
        for l in range(LANES):
            o = r * _RS + l
            if c[o + _LINK * LANES] != 0.0 and c[o + _LAZY * LANES] == 0.0:
                eager = 1.0
        kinds[MAX_ROWS + 1 + r] = eager
    for r in range(R):
        _lane_refresh(c, r, kinds[r + 1])
    tb = (R - 1) * _RS + _WP * LANES  # the targets' row
    for l in range(LANES):
        reg[(_T + 0) * LANES + l] = c[tb + l]
        reg[(_T + 1) * LANES + l] = c[tb + LANES + l]
        reg[(_T + 2) * LANES + l] = c[tb + 2 * LANES + l]
    j0, j1 = ik_group_link_start[g], ik_group_link_start[g + 1]
    while True:  # every lane iterates as ik.solve_ik does, each with its own count
        alive = False
        for l in range(LANES):
            dx = reg[(_T + 0) * LANES + l] - reg[(_G + 0) * LANES + l]
            dy = reg[(_T + 1) * LANES + l] - reg[(_G + 1) * LANES + l]
            dz = reg[(_T + 2) * LANES + l] - reg[(_G + 2) * LANES + l]
            if dx * dx + dy * dy + dz * dz < _REACHED or reg[_IT * LANES + l] >= reg[_LOOP * LANES + l]:
                reg[_ACT * LANES + l] = 0.0
            reg[_MOV * LANES + l] = 0.0
            reg[_AX * LANES + l] = 1.0 if reg[_IT * LANES + l] < reg[_AXEND * LANES + l] else 0.0
            alive = alive or reg[_ACT * LANES + l] != 0.0
        if not alive:
            break
        for j in range(j0, j1):
            r = R - 1 - ik_group_link_row[j]
            mode = ik_group_link_mode[j]
            if mode == 0:
                _lane_step(c, reg, sb, r)
            else:
                _lane_step_limited(c, reg, sb, r, mode)
            # an eager link: its rows refreshed, the target read back; not at the iteration's last
            # step: the iteration's refresh below recomputes every row (from the local rotations
            # and the outside parents alone) and reads the targets back, the same values
            if kinds[MAX_ROWS + 1 + r] != 0.0 and j != j1 - 1:
                for rr in range(r, R):
                    _lane_refresh(c, rr, kinds[rr + 1])
                for l in range(LANES):
                    o = r * _RS + l
                    back = (reg[_TRN * LANES + l] != 0.0) & (c[o + _LINK * LANES] != 0.0) & (
                        c[o + _LAZY * LANES] == 0.0)
                    for i in range(3):
                        reg[(_T + i) * LANES + l] = _pick(back, c[tb + i * LANES + l], _kept(reg[(_T + i) * LANES + l]))
        for r in range(R):  # the iteration's refresh of every row (a row nothing turned above comes out the same)
            _lane_refresh(c, r, kinds[r + 1])
        for l in range(LANES):
            reg[(_T + 0) * LANES + l] = c[tb + l]
            reg[(_T + 1) * LANES + l] = c[tb + LANES + l]
            reg[(_T + 2) * LANES + l] = c[tb + 2 * LANES + l]
        for l in range(LANES):  # the iteration count; an iteration that turned nothing would repeat in
            if reg[_ACT * LANES + l] == 0.0:  # this half: the second half next, or the lane is done
                continue
            reg[_IT * LANES + l] += 1.0
            if reg[_MOV * LANES + l] == 0.0:
                if reg[_IT * LANES + l] > reg[_HALF * LANES + l]:
                    reg[_ACT * LANES + l] = 0.0
                else:
                    reg[_IT * LANES + l] = reg[_HALF * LANES + l]
    for l in range(nl):  # the lanes back into the state, then each member's bones below its chain
        k = ik_group_solver[s0 + l]
        if ik_enabled[k] == 0:
            continue
        p0, p1 = ik_path_start[k], ik_path_start[k + 1]
        top = R - (p1 - p0)
        for r in range(p1 - p0):
            b = ik_path_bone[p0 + r]
            o = (top + r) * _RS + l
            put4(local_q, b, c[o + _LQ * LANES], c[o + (_LQ + 1) * LANES], c[o + (_LQ + 2) * LANES],
                 c[o + (_LQ + 3) * LANES])
            put3(world_p, b, c[o + _WP * LANES], c[o + (_WP + 1) * LANES], c[o + (_WP + 2) * LANES])
            put4(world_q, b, c[o + _WQ * LANES], c[o + (_WQ + 1) * LANES], c[o + (_WQ + 2) * LANES],
                 c[o + (_WQ + 3) * LANES])
        for j in range(ik_link_start[k], ik_link_start[k + 1]):
            put_ik_rotation(ik_link_bone[j], ik_q, local_q)
    for l in range(nl):
        k = ik_group_solver[s0 + l]
        if ik_enabled[k] == 0:
            continue
        for jj in range(ik_after_start[k], ik_after_start[k + 1]):
            b = ik_after_bone[jj]
            update_local(b, m.bone_flags, m.bone_append_parent, m.bone_append_ratio, m.bone_fixed_axis,
                         st.bone_anim_t, st.bone_anim_q, ik_q, st.bone_append_t, st.bone_append_q, local_t, local_q,
                         world_q)
            update_world(b, parent, position, local_t, local_q, world_p, world_q)
