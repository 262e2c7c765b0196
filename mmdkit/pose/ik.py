"""MMD's CCD IK for one solver, step for step as nanoem and babylon-mmd do it, in float64.

In: solver index k, the rig's IK tables (target, loop count, unit angle, links nearest the
target first with their limit modes and Euler limits, the path of bones from the top link down
to the target, the bones below the chain), the IK bone b, and the pose state's per-bone arrays.
Out (in place): ik_q and local_q of the links, world_p/world_q of the path, then local and world
of every bone below the chain (appends included). What each step does and why: docs/pose.md, "IK".
Cost: a free link with the target below it and no later link below it (``Rig.ik_link_lazy``)
turns only the target with it; the path is refreshed once per iteration instead of per link.
The steps turn the links' local rotations; ik_q holds their pre-IK rotations meanwhile and gets
the IK rotation (local ⊗ inverse(pre-IK)) once the solve ends. While it iterates, the solver
works on a flat copy of its path (``BoneState.ik_chain``: fewer array strides and spills than the
(B, 3)/(B, 4) state arrays) with the target's position in registers, and the lazy free links
take their own straight-line step (``_ccd_free``). Solvers in a lane group (``Rig.ik_group``)
are solved by ``ik_lanes.solve_lanes`` instead, several at once, with the same result.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mmdkit.mathutil import put3, put4, qmul_scalar, qrot_scalar, qto_matrix3_scalar
from mmdkit.pose.fk import compose_world, local_offset, update_local, update_world

_NB = dict(cache=True, nogil=True, error_model="numpy")
# ik_link_mode values (rig.ik_link_modes): 0 free, 1 Euler limits, 2/3/4 hinge on X/Y/Z, 5 fixed
_FREE, _AXIS_X, _AXIS_Z, _FIXED = 0, 2, 4, 5
_REACHED = 1e-8  # squared distance: target on the IK bone, stop
_TINY_AXIS = 1e-8  # squared length of the rotation axis below which a link is left alone
_EULER_MAX = 88.0 * math.pi / 180.0  # the middle Euler angle is kept off the ±90° singularity


@njit(inline="always", **_NB)
def _limit(angle, lo, hi, reflect):
    """Clamp angle into [lo, hi]; with reflect, an overshoot is mirrored at the limit if it
    lands inside (the bend keeps its size but turns back into range)."""
    if angle < lo:
        d = 2.0 * lo - angle
        return d if reflect and d <= hi else lo
    if angle > hi:
        d = 2.0 * hi - angle
        return d if reflect and d >= lo else hi
    return angle


@njit(inline="always", **_NB)
def _axis_q(axis, angle):
    """Quaternion of a rotation by angle about the unit axis 0 (X), 1 (Y) or 2 (Z)."""
    s = math.sin(0.5 * angle)
    c = math.cos(0.5 * angle)
    if axis == 0:
        return s, 0.0, 0.0, c
    if axis == 1:
        return 0.0, s, 0.0, c
    return 0.0, 0.0, s, c


@njit(inline="always", **_NB)
def _euler_limited(x, y, z, w, lx, ly, lz, ux, uy, uz, reflect, inside):
    """Unit quaternion → Euler angles → limited → quaternion, in the order chosen by the limits.

    Order: Y·X·Z when X stays within ±90°, else Z·Y·X when Y does, else X·Z·Y (the middle angle
    is the one kept within ±88°). R = Ra(a)·Rb(b)·Rc(c) for order "abc" (column vectors).
    inside: the link's ``Rig.ik_link_inside`` row (10 scalars): where every angle lies strictly
    within its limits the limits change nothing and the rotation is returned as it is (w made
    positive, as the decomposition's product of half-angles within ±45° has it) without the
    trigonometry — the same rotation, within rounding (≤ ~6e-16 per component)."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = qto_matrix3_scalar(x, y, z, w)
    half = 0.5 * math.pi
    if -half < lx and ux < half:  # Y·X·Z
        a1, a2, a3 = 1, 0, 2
        s, x1, y1, x3, y3 = -r12, r22, r02, r11, r10
        l1, h1, l2, h2, l3, h3 = ly, uy, lx, ux, lz, uz
    elif -half < ly and uy < half:  # Z·Y·X
        a1, a2, a3 = 2, 1, 0
        s, x1, y1, x3, y3 = -r20, r00, r10, r22, r21
        l1, h1, l2, h2, l3, h3 = lz, uz, ly, uy, lx, ux
    else:  # X·Z·Y
        a1, a2, a3 = 0, 2, 1
        s, x1, y1, x3, y3 = -r01, r11, r21, r00, r02
        l1, h1, l2, h2, l3, h3 = lx, ux, lz, uz, ly, uy
    sl, sh, c1l, s1l, c1h, s1h, c3l, s3l, c3h, s3h = inside
    if (sl < s < sh and c1l * y1 - s1l * x1 > 0.0 and x1 * s1h - y1 * c1h > 0.0
            and c3l * y3 - s3l * x3 > 0.0 and x3 * s3h - y3 * c3h > 0.0 and w != 0.0):
        return (x, y, z, w) if w > 0.0 else (-x, -y, -z, -w)
    m = math.asin(min(1.0, max(-1.0, s)))
    m = min(_EULER_MAX, max(-_EULER_MAX, m))
    e1, e3 = math.atan2(y1, x1), math.atan2(y3, x3)
    q1 = _axis_q(a1, _limit(e1, l1, h1, reflect))
    q2 = _axis_q(a2, _limit(m, l2, h2, reflect))
    q3 = _axis_q(a3, _limit(e3, l3, h3, reflect))
    q = qmul_scalar(q1[0], q1[1], q1[2], q1[3], q2[0], q2[1], q2[2], q2[3])
    return qmul_scalar(q[0], q[1], q[2], q[3], q3[0], q3[1], q3[2], q3[3])


@njit(inline="always", **_NB)
def _hinge_limited(a, x, y, z, w, lx, ly, lz, ux, uy, uz, reflect):
    """``_euler_limited`` for a hinge on axis a (0 X, 1 Y, 2 Z; the other axes' limits are 0):
    the same order choice and the same expressions for that one angle (the other two limit to
    0, whose rotations are the identity), so the same quaternion without their trigonometry."""
    half = 0.5 * math.pi
    if -half < lx and ux < half:  # Y·X·Z
        if a == 0:
            m = math.asin(min(1.0, max(-1.0, -2.0 * (y * z - x * w))))
            return _axis_q(0, _limit(min(_EULER_MAX, max(-_EULER_MAX, m)), lx, ux, reflect))
        if a == 1:
            return _axis_q(1, _limit(math.atan2(2.0 * (x * z + y * w), 1.0 - 2.0 * (x * x + y * y)), ly, uy, reflect))
        return _axis_q(2, _limit(math.atan2(2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z)), lz, uz, reflect))
    if -half < ly and uy < half:  # Z·Y·X
        if a == 2:
            return _axis_q(2, _limit(math.atan2(2.0 * (x * y + z * w), 1.0 - 2.0 * (y * y + z * z)), lz, uz, reflect))
        if a == 1:
            m = math.asin(min(1.0, max(-1.0, -2.0 * (x * z - y * w))))
            return _axis_q(1, _limit(min(_EULER_MAX, max(-_EULER_MAX, m)), ly, uy, reflect))
        return _axis_q(0, _limit(math.atan2(2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)), lx, ux, reflect))
    if a == 0:  # X·Z·Y
        return _axis_q(0, _limit(math.atan2(2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + z * z)), lx, ux, reflect))
    if a == 2:
        m = math.asin(min(1.0, max(-1.0, -2.0 * (x * y - z * w))))
        return _axis_q(2, _limit(min(_EULER_MAX, max(-_EULER_MAX, m)), lz, uz, reflect))
    return _axis_q(1, _limit(math.atan2(2.0 * (x * z + y * w), 1.0 - 2.0 * (y * y + z * z)), ly, uy, reflect))


