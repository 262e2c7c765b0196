"""VRM spring bones (VRMC_springBone 1.0 / VRM 0.x secondaryAnimation) simulated in MMD space.

In: a ``Model`` whose ``source_extras['vrm_springs']`` is an ``importers.vrm.SpringBones`` (MMD
space and units: the spec's metres × 12.5), then per frame bone_world (B, 4, 4) float32 model space
after the first bone pass. Out: the same array with the rows of the spring joints' bones
overwritten (rigid: rotation about the bone's head, which stays where its parent puts it); the
second bone pass carries their descendants along (``PoseState.set_driven``).

The algorithm is the spec's (non-normative) reference one, per joint from the root down, in fixed
steps of ``fixed_step`` seconds (dt):

  head frame H = (updated world of the nearest joint above) · (its pose-relative offset), or the
  posed world when no joint is above; tails kept in the chain's center space (C: the center
  bone's posed world, I without one)
  next = C·cur + (C·cur − C·prev)(1 − drag) + dt·stiffness·(R_H·axis) + dt·gravityPower·gravityDir
  next = head + |next − head|⁻¹ (next − head) · length; each collider of the chain (sphere: centre
  and radius; capsule: segment and radius) pushes next out to radius + hitRadius, length again
  prev = cur; cur = C⁻¹·next; the bone's world = H · (rotation taking axis to H⁻¹·next)

``SpringWorld`` has the world interface ``runtime.simulation.Simulation`` drives (``reset`` with
settle steps, ``step(dt)``, ``pull_bones``, ``driven_bone_mask``, ``fixed_step``), so springs reset
on seeks and settle as Bullet's bodies do. Per-key VMD physics flags do not apply (no-op).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DEFAULT_SPRING_STEP = 1.0 / 60.0
"""Seconds per spring step: the rate UniVRM/three-vrm run at (the inertia term is per step)."""
MAX_SPRING_SUBSTEPS = 8
"""Most steps one ``step`` call takes (a longer gap is a seek for ``Simulation`` anyway)."""


@njit(cache=True, nogil=True)
def _mm(a, b):
    """(4,4) @ (4,4) or (3,3) @ (3,3), written out (numba's @ goes through BLAS)."""
    n = a.shape[0]
    out = np.zeros((n, n))
    for i in range(n):
        for k in range(n):
            acc = 0.0
            for t in range(n):
                acc += a[i, t] * b[t, k]
            out[i, k] = acc
    return out


@njit(cache=True, nogil=True)
def _mv(m, v):
    """(≥3, ≥3) m's rotation block times (3,) v."""
    out = np.empty(3)
    for i in range(3):
        out[i] = m[i, 0] * v[0] + m[i, 1] * v[1] + m[i, 2] * v[2]
    return out


@njit(cache=True, nogil=True)
def _point(m, v):
    """(4,4) affine m applied to the (3,) point v."""
    out = _mv(m, v)
    for i in range(3):
        out[i] += m[i, 3]
    return out


@njit(cache=True, nogil=True)
def _rigid_inverse(m):
    out = np.eye(4)
    r = m[:3, :3].T
    out[:3, :3] = r
    out[:3, 3] = -_mv(r, m[:3, 3])
    return out


@njit(cache=True, nogil=True)
def _from_to(a, b):
    """(3,3) rotation taking unit a to unit b (Rodrigues; 180° about an axis normal to a)."""
    c = a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    k = np.cross(a, b)
    if c < -1.0 + 1e-9:
        k = np.cross(a, np.array([1.0, 0.0, 0.0]))
        if np.dot(k, k) < 1e-12:
            k = np.cross(a, np.array([0.0, 1.0, 0.0]))
        k = k / np.sqrt(np.dot(k, k))
        return 2.0 * np.outer(k, k) - np.eye(3)
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + kx + _mm(kx, kx) / (1.0 + c)


@njit(cache=True, nogil=True)
def _mat(bone_world, b):
    out = np.eye(4)
    if b >= 0:
        for i in range(3):
            for k in range(4):
                out[i, k] = bone_world[b, i, k]
    return out


@njit(cache=True, nogil=True)
def _constrain(head, p, length):
    d = p - head
    n = np.sqrt(np.dot(d, d))
    return head + d * (length / n) if n > 1e-12 else p


@njit(cache=True, nogil=True)
def _collide(p, head, length, hit, chain, chain_start, chain_collider, c_capsule, c_radius, col_a, col_b):
    """p pushed out of each collider of ``chain`` (world ends col_a/col_b (K,3)), length kept."""
    for e in range(chain_start[chain], chain_start[chain + 1]):
        k = chain_collider[e]
        a = col_a[k]
        centre = a
        if c_capsule[k]:
            ab = col_b[k] - a
            den = np.dot(ab, ab)
            t = 0.0 if den < 1e-12 else min(1.0, max(0.0, np.dot(p - a, ab) / den))
            centre = a + t * ab
        d = p - centre
        n = np.sqrt(np.dot(d, d))
        dist = n - (c_radius[k] + hit)
        if dist < 0.0 and n > 1e-12:
            p = _constrain(head, p - d * (dist / n), length)
    return p


@njit(cache=True, nogil=True)
def _held_pose(bone_world, j_bone, j_anc, j_chain, chain_center, c_bone, c_offset, c_tail):
    """What the held pose gives every step: (J,4,4) each joint's pose relative to the nearest joint
    above (its pose without one), (J,4,4) its chain's center matrix and inverse, (K,3) × 2 the
    colliders' ends in model space."""
    J, K = len(j_bone), len(c_bone)
    rel, cm, ci = np.empty((J, 4, 4)), np.empty((J, 4, 4)), np.empty((J, 4, 4))
    for j in range(J):
        pose = _mat(bone_world, j_bone[j])
        a = j_anc[j]
        rel[j] = _mm(_rigid_inverse(_mat(bone_world, j_bone[a])), pose) if a >= 0 else pose
        cm[j] = _mat(bone_world, chain_center[j_chain[j]])
        ci[j] = _rigid_inverse(cm[j])
    col_a, col_b = np.empty((K, 3)), np.empty((K, 3))
    for k in range(K):
        w = _mat(bone_world, c_bone[k])
        col_a[k] = _point(w, c_offset[k])
        col_b[k] = _point(w, c_tail[k])
    return rel, cm, ci, col_a, col_b


@njit(cache=True, nogil=True)
def spring_steps(n_steps, dt, simulate, bone_world, j_bone, j_anc, j_axis, j_length, j_chain, j_stiff, j_drag,
                 j_gpow, j_gdir, j_hit, chain_center, chain_start, chain_collider, c_bone, c_capsule, c_offset,
                 c_tail, c_radius, tail_cur, tail_prev, joint_world):
    """``n_steps`` spring steps of ``dt`` s with the pose held (``simulate`` False: one pass that
    only re-aims the joints at their current tails). bone_world (B,4,4) float32 posed (read);
    tail_cur/tail_prev (J,3) float64 center space (in/out); joint_world (J,4,4) float64 out."""
    rel, cm, ci, col_a, col_b = _held_pose(bone_world, j_bone, j_anc, j_chain, chain_center, c_bone, c_offset,
                                           c_tail)
    for s in range(max(n_steps, 1)):
        for j in range(len(j_bone)):
            a = j_anc[j]
            h = _mm(joint_world[a], rel[j]) if a >= 0 else rel[j]
            head = h[:3, 3].copy()
            r = h[:3, :3].copy()
            cur = _point(cm[j], tail_cur[j])
            if simulate and s < n_steps:
                prev = _point(cm[j], tail_prev[j])
                nxt = cur + (cur - prev) * (1.0 - j_drag[j]) + dt * j_stiff[j] * _mv(r, j_axis[j]) \
                    + dt * j_gpow[j] * j_gdir[j]
                nxt = _constrain(head, nxt, j_length[j])
                nxt = _collide(nxt, head, j_length[j], j_hit[j], j_chain[j], chain_start, chain_collider, c_capsule,
                               c_radius, col_a, col_b)
                tail_prev[j] = tail_cur[j]
                tail_cur[j] = _point(ci[j], nxt)
            else:
                nxt = _constrain(head, cur, j_length[j])
            to = _mv(r.T, nxt - head)
            n = np.sqrt(np.dot(to, to))
            if n > 1e-12:
                r = _mm(r, _from_to(j_axis[j], to / n))
            joint_world[j, 3] = 0.0
            joint_world[j, 3, 3] = 1.0
            joint_world[j, :3, :3] = r
            joint_world[j, :3, 3] = head


@njit(cache=True, nogil=True)
def spring_reset(bone_world, j_bone, j_anc, j_axis, j_length, j_chain, chain_center, tail_cur, tail_prev,
                 joint_world):
    """Tails at rest relative to the posed bones, zero velocity; joint_world = the posed worlds."""
    for j in range(len(j_bone)):
        pose = _mat(bone_world, j_bone[j])
        a = j_anc[j]
        h = _mm(joint_world[a], _mm(_rigid_inverse(_mat(bone_world, j_bone[a])), pose)) if a >= 0 else pose
        joint_world[j] = h
        tail = _point(h, j_axis[j] * j_length[j])
        ci = _rigid_inverse(_mat(bone_world, chain_center[j_chain[j]]))
        tail_cur[j] = _point(ci, tail)
        tail_prev[j] = tail_cur[j]


@njit(cache=True, nogil=True)
def write_joints(joint_bone, joint_world, bone_world):
    """joint_world (J,4,4) float64 into the joints' rows of bone_world (B,4,4) float32."""
    for j in range(len(joint_bone)):
        for i in range(4):
            for k in range(4):
                bone_world[joint_bone[j], i, k] = joint_world[j, i, k]


def nearest_joint_above(bone_parent: np.ndarray, joint_bone: np.ndarray) -> np.ndarray:
    """(J,) int32: per joint the joint (row) whose bone is its bone's nearest ancestor among the
    joints' bones, -1 none. Joints are in bone order, so it is always an earlier row."""
    row = np.full(len(bone_parent), -1, np.int64)
    row[joint_bone] = np.arange(len(joint_bone))
    out = np.full(len(joint_bone), -1, np.int32)
    for j, b in enumerate(joint_bone.tolist()):
        p = int(bone_parent[b])
        while p >= 0 and row[p] < 0:
            p = int(bone_parent[p])
        out[j] = row[p] if p >= 0 else -1
    return out


class SpringWorld:
    """Spring bones of one Model (see module). ``SpringWorld(model, fixed_step=1/60)``."""

    def __init__(self, model, fixed_step: float = DEFAULT_SPRING_STEP, max_substeps: int = MAX_SPRING_SUBSTEPS,
                 **_ignored):
        sp = model.source_extras["vrm_springs"]
        self.springs = sp
        self.fixed_step = float(fixed_step)
        self.max_substeps = int(max_substeps)
        bone_position = np.asarray(model.bone_position, np.float64)
        d = np.asarray(sp.joint_tail, np.float64) - bone_position[sp.joint_bone]
        length = np.linalg.norm(d, axis=1)
        self._length = np.maximum(length, 1e-6)
        self._axis = np.where(length[:, None] > 1e-9, d / self._length[:, None], np.array([0.0, 1.0, 0.0]))
        self._anc = nearest_joint_above(np.asarray(model.bone_parent), sp.joint_bone)
        J = sp.num_joints
        self.tail_cur = np.zeros((J, 3))
        self.tail_prev = np.zeros((J, 3))
        self.joint_world = np.tile(np.eye(4), (J, 1, 1))
        self.driven_bone_mask = np.zeros(model.num_bones, bool)
        self.driven_bone_mask[sp.joint_bone] = True
        self._acc = 0.0
        self._initialized = False
        self.blowup_resets = 0
        self._step_args = self._args()

    def _args(self):
        sp = self.springs
        return (sp.joint_bone, self._anc, self._axis, self._length, sp.joint_chain, sp.joint_stiffness,
                sp.joint_drag, sp.joint_gravity_power, sp.joint_gravity_dir, sp.joint_hit_radius, sp.chain_center,
                sp.chain_collider_start, sp.chain_collider, sp.collider_bone, sp.collider_capsule,
                sp.collider_offset, sp.collider_tail, sp.collider_radius, self.tail_cur, self.tail_prev,
                self.joint_world)

    def reset(self, bone_world: np.ndarray, warmup_steps: int | None = None) -> None:
        """Tails at rest on the pose bone_world (B,4,4 float32), at rest, then ``warmup_steps``
        steps with the pose held (read only; ``pull_bones`` writes the joints)."""
        sp = self.springs
        spring_reset(bone_world, sp.joint_bone, self._anc, self._axis, self._length, sp.joint_chain,
                     sp.chain_center, self.tail_cur, self.tail_prev, self.joint_world)
        self._acc = 0.0
        if warmup_steps:
            spring_steps(int(warmup_steps), self.fixed_step, True, bone_world, *self._step_args)
        self._initialized = True

    def step(self, dt: float, bone_world: np.ndarray) -> int:
        """Advance ``dt`` seconds (whole fixed steps, the rest carried over) with bone_world's pose;
        writes the joints' rows of bone_world. Returns 0 (nothing is reset)."""
        if not self._initialized:
            self.reset(bone_world, 0)
        self._acc += max(0.0, float(dt))
        n = int(self._acc / self.fixed_step + 1e-9)
        self._acc -= n * self.fixed_step
        spring_steps(min(n, self.max_substeps), self.fixed_step, True, bone_world, *self._step_args)
        self.pull_bones(bone_world)
        return 0

    def pull_bones(self, bone_world: np.ndarray) -> None:
        """The joints' worlds into their rows of bone_world (B,4,4) float32."""
        write_joints(self.springs.joint_bone, self.joint_world, bone_world)

    def set_bone_physics(self, bone_mask: np.ndarray) -> None:
        """VMD per-key physics flags: spring joints have no rigid bodies to switch (no-op)."""

    @property
    def warnings(self) -> list[str]:
        return []

    def close(self) -> None:
        pass
