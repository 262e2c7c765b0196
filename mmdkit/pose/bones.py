"""Bone stages of one frame: append (付与), fixed axis, FK and MMD-style CCD IK, in float64.

In: a ``Rig``'s arrays, per-bone animated translation/rotation (B,3)/(B,4) float64 (keys +
bone morphs), IK enabled flags (K,) uint8. Out (in place): local and world rotation/position
per bone (float64), then ``write_matrices`` → bone_world / bone_skin (B,4,4) float32.
Composition: local rotation = ik ⊗ append ⊗ animated (animated applied first); world =
parent ∘ (rest offset + local translation, local rotation). Append 'local' flag: the source's
world-space rotation relative to its parent chain is used (documented choice: like nanoem).
"""

from __future__ import annotations

import math

from numba import njit

from mmdkit.mathutil import (put3, put4, qfrom_euler_xyz_scalar, qfrom_matrix3_scalar, qmul_scalar, qrot_scalar,
                             qscale_angle_scalar, qto_euler_xyz_scalar)
from mmdkit.model import model as M

_NB = dict(cache=True, nogil=True, error_model="numpy")
_APP_ROT = M.BONE_APPEND_ROTATION
_APP_TRS = M.BONE_APPEND_TRANSLATION
_APP_LOCAL = M.BONE_APPEND_LOCAL
_FIXED = M.BONE_FIXED_AXIS


@njit(inline="always", **_NB)
def _update_local(b, flags, append_parent, append_ratio, fixed_axis, anim_t, anim_q, ik_q,
                  app_t, app_q, local_t, local_q, world_q):
    # Every array read happens up front and unconditionally, every write at the end: numba can
    # then drop the reference counting of the inlined array arguments (otherwise ~24 atomic
    # operations per bone, more than the arithmetic). s is the append source (b itself if none).
    f = flags[b]
    ap = append_parent[b]
    s = ap if ap >= 0 else b
    f_s = flags[s]
    ap_s = append_parent[s]
    ratio = append_ratio[b]
    f0, f1, f2 = fixed_axis[b, 0], fixed_axis[b, 1], fixed_axis[b, 2]
    qx, qy, qz, qw = anim_q[b, 0], anim_q[b, 1], anim_q[b, 2], anim_q[b, 3]
    ik = (ik_q[b, 0], ik_q[b, 1], ik_q[b, 2], ik_q[b, 3])
    anim = (anim_t[b, 0], anim_t[b, 1], anim_t[b, 2])
    world_s = (world_q[s, 0], world_q[s, 1], world_q[s, 2], world_q[s, 3])
    app_s = (app_q[s, 0], app_q[s, 1], app_q[s, 2], app_q[s, 3])
    rot_s = qmul_scalar(ik_q[s, 0], ik_q[s, 1], ik_q[s, 2], ik_q[s, 3],
                        anim_q[s, 0], anim_q[s, 1], anim_q[s, 2], anim_q[s, 3])
    app_t_s = (app_t[s, 0], app_t[s, 1], app_t[s, 2])
    anim_t_s = (anim_t[s, 0], anim_t[s, 1], anim_t[s, 2])

    if f & _FIXED and (f0 != 0.0 or f1 != 0.0 or f2 != 0.0):
        d = qx * f0 + qy * f1 + qz * f2
        qx, qy, qz = f0 * d, f1 * d, f2 * d
        n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
        if n > 1e-12:
            qx, qy, qz, qw = qx / n, qy / n, qz / n, qw / n
        else:
            qx, qy, qz, qw = 0.0, 0.0, 0.0, 1.0
    ax, ay, az, aw = 0.0, 0.0, 0.0, 1.0
    tx, ty, tz = 0.0, 0.0, 0.0
    if ap >= 0:
        if f & _APP_ROT:
            if f & _APP_LOCAL:
                src = world_s
            elif (f_s & _APP_ROT) and ap_s >= 0:
                src = app_s
            else:
                src = rot_s
            ax, ay, az, aw = qscale_angle_scalar(src[0], src[1], src[2], src[3], ratio)
        if f & _APP_TRS:
            src_t = app_t_s if (f_s & _APP_TRS) and ap_s >= 0 else anim_t_s
            tx, ty, tz = src_t[0] * ratio, src_t[1] * ratio, src_t[2] * ratio
    t = qmul_scalar(ax, ay, az, aw, qx, qy, qz, qw)
    r = qmul_scalar(ik[0], ik[1], ik[2], ik[3], t[0], t[1], t[2], t[3])

    put3(app_t, b, tx, ty, tz)
    put4(app_q, b, ax, ay, az, aw)
    put4(local_q, b, r[0], r[1], r[2], r[3])
    put3(local_t, b, anim[0] + tx, anim[1] + ty, anim[2] + tz)