@njit(inline="always", **_NB)
def _inside_row(ik_link_inside, j):
    """Row j of ``Rig.ik_link_inside`` (L, 10) as a tuple."""
    t = ik_link_inside
    return (t[j, 0], t[j, 1], t[j, 2], t[j, 3], t[j, 4], t[j, 5], t[j, 6], t[j, 7], t[j, 8], t[j, 9])


@njit(inline="always", **_NB)
def _pre_ik(ox, oy, oz, ow, rx, ry, rz, rw):
    """A link's rotation before IK (animation, append): its local rotation r with its IK
    rotation o taken off, renormalised (re-deriving it every step must not let rounding grow)."""
    x, y, z, w = qmul_scalar(-ox, -oy, -oz, ow, rx, ry, rz, rw)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if n < 1e-12:
        return 0.0, 0.0, 0.0, 1.0
    return x / n, y / n, z / n, w / n


@njit(inline="always", **_NB)
def take_off_ik(l0, l1, ik_link_bone, ik_q, local_q):
    """A solver's links l0..l1-1 back to their rotation without its IK (another solver may have
    turned one since): local_q = the pre-IK rotation, which ik_q holds until the solve ends. A
    bone listed twice reads the identity the first pass leaves in ik_q (the second copies)."""
    for j in range(l0, l1):
        link = ik_link_bone[j]
        ox, oy, oz, ow = ik_q[link, 0], ik_q[link, 1], ik_q[link, 2], ik_q[link, 3]
        rx, ry, rz, rw = local_q[link, 0], local_q[link, 1], local_q[link, 2], local_q[link, 3]
        r = _pre_ik(ox, oy, oz, ow, rx, ry, rz, rw)
        put4(local_q, link, r[0], r[1], r[2], r[3])
        put4(ik_q, link, 0.0, 0.0, 0.0, 1.0)
    for j in range(l0, l1):
        link = ik_link_bone[j]
        put4(ik_q, link, local_q[link, 0], local_q[link, 1], local_q[link, 2], local_q[link, 3])


