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

import numpy as np
from numba import njit

from mmdkit.mathutil import (euler_xyz_to_quat, matrix3_to_quat, qmul_scalar, qrot_scalar, quat_mul,
                             quat_scale_angle, quat_to_euler_xyz)
from mmdkit.model import model as M

_NB = dict(cache=True, nogil=True)
_APP_ROT = M.BONE_APPEND_ROTATION
_APP_TRS = M.BONE_APPEND_TRANSLATION
_APP_LOCAL = M.BONE_APPEND_LOCAL
_FIXED = M.BONE_FIXED_AXIS


@njit(**_NB)
def _update_local(b, flags, append_parent, append_ratio, fixed_axis, anim_t, anim_q, ik_q,
                  app_t, app_q, local_t, local_q, world_q):
    qx, qy, qz, qw = anim_q[b, 0], anim_q[b, 1], anim_q[b, 2], anim_q[b, 3]
    f = flags[b]
    if f & _FIXED:
        ax = fixed_axis[b]
        if ax[0] != 0.0 or ax[1] != 0.0 or ax[2] != 0.0:
            d = qx * ax[0] + qy * ax[1] + qz * ax[2]
            qx, qy, qz = ax[0] * d, ax[1] * d, ax[2] * d
            n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
            if n > 1e-12:
                qx, qy, qz, qw = qx / n, qy / n, qz / n, qw / n
            else:
                qx, qy, qz, qw = 0.0, 0.0, 0.0, 1.0
    ap = append_parent[b]
    ax_, ay_, az_, aw_ = 0.0, 0.0, 0.0, 1.0
    app_t[b, 0] = 0.0
    app_t[b, 1] = 0.0
    app_t[b, 2] = 0.0
    if ap >= 0:
        ratio = append_ratio[b]
        if f & _APP_ROT:
            if f & _APP_LOCAL:
                src = world_q[ap].copy()
            elif (flags[ap] & _APP_ROT) and append_parent[ap] >= 0:
                src = app_q[ap].copy()
            else:
                src = quat_mul(ik_q[ap], anim_q[ap])
            r = quat_scale_angle(src, ratio)
            ax_, ay_, az_, aw_ = r[0], r[1], r[2], r[3]
        if f & _APP_TRS:
            if (flags[ap] & _APP_TRS) and append_parent[ap] >= 0:
                for c in range(3):
                    app_t[b, c] = app_t[ap, c] * ratio
            else:
                for c in range(3):
                    app_t[b, c] = anim_t[ap, c] * ratio
    app_q[b, 0] = ax_
    app_q[b, 1] = ay_
    app_q[b, 2] = az_
    app_q[b, 3] = aw_
    t = qmul_scalar(ax_, ay_, az_, aw_, qx, qy, qz, qw)
    i = ik_q[b]
    r2 = qmul_scalar(i[0], i[1], i[2], i[3], t[0], t[1], t[2], t[3])
    local_q[b, 0] = r2[0]
    local_q[b, 1] = r2[1]
    local_q[b, 2] = r2[2]
    local_q[b, 3] = r2[3]
    for c in range(3):
        local_t[b, c] = anim_t[b, c] + app_t[b, c]


@njit(**_NB)
def _update_world(b, parent, position, local_t, local_q, world_p, world_q):
    p = parent[b]
    if p < 0:
        for c in range(4):
            world_q[b, c] = local_q[b, c]
        for c in range(3):
            world_p[b, c] = position[b, c] + local_t[b, c]
        return
    pq = world_q[p]
    r = qrot_scalar(pq[0], pq[1], pq[2], pq[3],
              position[b, 0] - position[p, 0] + local_t[b, 0],
              position[b, 1] - position[p, 1] + local_t[b, 1],
              position[b, 2] - position[p, 2] + local_t[b, 2])
    world_p[b, 0] = world_p[p, 0] + r[0]
    world_p[b, 1] = world_p[p, 1] + r[1]
    world_p[b, 2] = world_p[p, 2] + r[2]
    lq = local_q[b]
    w = qmul_scalar(pq[0], pq[1], pq[2], pq[3], lq[0], lq[1], lq[2], lq[3])
    world_q[b, 0] = w[0]
    world_q[b, 1] = w[1]
    world_q[b, 2] = w[2]
    world_q[b, 3] = w[3]