@njit(inline="always", **_NB)
def _update_world(b, parent, position, local_t, local_q, world_p, world_q):
    # straight-line like _update_local (a root reads itself, then uses the identity instead)
    p = parent[b]
    s = p if p >= 0 else b
    px, py, pz, pw = world_q[s, 0], world_q[s, 1], world_q[s, 2], world_q[s, 3]
    ox, oy, oz = world_p[s, 0], world_p[s, 1], world_p[s, 2]
    rx, ry, rz = position[s, 0], position[s, 1], position[s, 2]
    lx, ly, lz, lw = local_q[b, 0], local_q[b, 1], local_q[b, 2], local_q[b, 3]
    if p < 0:
        rx, ry, rz = 0.0, 0.0, 0.0
    vx = position[b, 0] - rx + local_t[b, 0]
    vy = position[b, 1] - ry + local_t[b, 1]
    vz = position[b, 2] - rz + local_t[b, 2]
    if p >= 0:
        r = qrot_scalar(px, py, pz, pw, vx, vy, vz)
        vx, vy, vz = ox + r[0], oy + r[1], oz + r[2]
        lx, ly, lz, lw = qmul_scalar(px, py, pz, pw, lx, ly, lz, lw)
    put3(world_p, b, vx, vy, vz)
    put4(world_q, b, lx, ly, lz, lw)


