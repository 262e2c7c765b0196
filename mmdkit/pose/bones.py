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

from mmdkit.mathutil import (euler_xyz_to_quat, matrix3_to_quat, quat_axis_angle, quat_conj, quat_mul,
                             quat_normalize, quat_rotate, quat_scale_angle, quat_to_euler_xyz)
from mmdkit.model import model as M

_NB = dict(cache=True, nogil=True)
_APP_ROT = M.BONE_APPEND_ROTATION
_APP_TRS = M.BONE_APPEND_TRANSLATION
_APP_LOCAL = M.BONE_APPEND_LOCAL
_FIXED = M.BONE_FIXED_AXIS


@njit(**_NB)
def _update_local(b, flags, append_parent, append_ratio, fixed_axis, anim_t, anim_q, ik_q,
                  app_t, app_q, local_t, local_q, world_q):
    q = anim_q[b].copy()
    f = flags[b]
    if f & _FIXED:
        ax = fixed_axis[b]
        if ax[0] != 0.0 or ax[1] != 0.0 or ax[2] != 0.0:
            d = q[0] * ax[0] + q[1] * ax[1] + q[2] * ax[2]
            q[0] = ax[0] * d
            q[1] = ax[1] * d
            q[2] = ax[2] * d
            q = quat_normalize(q)
    ap = append_parent[b]
    app_q[b, 0] = 0.0
    app_q[b, 1] = 0.0
    app_q[b, 2] = 0.0
    app_q[b, 3] = 1.0
    app_t[b, 0] = 0.0
    app_t[b, 1] = 0.0
    app_t[b, 2] = 0.0
    if ap >= 0:
        ratio = append_ratio[b]
        if f & _APP_ROT:
            if f & _APP_LOCAL:
                src = world_q[ap]
            elif (flags[ap] & _APP_ROT) and append_parent[ap] >= 0:
                src = app_q[ap]
            else:
                src = quat_mul(ik_q[ap], anim_q[ap])
            app_q[b] = quat_scale_angle(src, ratio)
        if f & _APP_TRS:
            if (flags[ap] & _APP_TRS) and append_parent[ap] >= 0:
                for c in range(3):
                    app_t[b, c] = app_t[ap, c] * ratio
            else:
                for c in range(3):
                    app_t[b, c] = anim_t[ap, c] * ratio
    local_q[b] = quat_mul(ik_q[b], quat_mul(app_q[b], q))
    for c in range(3):
        local_t[b, c] = anim_t[b, c] + app_t[b, c]


@njit(**_NB)
def _update_world(b, parent, position, local_t, local_q, world_p, world_q):
    p = parent[b]
    if p < 0:
        world_q[b] = local_q[b]
        for c in range(3):
            world_p[b, c] = position[b, c] + local_t[b, c]
        return
    off = np.empty(3)
    for c in range(3):
        off[c] = position[b, c] - position[p, c] + local_t[b, c]
    r = quat_rotate(world_q[p], off)
    for c in range(3):
        world_p[b, c] = world_p[p, c] + r[c]
    world_q[b] = quat_mul(world_q[p], local_q[b])


@njit(**_NB)
def _solve_ik(k, parent, position, ik_target, ik_loop, ik_limit, ik_link_start, ik_link_bone,
              ik_link_mode, ik_link_lower, ik_link_upper, ik_path_start, ik_path_bone,
              ik_after_start, ik_after_bone, ik_bone_of, anim_q, ik_q, app_q, local_t, local_q,
              world_p, world_q):
    goal = world_p[ik_bone_of].copy()
    target = ik_target[k]
    l0 = ik_link_start[k]
    l1 = ik_link_start[k + 1]
    loops = ik_loop[k]
    half = loops // 2
    prev = 1e30
    for it in range(loops):
        tp = world_p[target]
        d2 = (tp[0] - goal[0]) ** 2 + (tp[1] - goal[1]) ** 2 + (tp[2] - goal[2]) ** 2
        if d2 < 1e-10 or (it > half and abs(prev - d2) < 1e-12):
            break  # reached, or converged (unreachable goal) after the bend-forcing half
        prev = d2
        for li in range(l1 - l0):
            link = ik_link_bone[l0 + li]
            tp = world_p[target]
            dx = tp[0] - goal[0]
            dy = tp[1] - goal[1]
            dz = tp[2] - goal[2]
            if dx * dx + dy * dy + dz * dz < 1e-10:
                break
            inv = quat_conj(world_q[link])
            vt = quat_rotate(inv, tp - world_p[link])
            vg = quat_rotate(inv, goal - world_p[link])
            nt = math.sqrt(vt[0] ** 2 + vt[1] ** 2 + vt[2] ** 2)
            ng = math.sqrt(vg[0] ** 2 + vg[1] ** 2 + vg[2] ** 2)
            if nt < 1e-9 or ng < 1e-9:
                continue
            vt /= nt
            vg /= ng
            cap = ik_limit[k] * (li + 1)
            mode = ik_link_mode[l0 + li]
            rest = quat_mul(app_q[link], anim_q[link])
            if mode >= 2:
                a = mode - 2
                # hinge: signed angle between the projections on the plane ⟂ axis a
                vt[a] = 0.0
                vg[a] = 0.0
                pt = math.sqrt(vt[0] ** 2 + vt[1] ** 2 + vt[2] ** 2)
                pg = math.sqrt(vg[0] ** 2 + vg[1] ** 2 + vg[2] ** 2)
                if pt < 1e-9 or pg < 1e-9:
                    continue
                cr = np.empty(3)
                cr[0] = vt[1] * vg[2] - vt[2] * vg[1]
                cr[1] = vt[2] * vg[0] - vt[0] * vg[2]
                cr[2] = vt[0] * vg[1] - vt[1] * vg[0]
                dot = (vt[0] * vg[0] + vt[1] * vg[1] + vt[2] * vg[2]) / (pt * pg)
                delta = math.atan2(cr[a] / (pt * pg), dot)
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
                ax = np.zeros(3)
                ax[a] = 1.0
                new = quat_axis_angle(ax, th)
            else:
                dot = min(1.0, max(-1.0, vt[0] * vg[0] + vt[1] * vg[1] + vt[2] * vg[2]))
                angle = math.acos(dot)
                if angle < 1e-7:
                    continue
                angle = min(angle, cap)
                axis = np.empty(3)
                axis[0] = vt[1] * vg[2] - vt[2] * vg[1]
                axis[1] = vt[2] * vg[0] - vt[0] * vg[2]
                axis[2] = vt[0] * vg[1] - vt[1] * vg[0]
                na = math.sqrt(axis[0] ** 2 + axis[1] ** 2 + axis[2] ** 2)
                if na < 1e-12:
                    continue
                axis /= na
                new = quat_normalize(quat_mul(local_q[link], quat_axis_angle(axis, angle)))
                if mode == 1:
                    e = quat_to_euler_xyz(new)
                    for c in range(3):
                        e[c] = min(max(e[c], ik_link_lower[l0 + li, c]), ik_link_upper[l0 + li, c])
                    new = euler_xyz_to_quat(e)
            local_q[link] = new
            ik_q[link] = quat_normalize(quat_mul(new, quat_conj(rest)))
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
