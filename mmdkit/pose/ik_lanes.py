"""The CCD IK of several structurally equal solvers at once, one SIMD lane each (float64).

In: a lane group g of the rig (``Rig.ik_group*``, found by ``ik_groups.ik_lane_groups``: solvers with
free links only and the same link rows, independent of each other), the pose
state. Out (in place): what ``ik.solve_ik`` writes for each member solver (ik_q/local_q of the
links, world of the path, local and world of the bones below the chain), bit for bit the same.

Why: hair chains that never reach their targets run every iteration, and their steps are
straight-line float64 maths (``ik._ccd_free``). Here every step and every row refresh of the
chain is one branch-free loop over LANES lanes (both the capped and the uncapped turn are
computed and one is selected; a step first computes every lane's axes and cap test, and where no
lane is capped computes the uncapped turn alone), which LLVM vectorises 4 wide (AVX2
``vsqrtpd``/``vdivpd``/``vmulpd`` on ``%ymm``); the lanes run the same operations in the same
order as the scalar solver, so each lane's result is the scalar one. Lanes past the group's
members copy a member and stay frozen, as does a lane whose solver is switched off, whose target reached its goal
or whose own loop count has ended. The group iterates until no lane turned a link (every later iteration would
repeat it: free links have no hinge or limit half, so a free solver's two halves are the same steps) or the
largest loop count ends. A lazy link (``Rig.ik_link_lazy``)
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

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from mmdkit.mathutil import put3, put4, qmul_scalar, qrot_scalar
from mmdkit.pose.fk import compose_world, local_offset, update_local, update_world
from mmdkit.pose.ik import _REACHED, _TINY_AXIS, _axes, put_ik_rotation, take_off_ik
from mmdkit.pose.ik_groups import IK_LANE_ROWS, IK_LANES

_NB = dict(cache=True, nogil=True, error_model="numpy")

LANES = IK_LANES  # solvers per group (two AVX2 float64 vectors)
MAX_ROWS = IK_LANE_ROWS  # chain rows
# fields of a chain row (each LANES wide): world p, world q, local q, local offset (fk.local_offset),
# the parent's world p, q, 1.0 where the parent is outside the path (not the row above), the step
# cap's cos(c), sin(c/2), cos(c/2) (Rig.ik_link_cap), 1.0 where the row is a link of the lane's
# solver, 1.0 where that link turns the target (lazy: the target hangs below it)
_WP, _WQ, _LQ, _OFF, _PP, _PQ, _OUT, _CAP, _LINK, _LAZY = 0, 3, 7, 11, 14, 17, 21, 22, 25, 26
FIELDS = 27
_RS = FIELDS * LANES  # one row, in float64
# registers (each LANES wide): goal, target position, active (1.0) / frozen, turned this iteration,
# turned in the last step, the lane's loop count (members may differ: a lane freezes after its own)
_G, _T, _ACT, _MOV, _TRN, _LOOP = 0, 3, 6, 7, 8, 9
_REGS = 10


def _stack_buffer(n):
    """An intrinsic: pointer to n float64 in the calling function's stack frame (32-byte aligned,
    uninitialised, allocated once per call in the entry block)."""
    @intrinsic
    def buffer(typingctx):
        def codegen(context, builder, signature, args):
            with builder.goto_entry_block():
                slot = builder.alloca(ir.ArrayType(ir.DoubleType(), n))
                slot.align = 32
            return builder.bitcast(slot, ir.PointerType(ir.DoubleType()))
        return types.CPointer(types.float64)(), codegen
    return buffer


@intrinsic
def _kept(typingctx, x):
    """x itself (LLVM ``freeze``). Storing ``new if c else old`` with old just loaded from the same
    place lets LLVM turn the store into a masked one (vmaskmovpd, slow on Zen); storing
    ``new if c else _kept(old)`` stays a blend and a plain store."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        instr = ir.Instruction(builder.block, ir.DoubleType(), "freeze", [args[0]])
        builder._insert(instr)
        return instr
    return types.float64(types.float64), codegen


@intrinsic
def _pick(typingctx, c, a, b):
    """a if c else b for float64 a, b and a boolean c, as one LLVM ``select``: a conditional
    expression becomes branches, and LLVM's jump threading then merges the branches on one
    condition into two paths with every operation between them duplicated (both paths run once
    if-converted: twice the square roots and divides)."""
    if c != types.boolean or a != types.float64 or b != types.float64:
        return None

    def codegen(context, builder, signature, args):
        cond = context.cast(builder, args[0], types.boolean, types.boolean)
        return builder.select(builder.trunc(cond, ir.IntType(1)) if cond.type != ir.IntType(1) else cond,
                              args[1], args[2])
    return types.float64(types.boolean, types.float64, types.float64), codegen


_chain_buffer = _stack_buffer(MAX_ROWS * _RS)
_register_buffer = _stack_buffer(_REGS * LANES)
_step_buffer = _stack_buffer(15 * LANES)  # a step's axes and lengths (_step_axis) and parent-frame axis
_kind_buffer = _stack_buffer(2 * MAX_ROWS + 1)  # per row: 0/1/2 (_lane_refresh's below); 1.0 an eager link