@njit(**_NB)
def _solve_ik(k, parent, position, ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone,
              ik_link_mode, ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone,
              ik_after_start, ik_after_bone, ik_bone_of, anim_q, ik_q, app_q, local_t, local_q,
              world_p, world_q):
    gx, gy, gz = world_p[ik_bone_of, 0], world_p[ik_bone_of, 1], world_p[ik_bone_of, 2]
    target = ik_target[k]
    l0 = ik_link_start[k]
    l1 = ik_link_start[k + 1]
    loops = ik_loop[k]
    half = loops // 2
    prev = 1e30
    vt = np.empty(3)
    vg = np.empty(3)
    new = np.empty(4)
    for it in range(loops):
        d2 = (world_p[target, 0] - gx) ** 2 + (world_p[target, 1] - gy) ** 2 + (world_p[target, 2] - gz) ** 2
        if d2 < 1e-10 or (it > half and abs(prev - d2) < 1e-12):
            break  # reached, or converged (unreachable goal) after the bend-forcing half
        prev = d2
        for li in range(l1 - l0):
            link = ik_link_bone[l0 + li]
            tx, ty, tz = world_p[target, 0], world_p[target, 1], world_p[target, 2]
            if (tx - gx) ** 2 + (ty - gy) ** 2 + (tz - gz) ** 2 < 1e-10:
                break
            wq = world_q[link]
            lx, ly, lz = world_p[link, 0], world_p[link, 1], world_p[link, 2]
            a_ = qrot_scalar(-wq[0], -wq[1], -wq[2], wq[3], tx - lx, ty - ly, tz - lz)
            b_ = qrot_scalar(-wq[0], -wq[1], -wq[2], wq[3], gx - lx, gy - ly, gz - lz)
            nt = math.sqrt(a_[0] ** 2 + a_[1] ** 2 + a_[2] ** 2)
            ng = math.sqrt(b_[0] ** 2 + b_[1] ** 2 + b_[2] ** 2)
            if nt < 1e-9 or ng < 1e-9:
                continue
            for c in range(3):
                vt[c] = a_[c] / nt
                vg[c] = b_[c] / ng
            cap = ik_limit[k] * (li + 1)
            mode = ik_link_mode[l0 + li]
            ap = app_q[link]
            an = anim_q[link]
            rest = qmul_scalar(ap[0], ap[1], ap[2], ap[3], an[0], an[1], an[2], an[3])
            if mode >= 2:
                a = mode - 2
                # hinge: signed angle between the projections on the plane ⟂ axis a
                vt[a] = 0.0
                vg[a] = 0.0
                pt = math.sqrt(vt[0] ** 2 + vt[1] ** 2 + vt[2] ** 2)
                pg = math.sqrt(vg[0] ** 2 + vg[1] ** 2 + vg[2] ** 2)
                if pt < 1e-9 or pg < 1e-9:
                    continue
                if a == 0:
                    cr = vt[1] * vg[2] - vt[2] * vg[1]
                elif a == 1:
                    cr = vt[2] * vg[0] - vt[0] * vg[2]
                else:
                    cr = vt[0] * vg[1] - vt[1] * vg[0]
                dot = (vt[0] * vg[0] + vt[1] * vg[1] + vt[2] * vg[2]) / (pt * pg)
                delta = math.atan2(cr / (pt * pg), dot)
                if delta > cap:
                    delta = cap
                elif delta < -cap:
                    delta = -cap
                cur = local_q[link]
                theta = 2.0 * math.atan2(cur[a], cur[3])
                if theta > math.pi:
                    theta -= 2.0 * math.pi
                elif theta < -math.pi:
                    theta += 2.0 * math.pi
                th = theta + delta
                lo = ik_link_lower[l0 + li, a]
                hi = ik_link_upper[l0 + li, a]
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
                new[0] = 0.0
                new[1] = 0.0
                new[2] = 0.0
                new[a] = math.sin(0.5 * th)
                new[3] = math.cos(0.5 * th)
            else:
                dot = min(1.0, max(-1.0, vt[0] * vg[0] + vt[1] * vg[1] + vt[2] * vg[2]))
                angle = math.acos(dot)
                if angle < 1e-7:
                    continue
                angle = min(angle, cap)
                cx = vt[1] * vg[2] - vt[2] * vg[1]
                cy = vt[2] * vg[0] - vt[0] * vg[2]
                cz = vt[0] * vg[1] - vt[1] * vg[0]
                na = math.sqrt(cx * cx + cy * cy + cz * cz)
                if na < 1e-12:
                    continue
                sh = math.sin(0.5 * angle) / na
                cq = local_q[link]
                r = qmul_scalar(cq[0], cq[1], cq[2], cq[3], cx * sh, cy * sh, cz * sh, math.cos(0.5 * angle))
                n = math.sqrt(r[0] ** 2 + r[1] ** 2 + r[2] ** 2 + r[3] ** 2)
                for c in range(4):
                    new[c] = r[c] / n
                if mode == 1:
                    e = quat_to_euler_xyz(new)
                    for c in range(3):
                        e[c] = min(max(e[c], ik_link_lower[l0 + li, c]), ik_link_upper[l0 + li, c])
                    new[:] = euler_xyz_to_quat(e)
            for c in range(4):
                local_q[link, c] = new[c]
            r = qmul_scalar(new[0], new[1], new[2], new[3], -rest[0], -rest[1], -rest[2], rest[3])
            n = math.sqrt(r[0] ** 2 + r[1] ** 2 + r[2] ** 2 + r[3] ** 2)
            for c in range(4):
                ik_q[link, c] = r[c] / n
            for j in range(ik_path_start[k], ik_path_start[k + 1]):
                _update_world(ik_path_bone[j], parent, position, local_t, local_q, world_p, world_q)
    for j in range(ik_after_start[k], ik_after_start[k + 1]):
        _update_world(ik_after_bone[j], parent, position, local_t, local_q, world_p, world_q)


