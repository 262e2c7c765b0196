"""MMD-style CCD IK for one solver, in float64 (called by ``bones.solve_bones``).

In: solver index k, the rig's IK tables (targets, loop counts, unit angles, links with their
limit modes and Euler limits, the path of bones to refresh), the pose state's per-bone arrays.
Out (in place): local_q and ik_q of the links, world_p/world_q of the chain and its descendants.
"""

from __future__ import annotations

import math

from numba import njit

from mmdkit.mathutil import put4, qfrom_euler_xyz_scalar, qmul_scalar, qrot_scalar, qto_euler_xyz_scalar
from mmdkit.pose.fk import update_world

_NB = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_NB)
def solve_ik(k, parent, position, ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone,
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
                update_world(ik_path_bone[jj], parent, position, local_t, local_q, world_p, world_q)
    for jj in range(ik_after_start[k], ik_after_start[k + 1]):
        update_world(ik_after_bone[jj], parent, position, local_t, local_q, world_p, world_q)