@njit(inline="always", **_NB)
def _parent(c, o):
    """The parent's world rotation (4) and position (3) of the row at o (row base + lane)."""
    return (c[o + (_PQ + 0) * LANES], c[o + (_PQ + 1) * LANES], c[o + (_PQ + 2) * LANES], c[o + (_PQ + 3) * LANES],
            c[o + (_PP + 0) * LANES], c[o + (_PP + 1) * LANES], c[o + (_PP + 2) * LANES])


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
def _step_axis(c, reg, o, l):
    """The first part of a step (``ik._axes``) for the row at o in lane l: (a (3), b (3), c (3),
    aa, bb, cc) from the link's world position, the target and the goal."""
    lx, ly, lz = c[o + (_WP + 0) * LANES], c[o + (_WP + 1) * LANES], c[o + (_WP + 2) * LANES]
    gx, gy, gz = reg[(_G + 0) * LANES + l], reg[(_G + 1) * LANES + l], reg[(_G + 2) * LANES + l]
    tx, ty, tz = reg[(_T + 0) * LANES + l], reg[(_T + 1) * LANES + l], reg[(_T + 2) * LANES + l]
    return _axes(gx, gy, gz, lx, ly, lz, tx, ty, tz)


@njit(inline="always", **_NB)
def _step_rest(c, reg, o, l, e, vx, vy, vz, uncapped):
    """The rest of a step for the row at o in lane l, from ``_step_axis``'s e and the world axis
    in the parent frame v: ``ik._ccd_free`` with both the capped and the uncapped turn computed
    and one selected (with ``uncapped``, a constant, only the uncapped one: no lane is capped).
    The lane turns where it is active, the row is one of its links and the axis is not tiny; the
    target turns with the link where the link is lazy (the target hangs below)."""
    ax, ay, az, bx, by, bz, cx, cy, cz, aa, bb, cc = e
    lx, ly, lz = c[o + (_WP + 0) * LANES], c[o + (_WP + 1) * LANES], c[o + (_WP + 2) * LANES]
    rx, ry, rz, rw = c[o + (_LQ + 0) * LANES], c[o + (_LQ + 1) * LANES], c[o + (_LQ + 2) * LANES], \
        c[o + (_LQ + 3) * LANES]
    cos_cap, sin_half_cap, cos_half_cap = c[o + (_CAP + 0) * LANES], c[o + (_CAP + 1) * LANES], \
        c[o + (_CAP + 2) * LANES]
    link = c[o + _LINK * LANES] != 0.0
    lazy = c[o + _LAZY * LANES] != 0.0
    tx, ty, tz = reg[(_T + 0) * LANES + l], reg[(_T + 1) * LANES + l], reg[(_T + 2) * LANES + l]
    act = reg[_ACT * LANES + l] != 0.0
    moved = reg[_MOV * LANES + l]
    turn = act & link & (cc > _TINY_AXIS * (aa * bb))
    vv = vx * vx + vy * vy + vz * vz
    ab = ax * bx + ay * by + az * bz
    # ik._half_angle: each lane runs its branch's operations (both branches: the rotation's square
    # root and divide shared between them, operands selected; the target's are not: they are on
    # the path to the next step, and selecting needs the cap test first)
    m = math.sqrt(aa * bb)
    mab = m + ab
    w_free = math.sqrt(aa / bb)
    if uncapped:  # the uncapped operations below, alone
        n1 = 1.0 / math.sqrt(2.0 * m * mab)
        k = math.sqrt(cc / vv) * n1
        ch = mab * n1
        t0, t1, t2 = bx * w_free, by * w_free, bz * w_free
    else:
        capped = ab < cos_cap * m
        d1 = math.sqrt(_pick(capped, vv, 2.0 * m * mab))  # capped: |v|; uncapped: 1 / n
        n1 = _pick(capped, sin_half_cap, 1.0) / d1  # capped: k; uncapped: n
        k = _pick(capped, n1, math.sqrt(cc / vv) * n1)
        ch = _pick(capped, cos_half_cap, mab * n1)
        # the target: turned with the link (capped) or onto the goal's line (uncapped)
        w_cap = sin_half_cap / math.sqrt(cc)
        tc = qrot_scalar(cx * w_cap, cy * w_cap, cz * w_cap, cos_half_cap, ax, ay, az)
        t0 = _pick(capped, tc[0], bx * w_free)
        t1 = _pick(capped, tc[1], by * w_free)
        t2 = _pick(capped, tc[2], bz * w_free)
    nq = qmul_scalar(vx * k, vy * k, vz * k, ch, rx, ry, rz, rw)
    nt0, nt1, nt2 = lx - t0, ly - t1, lz - t2
    turn_t = turn & lazy
    c[o + (_LQ + 0) * LANES] = _pick(turn, nq[0], _kept(rx))
    c[o + (_LQ + 1) * LANES] = _pick(turn, nq[1], _kept(ry))
    c[o + (_LQ + 2) * LANES] = _pick(turn, nq[2], _kept(rz))
    c[o + (_LQ + 3) * LANES] = _pick(turn, nq[3], _kept(rw))
    reg[(_T + 0) * LANES + l] = _pick(turn_t, nt0, _kept(tx))
    reg[(_T + 1) * LANES + l] = _pick(turn_t, nt1, _kept(ty))
    reg[(_T + 2) * LANES + l] = _pick(turn_t, nt2, _kept(tz))
    reg[_MOV * LANES + l] = _pick(turn, 1.0, moved)
    reg[_TRN * LANES + l] = _pick(turn, 1.0, 0.0)