@njit(inline="always", **_NB)
def put_ik_rotation(link, ik_q, local_q):
    """At the end of a solve: ik_q[link] (the pre-IK rotation until now) = the IK rotation, local ⊗
    inverse(pre-IK); the identity where the link did not turn."""
    ex, ey, ez, ew = ik_q[link, 0], ik_q[link, 1], ik_q[link, 2], ik_q[link, 3]
    rx, ry, rz, rw = local_q[link, 0], local_q[link, 1], local_q[link, 2], local_q[link, 3]
    q = qmul_scalar(rx, ry, rz, rw, -ex, -ey, -ez, ew)
    if rx == ex and ry == ey and rz == ez and rw == ew:
        q = (0.0, 0.0, 0.0, 1.0)
    put4(ik_q, link, q[0], q[1], q[2], q[3])


@njit(inline="always", **_NB)
def _listed_before(j, l0, ik_link_bone):
    """True when link j's bone is also link l0..j-1 of its solver (a file listing a bone twice)."""
    for i in range(l0, j):
        if ik_link_bone[i] == ik_link_bone[j]:
            return True
    return False


# The chain scratch (``PoseState.ik_chain``): _ROW float64 per path row, the solver's path bones
# mirrored while it runs (a flat contiguous array: no per-access stride and no 2-D index maths).
IK_CHAIN_ROW = _ROW = 24
# columns: world p, world q, local q, local offset (fk.local_offset), an outside parent's world p, q
_WP, _WQ, _LQ, _OFF, _PP, _PQ = 0, 3, 7, 11, 16, 19
_ROOT = -2  # ik_path_parent of a root (-1: the parent is outside the path, its world copied to _PP/_PQ)


