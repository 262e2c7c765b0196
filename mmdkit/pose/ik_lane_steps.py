"""The chain rows and CCD steps of ``ik_lanes`` (several structurally equal IK solvers, one SIMD lane each).

In: the lane solver's stack buffers — chain rows ``c``, per-lane registers ``reg``, a step
buffer ``s`` (layout below) — and a chain row r. Out (in place): the row's local rotation in
every lane, the lanes' targets and turned flags. Each lane runs the scalar solver's step
(``ik._ccd_free``, ``ik._ccd_step``) operation for operation: the same bits. Free links: one
straight-line loop over the lanes (``_lane_step``). Limited links (Euler limits or a hinge, the
same mode in every lane, the limits per lane): the turn in one straight-line loop, then the limits
lane by lane with the scalar solver's functions (libm trigonometry) (``_lane_step_limited``).
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from mmdkit.mathutil import qmul_scalar, qrot_scalar
from mmdkit.pose.ik import _AXIS_X, _AXIS_Z, _TINY_AXIS, _axes, _euler_limited, _hinge_limited
from mmdkit.pose.ik_groups import IK_LANE_ROWS, IK_LANES

_NB = dict(cache=True, nogil=True, error_model="numpy")

LANES = IK_LANES  # solvers per group (two AVX2 float64 vectors)
MAX_ROWS = IK_LANE_ROWS  # chain rows
# fields of a chain row (each LANES wide): world p, world q, local q, local offset (fk.local_offset),
# the parent's world p, q, 1.0 where the parent is outside the path (not the row above), the step
# cap's cos(c), sin(c/2), cos(c/2) (Rig.ik_link_cap), 1.0 where the row is a link of the lane's
# solver, 1.0 where that link turns the target (lazy: the target hangs below it), the link's Euler
# limits (lower, upper; ik_link_lower/upper) and its ik_link_inside row
_WP, _WQ, _LQ, _OFF, _PP, _PQ, _OUT, _CAP, _LINK, _LAZY, _LO, _UP, _IN = 0, 3, 7, 11, 14, 17, 21, 22, 25, 26, 27, 30, 33
FIELDS = 43
_RS = FIELDS * LANES  # one row, in float64
# registers (each LANES wide): goal, target position, active (1.0) / frozen, turned this iteration,
# turned in the last step, the lane's loop count (members may differ: a lane freezes after its own),
# its iteration, the first iteration of its second half (loops // 2), where an iteration that turned
# nothing sends it (0 for free links alone: their halves are the same steps), 1.0 in the first half
_G, _T, _ACT, _MOV, _TRN, _LOOP, _IT, _AXEND, _HALF, _AX = 0, 3, 6, 7, 8, 9, 10, 11, 12, 13
_REGS = 14


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


@njit(inline="always", **_NB)
def _parent(c, o):
    """The parent's world rotation (4) and position (3) of the row at o (row base + lane)."""
    return (c[o + (_PQ + 0) * LANES], c[o + (_PQ + 1) * LANES], c[o + (_PQ + 2) * LANES], c[o + (_PQ + 3) * LANES],
            c[o + (_PP + 0) * LANES], c[o + (_PP + 1) * LANES], c[o + (_PP + 2) * LANES])



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
def _lane_step_limited(c, reg, s, r, mode):
    """One CCD step on the limited link at chain row r in every lane (``ik._ccd_step``; mode 1 Euler
    limits, 2/3/4 a hinge on X/Y/Z, the same in every lane; the limits per lane): the turn in one
    straight-line loop over the lanes (a hinge turns about its own axis in a lane's first half,
    selected), kept in the step buffer s; then, lane by lane where the link turns, the limits
    (``ik._hinge_limited``/``ik._euler_limited``, the scalar solver's own code). A lane whose limited
    rotation is its old one to the bit has not turned (``ik._ccd_step``'s converged case)."""
    base = r * _RS
    a = mode - _AXIS_X
    hinge = _AXIS_X <= mode <= _AXIS_Z
    e0, e1, e2 = _pick(a == 0, 1.0, 0.0), _pick(a == 1, 1.0, 0.0), _pick(a == 2, 1.0, 0.0)
    for l in range(LANES):
        o = base + l
        p = _parent(c, o)
        ax, ay, az, bx, by, bz, cx, cy, cz, aa, bb, cc = _step_axis(c, reg, o, l)
        v = qrot_scalar(-p[0], -p[1], -p[2], p[3], cx, cy, cz)
        pa = qrot_scalar(p[0], p[1], p[2], p[3], e0, e1, e2)  # a hinge's axis, world
        sign = _pick(cx * pa[0] + cy * pa[1] + cz * pa[2] >= 0.0, 1.0, -1.0)
        on_axis = hinge & (reg[_AX * LANES + l] != 0.0)
        vx = _pick(on_axis, _pick(a == 0, sign, 0.0), v[0])
        vy = _pick(on_axis, _pick(a == 1, sign, 0.0), v[1])
        vz = _pick(on_axis, _pick(a == 2, sign, 0.0), v[2])
        vv = _pick(on_axis, 1.0, v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        # ik._half_angle, both branches (the square root and divide shared, operands selected)
        ab = ax * bx + ay * by + az * bz
        m = math.sqrt(aa * bb)
        mab = m + ab
        capped = ab < c[o + _CAP * LANES] * m
        d1 = math.sqrt(_pick(capped, vv, 2.0 * m * mab))  # capped: |v|; uncapped: 1 / n
        n1 = _pick(capped, c[o + (_CAP + 1) * LANES], 1.0) / d1  # capped: k; uncapped: n
        k = _pick(capped, n1, math.sqrt(cc / vv) * n1)
        ch = _pick(capped, c[o + (_CAP + 2) * LANES], mab * n1)
        nq = qmul_scalar(vx * k, vy * k, vz * k, ch, c[o + _LQ * LANES], c[o + (_LQ + 1) * LANES],
                         c[o + (_LQ + 2) * LANES], c[o + (_LQ + 3) * LANES])
        turn = (reg[_ACT * LANES + l] != 0.0) & (c[o + _LINK * LANES] != 0.0) & (cc > _TINY_AXIS * (aa * bb))
        for i in range(4):
            s[i * LANES + l] = nq[i]
        s[4 * LANES + l] = _pick(turn, 1.0, 0.0)
    for l in range(LANES):
        o = base + l
        reg[_TRN * LANES + l] = 0.0
        if s[4 * LANES + l] == 0.0:
            continue
        q0, q1, q2, q3 = s[l], s[LANES + l], s[2 * LANES + l], s[3 * LANES + l]
        lo0, lo1, lo2 = c[o + _LO * LANES], c[o + (_LO + 1) * LANES], c[o + (_LO + 2) * LANES]
        up0, up1, up2 = c[o + _UP * LANES], c[o + (_UP + 1) * LANES], c[o + (_UP + 2) * LANES]
        reflect = reg[_AX * LANES + l] != 0.0
        if hinge:
            e = _hinge_limited(a, q0, q1, q2, q3, lo0, lo1, lo2, up0, up1, up2, reflect)
        else:
            e = _euler_limited(q0, q1, q2, q3, lo0, lo1, lo2, up0, up1, up2, reflect, (
                c[o + _IN * LANES], c[o + (_IN + 1) * LANES], c[o + (_IN + 2) * LANES], c[o + (_IN + 3) * LANES],
                c[o + (_IN + 4) * LANES], c[o + (_IN + 5) * LANES], c[o + (_IN + 6) * LANES],
                c[o + (_IN + 7) * LANES], c[o + (_IN + 8) * LANES], c[o + (_IN + 9) * LANES]))
        rx, ry, rz, rw = c[o + _LQ * LANES], c[o + (_LQ + 1) * LANES], c[o + (_LQ + 2) * LANES], \
            c[o + (_LQ + 3) * LANES]
        if e[0] == rx and e[1] == ry and e[2] == rz and e[3] == rw:
            continue  # converged to the last bit: the state is exactly as before
        for i in range(4):
            c[o + (_LQ + i) * LANES] = e[i]
        reg[_TRN * LANES + l] = 1.0
        reg[_MOV * LANES + l] = 1.0
