"""Forward kinematics of one bone, inlined into the pose kernels: local then world transform.

In (per bone b): rig arrays (flags, append parent/ratio, fixed axis, parent, rest position) and
the pose state's per-bone float64 arrays (animated/IK/append rotation and translation). Out (in
place): local_t/local_q (B,3)/(B,4) and world_p/world_q (B,3)/(B,4), model space.
Composition: local rotation = ik ⊗ append ⊗ animated (animated applied first); world =
parent ∘ (rest offset + local translation, local rotation). Append 'local' flag: the source's
world-space rotation relative to its parent chain is used (documented choice: like nanoem).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mmdkit.mathutil import put3, put4, qmul_scalar, qrot_scalar, qscale_angle_scalar
from mmdkit.model import model as M

_NB = dict(cache=True, nogil=True, error_model="numpy")
_APP_ROT = M.BONE_APPEND_ROTATION
_APP_TRS = M.BONE_APPEND_TRANSLATION
_APP_LOCAL = M.BONE_APPEND_LOCAL
_FIXED = M.BONE_FIXED_AXIS


@njit(inline="always", **_NB)
def update_local(b, flags, append_parent, append_ratio, fixed_axis, anim_t, anim_q, ik_q,
                  app_t, app_q, local_t, local_q, world_q):
    """Bone b's append (app_t (B,3), app_q (B,4)) and local transform (local_t (B,3), local_q
    (B,4)) float64 parent-local, from anim_t/anim_q/ik_q and its append source's state; flags
    (B,) int32, append_parent (B,) int32, append_ratio (B,) float64, fixed_axis (B,3) float64."""
    # Every array read happens up front and unconditionally, every write at the end: numba can
    # then drop the reference counting of the inlined array arguments (otherwise ~24 atomic
    # operations per bone, more than the arithmetic). s is the append source (b itself if none).
    b = np.uint64(b)  # unsigned indices: numba then skips the negative-index wraparound
    f = flags[b]
    ap = append_parent[b]
    s = np.uint64(ap) if ap >= 0 else b  # (np.uint64(ap if ...) would unify int32 and uint64 as float64)
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
def local_offset(b, parent, position, local_t):
    """Bone b's offset from its parent (rest position[b] − position[parent] + local_t[b]; a root:
    from the origin), parent-local, as a 3-tuple; b unsigned."""
    p = parent[b]
    s = np.uint64(p) if p >= 0 else np.uint64(b)
    rx, ry, rz = position[s, 0], position[s, 1], position[s, 2]
    if p < 0:
        rx, ry, rz = 0.0, 0.0, 0.0
    return (position[b, 0] - rx + local_t[b, 0], position[b, 1] - ry + local_t[b, 1],
            position[b, 2] - rz + local_t[b, 2])


@njit(inline="always", **_NB)
def compose_world(has_parent, px, py, pz, pw, ox, oy, oz, vx, vy, vz, lx, ly, lz, lw):
    """World position (3) and rotation (4) of a bone with local offset v and local rotation l under
    a parent at o turned by p, as a 7-tuple; a root (``has_parent`` False) keeps v and l."""
    if has_parent:
        r = qrot_scalar(px, py, pz, pw, vx, vy, vz)
        q = qmul_scalar(px, py, pz, pw, lx, ly, lz, lw)
        return ox + r[0], oy + r[1], oz + r[2], q[0], q[1], q[2], q[3]
    return vx, vy, vz, lx, ly, lz, lw


@njit(inline="always", **_NB)
def update_world(b, parent, position, local_t, local_q, world_p, world_q):
    """Bone b's world_p (B,3) / world_q (B,4) float64 model space = parent's world ∘ (rest
    offset position[b] − position[parent] + local_t[b], local_q[b]); parent (B,) int32."""
    # straight-line like update_local (a root reads itself, then uses the identity instead)
    b = np.uint64(b)  # unsigned indices: numba then skips the negative-index wraparound
    p = parent[b]
    s = np.uint64(p) if p >= 0 else np.uint64(b)
    px, py, pz, pw = world_q[s, 0], world_q[s, 1], world_q[s, 2], world_q[s, 3]
    ox, oy, oz = world_p[s, 0], world_p[s, 1], world_p[s, 2]
    lx, ly, lz, lw = local_q[b, 0], local_q[b, 1], local_q[b, 2], local_q[b, 3]
    v = local_offset(b, parent, position, local_t)
    w = compose_world(p >= 0, px, py, pz, pw, ox, oy, oz, v[0], v[1], v[2], lx, ly, lz, lw)
    put3(world_p, b, w[0], w[1], w[2])
    put4(world_q, b, w[3], w[4], w[5], w[6])