@njit(inline="always", **_NB)
def _lane_step(c, reg, s, r):
    """One CCD step on the link at chain row r in every lane: ``_step_axis`` and the world axis
    into the parent's frame, kept in the step buffer s, then ``_step_rest`` — the uncapped turn
    alone where no lane's turn is capped (the same values: each lane selects the uncapped one)."""
    base = r * _RS
    capped = False
    for l in range(LANES):
        o = base + l
        p = _parent(c, o)
        e = _step_axis(c, reg, o, l)
        v = qrot_scalar(-p[0], -p[1], -p[2], p[3], e[6], e[7], e[8])
        for i in range(12):
            s[i * LANES + l] = e[i]
        for i in range(3):
            s[(12 + i) * LANES + l] = v[i]
        ab = e[0] * e[3] + e[1] * e[4] + e[2] * e[5]
        capped = capped | (ab < c[o + _CAP * LANES] * math.sqrt(e[9] * e[10]))
    if capped:
        for l in range(LANES):
            _step_rest(c, reg, base + l, l, _step_saved(s, l), s[12 * LANES + l], s[13 * LANES + l],
                       s[14 * LANES + l], False)
    else:
        for l in range(LANES):
            _step_rest(c, reg, base + l, l, _step_saved(s, l), s[12 * LANES + l], s[13 * LANES + l],
                       s[14 * LANES + l], True)


@njit(inline="always", **_NB)
def _step_saved(s, l):
    """``_step_axis``'s 12-tuple of lane l back from the step buffer s."""
    return (s[l], s[LANES + l], s[2 * LANES + l], s[3 * LANES + l], s[4 * LANES + l], s[5 * LANES + l],
            s[6 * LANES + l], s[7 * LANES + l], s[8 * LANES + l], s[9 * LANES + l], s[10 * LANES + l],
            s[11 * LANES + l])


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
    ik_link_path, ik_link_lazy, ik_path_start = ik_in.ik_link_path, ik_in.ik_link_lazy, ik_in.ik_path_start
    ik_path_bone, ik_path_parent = ik_in.ik_path_bone, ik_in.ik_path_parent
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
    for j in range(l0, l1):
        o = (top + ik_link_path[j] - p0) * _RS + l
        for i in range(3):
            c[o + (_CAP + i) * LANES] = ik_link_cap[j, i]
        c[o + _LINK * LANES] = 1.0
        c[o + _LAZY * LANES] = 1.0 if ik_link_lazy[j] != 0 else 0.0
    reg[_ACT * LANES + l] = 1.0 if on else 0.0
    reg[_MOV * LANES + l] = 0.0


@njit(**_NB)
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
    ik_loop, ik_link_start, ik_link_bone = ik_in.ik_loop, ik_in.ik_link_start, ik_in.ik_link_bone
    ik_path_start, ik_path_bone = ik_in.ik_path_start, ik_in.ik_path_bone
    ik_after_start, ik_after_bone = ik_in.ik_after_start, ik_in.ik_after_bone
    ik_group_start, ik_group_solver, ik_group_bone = ik_in.ik_group_start, ik_in.ik_group_solver, ik_in.ik_group_bone
    ik_group_rows, ik_group_link_start, ik_group_link_row = ik_in.ik_group_rows, ik_in.ik_group_link_start, \
        ik_in.ik_group_link_row
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
    loops = 0
    for l in range(LANES):
        k = ik_group_solver[s0 + l % nl]
        reg[_LOOP * LANES + l] = ik_loop[k]
        loops = max(loops, ik_loop[k])
    for it in range(loops):
        alive = False
        for l in range(LANES):
            dx = reg[(_T + 0) * LANES + l] - reg[(_G + 0) * LANES + l]
            dy = reg[(_T + 1) * LANES + l] - reg[(_G + 1) * LANES + l]
            dz = reg[(_T + 2) * LANES + l] - reg[(_G + 2) * LANES + l]
            if dx * dx + dy * dy + dz * dz < _REACHED or it >= reg[_LOOP * LANES + l]:
                reg[_ACT * LANES + l] = 0.0
            reg[_MOV * LANES + l] = 0.0
            alive = alive or reg[_ACT * LANES + l] != 0.0
        if not alive:
            break
        for j in range(j0, j1):
            r = R - 1 - ik_group_link_row[j]
            _lane_step(c, reg, sb, r)
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
        moved = False
        for l in range(LANES):
            moved = moved or reg[_MOV * LANES + l] != 0.0
        if not moved:  # no lane turned: every later iteration repeats this one (free links only)
            break
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