@njit(**_NB)
def _solve_ik(k, parent, position, ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone,
              ik_link_mode, ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone,
              ik_after_start, ik_after_bone, ik_bone_of, anim_q, ik_q, app_q, local_t, local_q,
              world_p, world_q):
    """CCD for solver k. Scalars only (no row views, no allocation): this loop runs ~100×/frame."""
    gx, gy, gz = world_p[ik_bone_of, 0], world_p[ik_bone_of, 1], world_p[ik_bone_of, 2]
    target = ik_target[k]
    l0 = ik_link_start[k]
    l1 = ik_link_start[k + 1]
    p0 = ik_path_start[k]
    p1 = ik_path_start[k + 1]
    unit = ik_limit[k]
    loops = ik_loop[k]
    half = loops // 2
    prev = 1e30
    for it in range(loops):
        d2 = (world_p[target, 0] - gx) ** 2 + (world_p[target, 1] - gy) ** 2 + (world_p[target, 2] - gz) ** 2
        if d2 < 1e-10 or (it > half and abs(prev - d2) < 1e-12):
            break  # reached, or converged (unreachable goal) after the bend-forcing half
        prev = d2
        for li in range(l1 - l0):
            j = l0 + li
            link = ik_link_bone[j]
            tx, ty, tz = world_p[target, 0], world_p[target, 1], world_p[target, 2]
            if (tx - gx) ** 2 + (ty - gy) ** 2 + (tz - gz) ** 2 < 1e-10:
                break
            # target and goal directions in the link's frame
            wx, wy, wz, ww = world_q[link, 0], world_q[link, 1], world_q[link, 2], world_q[link, 3]
            lx, ly, lz = world_p[link, 0], world_p[link, 1], world_p[link, 2]
            a_ = qrot_scalar(-wx, -wy, -wz, ww, tx - lx, ty - ly, tz - lz)
            b_ = qrot_scalar(-wx, -wy, -wz, ww, gx - lx, gy - ly, gz - lz)
            nt = math.sqrt(a_[0] ** 2 + a_[1] ** 2 + a_[2] ** 2)
            ng = math.sqrt(b_[0] ** 2 + b_[1] ** 2 + b_[2] ** 2)
            if nt < 1e-9 or ng < 1e-9:
                continue
            t0, t1, t2 = a_[0] / nt, a_[1] / nt, a_[2] / nt
            g0, g1, g2 = b_[0] / ng, b_[1] / ng, b_[2] / ng
            cap = unit * (li + 1)
            mode = ik_link_mode[j]
            rest = qmul_scalar(app_q[link, 0], app_q[link, 1], app_q[link, 2], app_q[link, 3],
                               anim_q[link, 0], anim_q[link, 1], anim_q[link, 2], anim_q[link, 3])
            if mode >= 2:
                a = mode - 2
                # hinge: signed angle between the projections on the plane ⟂ axis a
                if a == 0:
                    t0 = 0.0
                    g0 = 0.0
                elif a == 1:
                    t1 = 0.0
                    g1 = 0.0
                else:
                    t2 = 0.0
                    g2 = 0.0
                pt = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
                pg = math.sqrt(g0 * g0 + g1 * g1 + g2 * g2)
                if pt < 1e-9 or pg < 1e-9:
                    continue
                if a == 0:
                    cr = t1 * g2 - t2 * g1
                elif a == 1:
                    cr = t2 * g0 - t0 * g2
                else:
                    cr = t0 * g1 - t1 * g0
                dot = (t0 * g0 + t1 * g1 + t2 * g2) / (pt * pg)
                delta = math.atan2(cr / (pt * pg), dot)
                if delta > cap:
                    delta = cap
                elif delta < -cap:
                    delta = -cap
                theta = 2.0 * math.atan2(local_q[link, a], local_q[link, 3])
                if theta > math.pi:
                    theta -= 2.0 * math.pi
                elif theta < -math.pi:
                    theta += 2.0 * math.pi
                th = theta + delta
                lo = ik_link_lower[j, a]
                hi = ik_link_upper[j, a]
                if it < half:
                    # first half: force the bend to the side the limits favour (knees bend
                    # forward even when the range allows a little backward), then reflect
                    # out-of-range angles back in
                    mid = lo + hi
                    if (mid < 0.0 and th > 0.0) or (mid > 0.0 and th < 0.0):
                        th = -th
                    if th < lo:
                        th = 2.0 * lo - th
                    elif th > hi:
                        th = 2.0 * hi - th
                th = min(max(th, lo), hi)
                sh = math.sin(0.5 * th)
                nx, ny, nz, nw = 0.0, 0.0, 0.0, math.cos(0.5 * th)
                if a == 0:
                    nx = sh
                elif a == 1:
                    ny = sh
                else:
                    nz = sh
            else:
                dot = min(1.0, max(-1.0, t0 * g0 + t1 * g1 + t2 * g2))
                angle = math.acos(dot)
                if angle < 1e-7:
                    continue
                angle = min(angle, cap)
                cx = t1 * g2 - t2 * g1
                cy = t2 * g0 - t0 * g2
                cz = t0 * g1 - t1 * g0
                na = math.sqrt(cx * cx + cy * cy + cz * cz)
                if na < 1e-12:
                    continue
                sh = math.sin(0.5 * angle) / na
                r = qmul_scalar(local_q[link, 0], local_q[link, 1], local_q[link, 2], local_q[link, 3],
                                cx * sh, cy * sh, cz * sh, math.cos(0.5 * angle))
                n = math.sqrt(r[0] ** 2 + r[1] ** 2 + r[2] ** 2 + r[3] ** 2)
                nx, ny, nz, nw = r[0] / n, r[1] / n, r[2] / n, r[3] / n
                if mode == 1:
                    e = qto_euler_xyz_scalar(nx, ny, nz, nw)
                    nx, ny, nz, nw = qfrom_euler_xyz_scalar(
                        min(max(e[0], ik_link_lower[j, 0]), ik_link_upper[j, 0]),
                        min(max(e[1], ik_link_lower[j, 1]), ik_link_upper[j, 1]),
                        min(max(e[2], ik_link_lower[j, 2]), ik_link_upper[j, 2]))
            put4(local_q, link, nx, ny, nz, nw)
            r = qmul_scalar(nx, ny, nz, nw, -rest[0], -rest[1], -rest[2], rest[3])
            n = math.sqrt(r[0] ** 2 + r[1] ** 2 + r[2] ** 2 + r[3] ** 2)
            put4(ik_q, link, r[0] / n, r[1] / n, r[2] / n, r[3] / n)
            for jj in range(p0, p1):
                _update_world(ik_path_bone[jj], parent, position, local_t, local_q, world_p, world_q)
    for jj in range(ik_after_start[k], ik_after_start[k + 1]):
        _update_world(ik_after_bone[jj], parent, position, local_t, local_q, world_p, world_q)


@njit(**_NB)
def switch_off_ik(ik_enabled, ik_off):
    """ik_enabled[k] = 0 where ik_off[k] (solvers whose links physics drives: MMD skips them)."""
    for k in range(ik_off.shape[0]):
        if ik_off[k] != 0:
            ik_enabled[k] = 0