@njit(**_NB)
def solve_bones(bones, parent, position, flags, append_parent, append_ratio, fixed_axis, bone_ik,
                ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone, ik_link_mode,
                ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone, ik_after_start,
                ik_after_bone, ik_enabled, anim_t, anim_q, ik_q, app_t, app_q, local_t, local_q,
                world_p, world_q):
    """Evaluate ``bones`` (one pass, evaluation order): append, local, world, then IK."""
    for i in range(bones.shape[0]):
        b = bones[i]
        ik_q[b, 0] = 0.0
        ik_q[b, 1] = 0.0
        ik_q[b, 2] = 0.0
        ik_q[b, 3] = 1.0
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
        m = bone_world[b]
        s = bone_skin[b]
        m[0, 0] = r00
        m[0, 1] = r01
        m[0, 2] = r02
        m[1, 0] = r10
        m[1, 1] = r11
        m[1, 2] = r12
        m[2, 0] = r20
        m[2, 1] = r21
        m[2, 2] = r22
        m[0, 3] = px
        m[1, 3] = py
        m[2, 3] = pz
        m[3, 0] = 0.0
        m[3, 1] = 0.0
        m[3, 2] = 0.0
        m[3, 3] = 1.0
        for i in range(3):
            for j in range(3):
                s[i, j] = m[i, j]
        s[0, 3] = px - (r00 * bx + r01 * by + r02 * bz)
        s[1, 3] = py - (r10 * bx + r11 * by + r12 * bz)
        s[2, 3] = pz - (r20 * bx + r21 * by + r22 * bz)
        s[3, 0] = 0.0
        s[3, 1] = 0.0
        s[3, 2] = 0.0
        s[3, 3] = 1.0


@njit(**_NB)
def read_driven(mask, bone_world, world_p, world_q):
    """Take world transforms of physics-driven bones ((B,) bool mask) back from bone_world."""
    for b in range(mask.shape[0]):
        if mask[b]:
            m = np.empty((3, 3))
            for i in range(3):
                for j in range(3):
                    m[i, j] = bone_world[b, i, j]
                world_p[b, i] = bone_world[b, i, 3]
            world_q[b] = matrix3_to_quat(m)