@njit(inline="always", **_NB)
def _chain_refresh(start, stop, pp, chain):
    """World p/q of chain rows start..stop-1 from their local rotation and offset and their parent's
    world (an earlier row, or the row's copy of an outside parent), as fk.update_world computes it;
    pp: the rows' ik_path_parent entries from the path start."""
    for r in range(start, stop):
        o = np.uint64(r * _ROW)
        pr = pp[r]
        src = np.uint64(pr * _ROW if pr >= 0 else r * _ROW + _PP - _WP)
        px, py, pz, pw = chain[src + _WQ], chain[src + _WQ + 1], chain[src + _WQ + 2], chain[src + _WQ + 3]
        ox, oy, oz = chain[src], chain[src + 1], chain[src + 2]
        vx, vy, vz = chain[o + _OFF], chain[o + _OFF + 1], chain[o + _OFF + 2]
        lx, ly, lz, lw = chain[o + _LQ], chain[o + _LQ + 1], chain[o + _LQ + 2], chain[o + _LQ + 3]
        w = compose_world(pr != _ROOT, px, py, pz, pw, ox, oy, oz, vx, vy, vz, lx, ly, lz, lw)
        chain[o + _WP], chain[o + _WP + 1], chain[o + _WP + 2] = w[0], w[1], w[2]
        chain[o + _WQ], chain[o + _WQ + 1], chain[o + _WQ + 2], chain[o + _WQ + 3] = w[3], w[4], w[5], w[6]


@njit(inline="always", **_NB)
def _axes(gx, gy, gz, lx, ly, lz, tx, ty, tz):
    """target → link a, goal → link b, the world axis c = a × b (target → goal) and the squared
    lengths aa, bb, cc (scalars)."""
    ax, ay, az = lx - tx, ly - ty, lz - tz
    bx, by, bz = lx - gx, ly - gy, lz - gz
    cx, cy, cz = ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
    return (ax, ay, az, bx, by, bz, cx, cy, cz, ax * ax + ay * ay + az * az, bx * bx + by * by + bz * bz,
            cx * cx + cy * cy + cz * cz)


@njit(inline="always", **_NB)
def _half_angle(aa, bb, ab, cc, vv, cos_cap, sin_half_cap, cos_half_cap):
    """angle = min(acos(t·g), cap) as its half-angle sine sh and cosine ch, and the scale k that
    makes the axis v (|v|² = vv) the turn's vector part: uncapped, the unit quaternion turning t
    onto g is (t × g, 1 + t·g) normalised; here in a, b's lengths (m = |a||b|). Returns
    (capped, sh, ch, k)."""
    m = math.sqrt(aa * bb)
    if ab < cos_cap * m:  # capped: the cap's cosine, sine and cosine of its half (Rig.ik_link_cap)
        return True, sin_half_cap, cos_half_cap, sin_half_cap / math.sqrt(vv)
    n = 1.0 / math.sqrt(2.0 * m * (m + ab))
    return False, math.sqrt(cc) * n, (m + ab) * n, math.sqrt(cc / vv) * n