@njit(**_NB)
def solve_bones(bones, parent, position, flags, append_parent, append_ratio, fixed_axis, bone_ik,
                ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone, ik_link_mode,
                ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone, ik_after_start,
                ik_after_bone, ik_enabled, anim_t, anim_q, ik_q, app_t, app_q, local_t, local_q,
                world_p, world_q):
    """Evaluate ``bones`` (one pass, evaluation order): append, local, world, then IK."""
    for i in range(bones.shape[0]):
        put4(ik_q, bones[i], 0.0, 0.0, 0.0, 1.0)
    for i in range(bones.shape[0]):
        b = bones[i]
        _update_local(b, flags, append_parent, append_ratio, fixed_axis, anim_t, anim_q, ik_q,
                      app_t, app_q, local_t, local_q, world_q)
        _update_world(b, parent, position, local_t, local_q, world_p, world_q)
        k = bone_ik[b]
        if k >= 0 and ik_enabled[k] != 0:
            _solve_ik(k, parent, position, ik_target, ik_loop, ik_limit, ik_link_start,
                      ik_link_bone, ik_link_mode, ik_link_lower, ik_link_upper, ik_path_start,
                      ik_path_bone, ik_after_start, ik_after_bone, b, anim_q, ik_q, app_q,
                      local_t, local_q, world_p, world_q)


@njit(**_NB)
def refresh_worlds(bones, parent, position, local_t, local_q, world_p, world_q):
    """Recompute world transforms of ``bones`` (evaluation order) from their locals."""
    for i in range(bones.shape[0]):
        _update_world(bones[i], parent, position, local_t, local_q, world_p, world_q)


@njit(**_NB)
def write_matrices(position, world_p, world_q, bone_world, bone_skin):
    """World (B,4,4) float32 and skinning = world @ translate(-rest position) (B,4,4) float32."""
    for b in range(world_p.shape[0]):
        x, y, z, w = world_q[b, 0], world_q[b, 1], world_q[b, 2], world_q[b, 3]
        r00 = 1 - 2 * (y * y + z * z)
        r01 = 2 * (x * y - z * w)
        r02 = 2 * (x * z + y * w)
        r10 = 2 * (x * y + z * w)
        r11 = 1 - 2 * (x * x + z * z)
        r12 = 2 * (y * z - x * w)
        r20 = 2 * (x * z - y * w)
        r21 = 2 * (y * z + x * w)
        r22 = 1 - 2 * (x * x + y * y)
        px, py, pz = world_p[b, 0], world_p[b, 1], world_p[b, 2]
        bx, by, bz = position[b, 0], position[b, 1], position[b, 2]
        rot = (r00, r01, r02, r10, r11, r12, r20, r21, r22)
        for i in range(3):
            for j in range(3):
                bone_world[b, i, j] = rot[3 * i + j]
                bone_skin[b, i, j] = rot[3 * i + j]
        bone_world[b, 0, 3] = px
        bone_world[b, 1, 3] = py
        bone_world[b, 2, 3] = pz
        bone_skin[b, 0, 3] = px - (r00 * bx + r01 * by + r02 * bz)
        bone_skin[b, 1, 3] = py - (r10 * bx + r11 * by + r12 * bz)
        bone_skin[b, 2, 3] = pz - (r20 * bx + r21 * by + r22 * bz)
        for j in range(3):
            bone_world[b, 3, j] = 0.0
            bone_skin[b, 3, j] = 0.0
        bone_world[b, 3, 3] = 1.0
        bone_skin[b, 3, 3] = 1.0


@njit(**_NB)
def read_driven(mask, bone_world, world_p, world_q):
    """Take world transforms of physics-driven bones ((B,) bool mask) back from bone_world."""
    for b in range(mask.shape[0]):
        if mask[b]:
            q = qfrom_matrix3_scalar(bone_world[b, 0, 0], bone_world[b, 0, 1], bone_world[b, 0, 2],
                                     bone_world[b, 1, 0], bone_world[b, 1, 1], bone_world[b, 1, 2],
                                     bone_world[b, 2, 0], bone_world[b, 2, 1], bone_world[b, 2, 2])
            put4(world_q, b, q[0], q[1], q[2], q[3])
            put3(world_p, b, bone_world[b, 0, 3], bone_world[b, 1, 3], bone_world[b, 2, 3])
