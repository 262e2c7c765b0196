"""Slow, plain-numpy float64 skinning (the formulas written out) and pose helpers for tests.

In: a ``Model``, bone_skin (B, 4, 4), optional vertex offsets (V, 3). Out: (V, 3) float64 positions
and unit normals. Used to check the compiled kernels; never on a per-frame path.
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.rotation import slerp_rows
from mmdkit.model.model import DEFORM_BDEF1, DEFORM_BDEF2, DEFORM_BDEF4, DEFORM_QDEF, DEFORM_SDEF
from mmdkit.model.deform import effective_weights

__all__ = ["skin_reference", "rotation_matrices", "random_rigid", "skin_from_world", "simple_fk"]


def quat_from_matrix(R):
    """(..., 3, 3) rotations → (..., 4) unit quaternions (x, y, z, w), w ≥ 0 (via eigen-decomposition)."""
    R = np.asarray(R, np.float64)
    flat = R.reshape(-1, 3, 3)
    out = np.empty((len(flat), 4))
    for i, m in enumerate(flat):
        # Bar-Itzhack: the quaternion is the top eigenvector of a symmetric 4x4 matrix
        K = np.array([
            [m[0, 0] - m[1, 1] - m[2, 2], m[1, 0] + m[0, 1], m[2, 0] + m[0, 2], m[2, 1] - m[1, 2]],
            [m[1, 0] + m[0, 1], m[1, 1] - m[0, 0] - m[2, 2], m[2, 1] + m[1, 2], m[0, 2] - m[2, 0]],
            [m[2, 0] + m[0, 2], m[2, 1] + m[1, 2], m[2, 2] - m[0, 0] - m[1, 1], m[1, 0] - m[0, 1]],
            [m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1], m[0, 0] + m[1, 1] + m[2, 2]],
        ]) / 3.0
        w, v = np.linalg.eigh(K)
        q = v[:, -1]
        out[i] = q if q[3] >= 0 else -q
    return out.reshape(R.shape[:-2] + (4,))


def quat_matrix(q):
    """(..., 4) unit quaternions (x, y, z, w) → (..., 3, 3) rotation matrices."""
    x, y, z, w = np.moveaxis(np.asarray(q, np.float64), -1, 0)
    return np.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1).reshape(x.shape + (3, 3))


def quat_mul(a, b):
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], -1)


def rotation_matrices(axis_angle):
    """(n, 3) rotation vectors → (n, 3, 3) matrices (Rodrigues)."""
    aa = np.asarray(axis_angle, np.float64).reshape(-1, 3)
    th = np.linalg.norm(aa, axis=1)
    k = aa / np.where(th > 0, th, 1)[:, None]
    K = np.zeros((len(aa), 3, 3))
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
    K = K - K.transpose(0, 2, 1)
    s, c = np.sin(th)[:, None, None], np.cos(th)[:, None, None]
    return np.eye(3) + s * K + (1 - c) * (K @ K)


def random_rigid(n, rng, angle=np.pi, spread=1.0):
    """(n, 4, 4) float32 random rigid transforms (rotations up to ``angle``, translations ~ spread)."""
    aa = rng.normal(size=(n, 3))
    aa *= (rng.uniform(0, angle, n) / np.linalg.norm(aa, axis=1))[:, None]
    M = np.zeros((n, 4, 4), np.float64)
    M[:, :3, :3] = rotation_matrices(aa)
    M[:, :3, 3] = rng.normal(scale=spread, size=(n, 3))
    M[:, 3, 3] = 1
    return M.astype(np.float32)


def skin_from_world(bone_world, bone_position):
    """bone_world (B, 4, 4) → bone_skin = bone_world @ translate(-bone_position), float32."""
    W = np.asarray(bone_world, np.float64)
    S = W.copy()
    S[:, :3, 3] = W[:, :3, 3] - np.einsum("bij,bj->bi", W[:, :3, :3], np.asarray(bone_position, np.float64))
    return S.astype(np.float32)


def skin_reference(model, bone_skin, vertex_offset=None, bind_normal=None):
    """Every deform type in float64, written as the formulas read. → (positions, normals) (V, 3)."""
    M = np.asarray(bone_skin, np.float64)
    p = np.asarray(model.vertex_position, np.float64).copy()
    if vertex_offset is not None:
        p += vertex_offset
    n = np.asarray(model.vertex_normal if bind_normal is None else bind_normal, np.float64)
    n = n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-30)
    d = np.asarray(model.vertex_deform)
    bi = np.asarray(model.vertex_bone_index)
    bw = effective_weights(model.vertex_deform, model.vertex_bone_weight).astype(np.float64)
    out_p = np.zeros_like(p)
    out_n = np.zeros_like(p)
    lin = (d == DEFORM_BDEF1) | (d == DEFORM_BDEF2) | (d == DEFORM_BDEF4)
    if lin.any():
        A = np.einsum("vk,vkij->vij", bw[lin], M[bi[lin]])
        out_p[lin] = np.einsum("vij,vj->vi", A[:, :3, :3], p[lin]) + A[:, :3, 3]
        out_n[lin] = np.einsum("vij,vj->vi", A[:, :3, :3], n[lin])
    s = d == DEFORM_SDEF
    if s.any():
        w0 = bw[s, 0]
        w1 = 1 - w0
        M0, M1 = M[bi[s, 0]], M[bi[s, 1]]
        c = np.asarray(model.vertex_sdef_c, np.float64)[s]
        r0 = np.asarray(model.vertex_sdef_r0, np.float64)[s]
        r1 = np.asarray(model.vertex_sdef_r1, np.float64)[s]
        rw = w0[:, None] * r0 + w1[:, None] * r1
        cr0 = (c + (c + r0 - rw)) / 2
        cr1 = (c + (c + r1 - rw)) / 2
        q = slerp_rows(quat_from_matrix(M0[:, :3, :3]), quat_from_matrix(M1[:, :3, :3]), w1)
        R = quat_matrix(q)

        def tr(Mx, x):
            return np.einsum("vij,vj->vi", Mx[:, :3, :3], x) + Mx[:, :3, 3]

        out_p[s] = (np.einsum("vij,vj->vi", R, p[s] - c) + w0[:, None] * tr(M0, cr0) + w1[:, None] * tr(M1, cr1))
        out_n[s] = np.einsum("vij,vj->vi", R, n[s])
    qd = d == DEFORM_QDEF
    if qd.any():
        idx = np.nonzero(qd)[0]
        real = np.zeros((len(idx), 4))
        dual = np.zeros((len(idx), 4))
        first = None
        for k in range(4):
            Mk = M[bi[idx, k]]
            r = quat_from_matrix(Mk[:, :3, :3])
            t = np.concatenate([Mk[:, :3, 3], np.zeros((len(idx), 1))], 1)
            if first is None:
                first = r.copy()
            flip = np.einsum("ij,ij->i", r, first) < 0
            r[flip] *= -1
            du = 0.5 * quat_mul(t, r)
            w = bw[idx, k][:, None]
            real += w * r
            dual += w * du
        ln = np.linalg.norm(real, axis=1, keepdims=True)
        real /= ln
        dual /= ln
        conj = real * np.array([-1, -1, -1, 1])
        t = 2 * quat_mul(dual, conj)[:, :3]
        R = quat_matrix(real)
        out_p[idx] = np.einsum("vij,vj->vi", R, p[idx]) + t
        out_n[idx] = np.einsum("vij,vj->vi", R, n[idx])
    out_n /= np.maximum(np.linalg.norm(out_n, axis=1, keepdims=True), 1e-30)
    return out_p, out_n


def simple_fk(model, local_rotation, root_transform=None):
    """Rotation-only forward kinematics (no IK/append): local_rotation (B, 3, 3) about each bone's
    rest position → bone_world (B, 4, 4) float32. For tests before/without ``mmdkit.pose``."""
    B = model.num_bones
    bp = np.asarray(model.bone_position, np.float64)
    parent = np.asarray(model.bone_parent)
    W = np.zeros((B, 4, 4))
    done = np.zeros(B, bool)
    while not done.all():
        progressed = False
        for b in np.nonzero(~done)[0]:
            p = parent[b]
            if p >= 0 and not done[p]:
                continue
            L = np.eye(4)
            L[:3, :3] = local_rotation[b]
            if p >= 0:
                L[:3, 3] = bp[b] - bp[p]
                W[b] = W[p] @ L
            else:
                L[:3, 3] = bp[b]
                W[b] = (np.eye(4) if root_transform is None else root_transform) @ L
            done[b] = True
            progressed = True
        if not progressed:  # a parent cycle: treat the rest as roots
            b = np.nonzero(~done)[0][0]
            parent = parent.copy()
            parent[b] = -1
    return W.astype(np.float32)