@njit(inline="always", **_NB)
def _ccd_free(gx, gy, gz, px, py, pz, pw, lx, ly, lz, tx, ty, tz, rx, ry, rz, rw, cos_cap, sin_half_cap, cos_half_cap):
    """One CCD step on a free link with the target below it and no later link below it (lazy),
    on scalars: the goal g, the parent's world rotation p (the identity for a root), the link's
    world position l and local rotation r, the target's world position t, the step cap's cosine
    and half-angle sine/cosine. The target turns about the link by the same world rotation (the
    bones in between wait for the iteration's refresh). Returns (turned 0 or 1, the link's new
    local rotation (4), the target's new world position (3))."""
    ax, ay, az, bx, by, bz, cx, cy, cz, aa, bb, cc = _axes(gx, gy, gz, lx, ly, lz, tx, ty, tz)
    if cc <= _TINY_AXIS * (aa * bb):  # |t × g|² of the unit directions below _TINY_AXIS
        return 0, rx, ry, rz, rw, tx, ty, tz
    vx, vy, vz = qrot_scalar(-px, -py, -pz, pw, cx, cy, cz)  # world axis → parent frame
    vv = vx * vx + vy * vy + vz * vz  # made unit by k (a keyed |q| may be off 1: not |c|)
    capped, sh, ch, k = _half_angle(aa, bb, ax * bx + ay * by + az * bz, cc, vv, cos_cap, sin_half_cap, cos_half_cap)
    r = qmul_scalar(vx * k, vy * k, vz * k, ch, rx, ry, rz, rw)  # the turn onto the link's local rotation
    if capped:  # the target turns with the link; uncapped, onto the goal's line
        w = sh / math.sqrt(cc)
        t = qrot_scalar(cx * w, cy * w, cz * w, ch, ax, ay, az)
    else:
        w = math.sqrt(aa / bb)
        t = bx * w, by * w, bz * w
    return 1, r[0], r[1], r[2], r[3], lx - t[0], ly - t[1], lz - t[2]


@njit(inline="always", **_NB)
def _ccd_step(use_axis, mode, gx, gy, gz, px, py, pz, pw, lx, ly, lz, tx, ty, tz, rx, ry, rz, rw, cos_cap,
              sin_half_cap, cos_half_cap, lo0, lo1, lo2, up0, up1, up2, inside):
    """One CCD step on any other link (limited, a hinge, or free but not lazy), on scalars as
    ``_ccd_free`` takes them plus the Euler limits and the link's ``ik_link_inside`` row. Returns
    (turned, the link's new local rotation (4)): turned 0 when the link stays put, 2 when it turned
    and the path below it needs a refresh."""
    ax, ay, az, bx, by, bz, cx, cy, cz, aa, bb, cc = _axes(gx, gy, gz, lx, ly, lz, tx, ty, tz)
    if cc <= _TINY_AXIS * (aa * bb):
        return 0, rx, ry, rz, rw
    if use_axis and _AXIS_X <= mode <= _AXIS_Z:
        # hinge: the link's one axis, pointing the way the world axis turns (parent frame)
        a = mode - _AXIS_X
        pa = qrot_scalar(px, py, pz, pw, 1.0 if a == 0 else 0.0, 1.0 if a == 1 else 0.0, 1.0 if a == 2 else 0.0)
        sign = 1.0 if cx * pa[0] + cy * pa[1] + cz * pa[2] >= 0.0 else -1.0
        vx, vy, vz = (sign if a == 0 else 0.0), (sign if a == 1 else 0.0), (sign if a == 2 else 0.0)
        vv = 1.0
    else:
        vx, vy, vz = qrot_scalar(-px, -py, -pz, pw, cx, cy, cz)
        vv = vx * vx + vy * vy + vz * vz
    _, _, ch, k = _half_angle(aa, bb, ax * bx + ay * by + az * bz, cc, vv, cos_cap, sin_half_cap, cos_half_cap)
    r = qmul_scalar(vx * k, vy * k, vz * k, ch, rx, ry, rz, rw)
    if mode != _FREE:  # limits apply to the whole local rotation: the turn ⊗ IK so far ⊗ pre-IK
        if _AXIS_X <= mode <= _AXIS_Z:
            e = _hinge_limited(mode - _AXIS_X, r[0], r[1], r[2], r[3], lo0, lo1, lo2, up0, up1, up2, use_axis)
        else:
            e = _euler_limited(r[0], r[1], r[2], r[3], lo0, lo1, lo2, up0, up1, up2, use_axis, inside)
        if e[0] == rx and e[1] == ry and e[2] == rz and e[3] == rw:
            return 0, rx, ry, rz, rw  # converged to the last bit: the state is exactly as before
        r = e
    return 2, r[0], r[1], r[2], r[3]


@njit(_nrt=False, **_NB)  # no reference counting (bones._NB)
def solve_ik(
    k, ik_bone,
    # Model
    bone_in, ik_in,
    # Data in/out
    bone_state_inout,
):
    """CCD for solver k, pulling its target to bone ik_bone. Scalars only (no row views, no
    allocation): this runs for every solver of every frame. The path bones are mirrored into the
    chain scratch while the solver iterates and written back at the end.

    bone_in: ``BoneIn``; ik_in: ``IkIn``; bone_state_inout: ``BoneState`` — writes bone_ik_q /
    bone_local_q of the links, the world of the path, then local and world of every bone below the
    chain (appends included: a bone appended from a link sees its IK turn), and ik_chain."""
    m, bs = bone_in, bone_state_inout
    parent, position = m.bone_parent, m.bone_position
    ik_link_start, ik_link_bone, ik_link_mode = ik_in.ik_link_start, ik_in.ik_link_bone, ik_in.ik_link_mode
    ik_link_lower, ik_link_upper, ik_link_cap = ik_in.ik_link_lower, ik_in.ik_link_upper, ik_in.ik_link_cap
    ik_link_path, ik_link_lazy, ik_path_start = ik_in.ik_link_path, ik_in.ik_link_lazy, ik_in.ik_path_start
    ik_path_bone, ik_after_start, ik_after_bone = ik_in.ik_path_bone, ik_in.ik_after_start, ik_in.ik_after_bone
    ik_path_parent, ik_target_row, ik_loop = ik_in.ik_path_parent, ik_in.ik_target_row, ik_in.ik_loop
    ik_link_inside = ik_in.ik_link_inside
    ik_q, local_t, local_q, world_p, world_q, chain = bs.bone_ik_q, bs.bone_local_t, bs.bone_local_q, \
        bs.bone_world_p, bs.bone_world_q, bs.ik_chain
    l0, l1 = ik_link_start[k], ik_link_start[k + 1]
    p0, p1 = ik_path_start[k], ik_path_start[k + 1]
    n = p1 - p0
    pp = ik_path_parent[p0:p1]
    gx, gy, gz = world_p[ik_bone, 0], world_p[ik_bone, 1], world_p[ik_bone, 2]
    # start from the pose without IK on this chain (another solver may have turned a link); the
    # steps turn local_q, and ik_q holds the pre-IK rotation until the end of the solve
    take_off_ik(l0, l1, ik_link_bone, ik_q, local_q)
    for r in range(n):  # the path into the chain: local rotation and offset, outside parent
        b = ik_path_bone[p0 + r]
        o = r * _ROW
        q = parent[b]
        s = q if q >= 0 else b
        chain[o + _LQ], chain[o + _LQ + 1], chain[o + _LQ + 2], chain[o + _LQ + 3] = (
            local_q[b, 0], local_q[b, 1], local_q[b, 2], local_q[b, 3])
        v = local_offset(np.uint64(b), parent, position, local_t)
        chain[o + _OFF], chain[o + _OFF + 1], chain[o + _OFF + 2] = v[0], v[1], v[2]
        chain[o + _PP], chain[o + _PP + 1], chain[o + _PP + 2] = world_p[s, 0], world_p[s, 1], world_p[s, 2]
        chain[o + _PQ], chain[o + _PQ + 1], chain[o + _PQ + 2], chain[o + _PQ + 3] = (
            world_q[s, 0], world_q[s, 1], world_q[s, 2], world_q[s, 3])
    _chain_refresh(0, n, pp, chain)
    tr = (ik_target_row[k] - p0) * _ROW  # the target's row; its position also lives in tx, ty, tz
    tx, ty, tz = chain[tr], chain[tr + 1], chain[tr + 2]
    loops = ik_loop[k]
    it = 0
    while it < loops:
        d2 = (tx - gx) ** 2 + (ty - gy) ** 2 + (tz - gz) ** 2
        if d2 < _REACHED:
            break
        use_axis = it < loops // 2
        moved = False
        stale = n  # rows from here on wait for the refresh at the iteration's end
        for j in range(l0, l1):
            mode = ik_link_mode[j]
            if mode == _FIXED:
                continue
            row = ik_link_path[j] - p0
            o = row * _ROW
            pr = pp[row]
            src = pr * _ROW + _WQ if pr >= 0 else o + _PQ
            px, py, pz, pw = chain[src], chain[src + 1], chain[src + 2], chain[src + 3]
            if pr == _ROOT:
                px, py, pz, pw = 0.0, 0.0, 0.0, 1.0
            lx, ly, lz = chain[o], chain[o + 1], chain[o + 2]
            rx, ry, rz, rw = chain[o + _LQ], chain[o + _LQ + 1], chain[o + _LQ + 2], chain[o + _LQ + 3]
            c0, c1, c2 = ik_link_cap[j, 0], ik_link_cap[j, 1], ik_link_cap[j, 2]
            if mode == _FREE and ik_link_lazy[j] != 0:
                st = _ccd_free(gx, gy, gz, px, py, pz, pw, lx, ly, lz, tx, ty, tz, rx, ry, rz, rw, c0, c1, c2)
            else:
                e = _ccd_step(use_axis, mode, gx, gy, gz, px, py, pz, pw, lx, ly, lz, tx, ty, tz, rx, ry, rz, rw, c0,
                              c1, c2, ik_link_lower[j, 0], ik_link_lower[j, 1], ik_link_lower[j, 2],
                              ik_link_upper[j, 0], ik_link_upper[j, 1], ik_link_upper[j, 2],
                              _inside_row(ik_link_inside, j))
                st = e[0], e[1], e[2], e[3], e[4], tx, ty, tz
            turned = st[0]
            if turned != 0:
                moved = True
                chain[o + _LQ], chain[o + _LQ + 1], chain[o + _LQ + 2], chain[o + _LQ + 3] = st[1], st[2], st[3], st[4]
            if turned == 1:
                tx, ty, tz = st[5], st[6], st[7]
                chain[tr], chain[tr + 1], chain[tr + 2] = tx, ty, tz
                stale = min(stale, row)
            elif turned == 2:
                _chain_refresh(row, n, pp, chain)
                tx, ty, tz = chain[tr], chain[tr + 1], chain[tr + 2]
                if row <= stale:
                    stale = n
        _chain_refresh(stale, n, pp, chain)
        tx, ty, tz = chain[tr], chain[tr + 1], chain[tr + 2]
        it += 1
        if not moved:  # no link turned: every later iteration of this half computes the same
            if it > loops // 2:
                break
            it = loops // 2  # the second half (hinges on a free axis, limits clamp) may still turn
    for r in range(n):  # the chain back: local rotations and world transforms of the path
        b = ik_path_bone[p0 + r]
        o = r * _ROW
        put4(local_q, b, chain[o + _LQ], chain[o + _LQ + 1], chain[o + _LQ + 2], chain[o + _LQ + 3])
        put3(world_p, b, chain[o + _WP], chain[o + _WP + 1], chain[o + _WP + 2])
        put4(world_q, b, chain[o + _WQ], chain[o + _WQ + 1], chain[o + _WQ + 2], chain[o + _WQ + 3])
    for j in range(l0, l1):  # IK rotation = local ⊗ inverse(pre-IK); the identity where nothing turned
        link = ik_link_bone[j]
        if _listed_before(j, l0, ik_link_bone):
            continue
        put_ik_rotation(link, ik_q, local_q)
    for jj in range(ik_after_start[k], ik_after_start[k + 1]):
        b = ik_after_bone[jj]
        update_local(b, m.bone_flags, m.bone_append_parent, m.bone_append_ratio, m.bone_fixed_axis, bs.bone_anim_t,
                     bs.bone_anim_q, ik_q, bs.bone_append_t, bs.bone_append_q, local_t, local_q, world_q)
        update_world(b, parent, position, local_t, local_q, world_p, world_q)
