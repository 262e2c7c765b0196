"""MMD rigid-body physics on the real Bullet (C++ bridge ``mmdkit.physics._bullet``).

``MMDPhysics(model)`` builds one Bullet world from a Model's rigid bodies (R) and joints (J);
``step(dt, bone_world)`` reads bone world matrices (B,4,4) float32, steps, and writes back the
rows of bones driven by dynamic bodies.  MMD file coordinates throughout, gravity (0, -98, 0).
"""
from __future__ import annotations

import concurrent.futures

import numpy as np
from numba import njit

from mmdkit.errors import BuildError
from mmdkit.physics import _bullet

__all__ = ["MMDPhysics", "euler_to_matrix", "DEFAULT_FIXED_STEP", "DEFAULT_MAX_SUBSTEPS", "GRAVITY", "DEFAULT_WARMUP_STEPS"]

#: Fixed simulation step (seconds) and substep cap: saba's settings (MMD documents none).
DEFAULT_FIXED_STEP = 1.0 / 120.0
DEFAULT_MAX_SUBSTEPS = 10
GRAVITY = (0.0, -98.0, 0.0)
#: Fixed steps simulated with the bones held still after a reset (start/seek): 0.5 s at 1/120.
DEFAULT_WARMUP_STEPS = 60
#: Bodies farther than this from the origin (or non-finite) are reset to their bone.
BLOWUP_LIMIT = 1.0e4


def euler_to_matrix(euler: np.ndarray) -> np.ndarray:
    """(N,3) Euler radians as stored in PMX → (N,3,3) float64, MMD's order R = Ry·Rx·Rz."""
    e = np.asarray(euler, np.float64).reshape(-1, 3)
    cx, cy, cz = np.cos(e[:, 0]), np.cos(e[:, 1]), np.cos(e[:, 2])
    sx, sy, sz = np.sin(e[:, 0]), np.sin(e[:, 1]), np.sin(e[:, 2])
    n = len(e)
    rx = np.zeros((n, 3, 3)); ry = np.zeros((n, 3, 3)); rz = np.zeros((n, 3, 3))
    rx[:, 0, 0] = 1; rx[:, 1, 1] = cx; rx[:, 1, 2] = -sx; rx[:, 2, 1] = sx; rx[:, 2, 2] = cx
    ry[:, 1, 1] = 1; ry[:, 0, 0] = cy; ry[:, 0, 2] = sy; ry[:, 2, 0] = -sy; ry[:, 2, 2] = cy
    rz[:, 2, 2] = 1; rz[:, 0, 0] = cz; rz[:, 0, 1] = -sz; rz[:, 1, 0] = sz; rz[:, 1, 1] = cz
    return ry @ rx @ rz


def _frames(position, euler) -> np.ndarray:
    """(N,3) positions + (N,3) Euler → (N,4,4) float64 world frames T·R."""
    n = len(position)
    m = np.zeros((n, 4, 4))
    m[:, :3, :3] = euler_to_matrix(euler)
    m[:, :3, 3] = np.asarray(position, np.float64).reshape(n, 3)
    m[:, 3, 3] = 1
    return m


@njit(cache=True, nogil=True)
def _body_targets(bone_world, body_follow, body_offset, out):
    """out[r] = bone_world[body_follow[r]] @ body_offset[r] (identity bone when -1)."""
    for r in range(out.shape[0]):
        b = body_follow[r]
        if b < 0:
            for i in range(4):
                for j in range(4):
                    out[r, i, j] = body_offset[r, i, j]
            continue
        for i in range(4):
            for j in range(4):
                s = 0.0
                for k in range(4):
                    s += bone_world[b, i, k] * body_offset[r, k, j]
                out[r, i, j] = s


@njit(cache=True, nogil=True)
def _write_bones(body_world, drive_body, drive_bone, drive_mode, body_offset_inv, active, bone_world):
    """bone_world[bone] = body_world[r] @ inv(offset[r]) for driving bodies (mode 2 keeps translation)."""
    for d in range(drive_body.shape[0]):
        r = drive_body[d]
        if not active[r]:
            continue
        b = drive_bone[d]
        for i in range(3):
            for j in range(4):
                if drive_mode[d] == 2 and j == 3:
                    continue
                s = 0.0
                for k in range(4):
                    s += body_world[r, i, k] * body_offset_inv[r, k, j]
                bone_world[b, i, j] = s


class MMDPhysics:
    """One Bullet world for one Model.

    MMDPhysics(model, fixed_step=1/120, max_substeps=10, floor=False, soft_joints=False,
               solver_iterations=10, gravity=(0,-98,0), warmup_steps=60)
    reset(bone_world)           bodies to their bones' pose, zero velocity, warm-up steps
    step(dt, bone_world)        kinematic bodies follow bone_world (B,4,4) f32; after stepping the
                                rows of bones driven by dynamic bodies are overwritten in place
    step_async(dt, bone_world)  the same on this world's own worker thread → Future (.result())
    driven_bone_mask            (B,) bool, bones whose world comes from a body
    set_bone_physics(mask)      (B,) bool, False = that bone's bodies follow it kinematically
    warnings                    list of str (dropped joints, blow-up resets)
    soft_body_vertex[i], soft_body_positions(i)   PMX 2.1 soft bodies: model vertices and node positions
    ``soft_joints`` turns Bullet's 6-DOF frame offset off (closer to MMD's Bullet 2.75 softness).
    """

    def __init__(self, model, fixed_step: float = DEFAULT_FIXED_STEP, max_substeps: int = DEFAULT_MAX_SUBSTEPS,
                 floor: bool = False, soft_joints: bool = False, solver_iterations: int = 10,
                 gravity=GRAVITY, warmup_steps: int = DEFAULT_WARMUP_STEPS):
        self.fixed_step = float(fixed_step)
        self.warmup_steps = int(warmup_steps)
        self.max_substeps = int(max_substeps)
        self._build_warnings: list[str] = []
        self.blowup_resets = 0
        B = int(len(model.bone_name))
        R = int(len(model.rigid_body_name))
        J = int(len(model.joint_name))
        self.num_bones, self.num_bodies = B, R
        src = getattr(model, "path", "") or getattr(model, "name", "")

        def arr(name, dtype, shape):
            a = getattr(model, name)
            if a is None:
                return np.zeros(shape, dtype)
            return np.ascontiguousarray(np.asarray(a).reshape(shape), dtype)

        body_bone = arr("rigid_body_bone", np.int32, (R,))
        bad = np.nonzero((body_bone < -1) | (body_bone >= B))[0]
        if len(bad):
            raise BuildError(f"rigid body {bad[0]} refers to bone {body_bone[bad[0]]}, model has {B} bones",
                             path=str(src), section="rigid_body_bone")
        shape = arr("rigid_body_shape", np.int32, (R,))
        if R and (shape.min() < 0 or shape.max() > 2):
            r = int(np.nonzero((shape < 0) | (shape > 2))[0][0])
            raise BuildError(f"rigid body {r} has unknown shape {shape[r]}", path=str(src), section="rigid_body_shape")
        size = arr("rigid_body_size", np.float32, (R, 3))
        size = np.where(np.isfinite(size), size, 0).astype(np.float32)
        clamped = int(np.count_nonzero((size[:, 0] < 1e-3) | ((shape == 1)[:, None] & (size < 1e-3)).any(1)))
        if clamped:
            self._build_warnings.append(f"{clamped} rigid bodies with zero/negative size clamped to 0.001")
        size = np.maximum(size, 1e-3).astype(np.float32)
        mode = arr("rigid_body_mode", np.int32, (R,))
        self.body_mode = mode
        mass = arr("rigid_body_mass", np.float32, (R,))
        group = arr("rigid_body_group", np.int32, (R,))
        group_bit = (np.left_shift(1, np.clip(group, 0, 15))).astype(np.int32)
        # the stored mask says which groups a body collides with (0xFFFF all; a body's own group
        # is usually cleared), exactly Bullet's filter mask
        mask = (arr("rigid_body_collide_mask", np.int32, (R,)) & 0xFFFF).astype(np.int32)

        # Bind frames and offsets relative to the followed bone's rest (translate(bone_position)).
        body_bind = _frames(arr("rigid_body_position", np.float64, (R, 3)), arr("rigid_body_rotation", np.float64, (R, 3)))
        follow = np.where(body_bone >= 0, body_bone, 0 if B > 0 else -1).astype(np.int32)
        bone_pos = arr("bone_position", np.float64, (B, 3)) if B else np.zeros((0, 3))
        offset = body_bind.copy()
        has = follow >= 0
        offset[has, :3, 3] -= bone_pos[follow[has]]
        self._body_follow = follow
        self._body_offset = np.ascontiguousarray(offset, np.float32)
        self._body_offset_inv = np.ascontiguousarray(np.linalg.inv(offset), np.float32)

        drive = np.nonzero((mode != 0) & (body_bone >= 0))[0]
        self._drive_body = drive.astype(np.int32)
        self._drive_bone = body_bone[drive].astype(np.int32)
        self._drive_mode = mode[drive].astype(np.int32)
        self._static_driven = np.zeros(B, bool)
        self._static_driven[self._drive_bone] = True
        self.driven_bone_mask = self._static_driven.copy()
        self._body_active = (mode != 0)  # dynamic and currently simulated
        self._kinematic = ~self._body_active

        soft_records = tuple(getattr(model, "soft_bodies", ()) or ())
        self.world = _bullet.World(
            shape, size, mass, arr("rigid_body_linear_damping", np.float32, (R,)),
            arr("rigid_body_angular_damping", np.float32, (R,)), arr("rigid_body_friction", np.float32, (R,)),
            arr("rigid_body_restitution", np.float32, (R,)), group_bit, mask, self._kinematic.copy(),
            np.ascontiguousarray(body_bind, np.float32), bool(floor), np.asarray(gravity, np.float32),
            int(solver_iterations), bool(soft_records))

        # Joints.
        ja = arr("joint_body_a", np.int32, (J,))
        jb = arr("joint_body_b", np.int32, (J,))
        out_of_range = np.nonzero((ja < -1) | (ja >= R) | (jb < -1) | (jb >= R))[0]
        if len(out_of_range):
            j = int(out_of_range[0])
            raise BuildError(f"joint {j} refers to rigid bodies ({ja[j]}, {jb[j]}), model has {R} rigid bodies",
                             path=str(src), section="joint_body_a/joint_body_b")
        keep = (ja >= 0) & (jb >= 0) & (ja != jb)
        dropped = np.nonzero(~keep)[0]
        if len(dropped):
            names = model.joint_name
            self._build_warnings.append(
                f"{len(dropped)} joints dropped (missing body or A == B): "
                + ", ".join(repr(names[j]) if j < len(names) else str(j) for j in dropped[:8]))
        k = np.nonzero(keep)[0]
        self.joint_index = k.astype(np.int32)
        self.joint_body_a, self.joint_body_b = ja[k], jb[k]
        # for joint_reach: how far each kept joint's translation limits let its bodies drift apart
        self._joint_span = 2 * np.linalg.norm(np.maximum(np.abs(arr("joint_translation_lower", np.float64, (J, 3))[k]),
                                                         np.abs(arr("joint_translation_upper", np.float64, (J, 3))[k])),
                                              axis=1)
        self._body_bind_position = arr("rigid_body_position", np.float64, (R, 3))
        if len(k):
            jframe = _frames(arr("joint_position", np.float64, (J, 3))[k], arr("joint_rotation", np.float64, (J, 3))[k])
            self.joint_position = jframe[:, :3, 3].astype(np.float32)
            stiff = np.concatenate([arr("joint_spring_translation", np.float32, (J, 3))[k],
                                    arr("joint_spring_rotation", np.float32, (J, 3))[k]], 1)
            f32 = lambda x: np.ascontiguousarray(x, np.float32)
            self.world.add_joints(
                self.joint_body_a, self.joint_body_b, f32(jframe), f32(jframe),
                f32(arr("joint_translation_lower", np.float32, (J, 3))[k]),
                f32(arr("joint_translation_upper", np.float32, (J, 3))[k]),
                f32(arr("joint_rotation_lower", np.float32, (J, 3))[k]),
                f32(arr("joint_rotation_upper", np.float32, (J, 3))[k]),
                f32(stiff), world_frame=True, use_frame_offset=not soft_joints)
        else:
            self.joint_position = np.zeros((0, 3), np.float32)

        self.soft_body_vertex: list[np.ndarray] = []  # per soft body: (n,) int32 model vertex of each node
        self.soft_body_index: list[int] = []  # per soft body: index into model.soft_bodies
        for si, rec in enumerate(soft_records):
            self._add_pmx_soft_body(model, si, rec)

        self._all = np.arange(R, dtype=np.int32)
        self._targets = np.zeros((R, 4, 4), np.float32)
        self.body_world = np.zeros((R, 4, 4), np.float32)
        self._initialized = False
        self._executor = None

    def _add_pmx_soft_body(self, model, si, rec):
        """One PMX 2.1 soft body (tri-mesh over a material's faces) → Bullet soft body."""
        if rec.shape != 0:
            self._build_warnings.append(f"soft body {si} ({rec.name!r}): rope soft bodies are not supported, skipped")
            return
        start = np.asarray(model.material_face_start)
        faces = np.asarray(model.face_vertex_index)[start[rec.material]:start[rec.material + 1]]
        if len(faces) == 0:
            self._build_warnings.append(f"soft body {si} ({rec.name!r}): material {rec.material} has no faces, skipped")
            return
        used, local = np.unique(faces, return_inverse=True)
        local = local.reshape(-1, 3).astype(np.int32)
        verts = np.ascontiguousarray(np.asarray(model.vertex_position, np.float32)[used])
        k = self.world.add_soft_body(verts, local, mass=float(rec.total_mass), margin=float(rec.collision_margin),
                                     group=int(1 << (int(rec.group) & 15)),
                                     mask=int(rec.collide_mask) & 0xFFFF)
        self.world.configure_soft(k, np.asarray(rec.config, np.float32), np.asarray(rec.iteration, np.int32),
                                  np.asarray(rec.material_coef, np.float32),
                                  int(rec.b_link_distance) if rec.flags & 1 else 0,
                                  int(rec.cluster_count) if rec.flags & 2 else 0,
                                  float(rec.total_mass), float(rec.collision_margin), int(rec.aero_model))
        node_of = {int(v): i for i, v in enumerate(used)}
        for vx in rec.pins:
            if int(vx) in node_of:
                self.world.pin_soft_node(k, node_of[int(vx)])
        for rb, vx, _near in rec.anchors:
            if int(vx) in node_of and 0 <= int(rb) < self.num_bodies:
                self.world.anchor_soft_node(k, node_of[int(vx)], int(rb))
        self.soft_body_vertex.append(used.astype(np.int32))
        self.soft_body_index.append(si)

    def soft_body_positions(self, i: int) -> np.ndarray:
        """(n,3) float32 current node positions of soft body ``i`` (model vertices
        ``soft_body_vertex[i]``), model space."""
        return self.world.soft_node_positions(i)

    # ------------------------------------------------------------------------------------------
    @property
    def warnings(self) -> list[str]:
        w = list(self._build_warnings)
        if self.blowup_resets:
            w.append(f"{self.blowup_resets} rigid body resets after a blow-up (non-finite or beyond {BLOWUP_LIMIT:g})")
        return w

    def _check(self, bone_world):
        if not (isinstance(bone_world, np.ndarray) and bone_world.dtype == np.float32
                and bone_world.shape == (self.num_bones, 4, 4) and bone_world.flags.c_contiguous):
            raise ValueError(f"bone_world must be a C-contiguous ({self.num_bones},4,4) float32 array")

    def reset(self, bone_world: np.ndarray, warmup_steps: int | None = None) -> None:
        """Put every body at its bone's pose (B,4,4 f32) with zero velocity, then simulate
        ``warmup_steps`` fixed steps (default: the constructor's) with the bones held still.
        ``bone_world`` is only read; the next ``step`` writes the driven bones."""
        self._check(bone_world)
        _body_targets(bone_world, self._body_follow, self._body_offset, self._targets)
        self.world.reset(self._targets)
        n = self.warmup_steps if warmup_steps is None else int(warmup_steps)
        if n > 0:
            self.blowup_resets += self.world.step(n * self.fixed_step, n, self.fixed_step, BLOWUP_LIMIT)
        self.world.get_transforms_into(self.body_world)
        self._initialized = True

    def joint_reach(self, body_bind_position=None, stretch: float = 1.0, slack: float = 2.0):
        """Diagnostics: per kept joint, (distance between its two bodies now, the distance it may
        reach = (distance at bind + translation-limit span) × stretch + slack), both (J,) float64.
        Bind positions (R,3) default to the model's rigid body positions."""
        bind = self._body_bind_position if body_bind_position is None else np.asarray(body_bind_position, np.float64)
        a, b = self.joint_body_a, self.joint_body_b
        pos = self.body_world[:, :3, 3].astype(np.float64)
        now = np.linalg.norm(pos[a] - pos[b], axis=1)
        reach = (np.linalg.norm(bind[a] - bind[b], axis=1) + self._joint_span) * stretch + slack
        return now, reach

    def skinned_joint_mask(self, model) -> np.ndarray:
        """(J,) bool: kept joints whose two bodies both sit on bones that carry vertices (the
        ones whose stretch shows; helper bodies such as hanging weights are excluded)."""
        skinned = np.zeros(self.num_bones, bool)
        skinned[np.unique(np.asarray(model.vertex_bone_index)[np.asarray(model.vertex_bone_weight) > 0])] = True
        body_bone = np.asarray(model.rigid_body_bone)
        on = lambda bodies: (body_bone[bodies] >= 0) & skinned[np.maximum(body_bone[bodies], 0)]
        return on(self.joint_body_a) & on(self.joint_body_b)

    def set_bone_physics(self, bone_mask: np.ndarray) -> None:
        """(B,) bool per-bone physics flags: False makes that bone's bodies follow it kinematically."""
        m = np.asarray(bone_mask, bool).reshape(self.num_bones)
        follow_ok = np.where(self._body_follow >= 0, m[np.maximum(self._body_follow, 0)], True)
        active = (self.body_mode != 0) & follow_ok
        if np.array_equal(active, self._body_active):
            return
        self._body_active[:] = active
        self._kinematic[:] = ~active
        self.world.set_kinematic_flags(self._kinematic)
        self.driven_bone_mask[:] = False
        self.driven_bone_mask[self._drive_bone[active[self._drive_body]]] = True

    def step(self, dt: float, bone_world: np.ndarray) -> int:
        """Advance ``dt`` seconds; overwrite driven bones' rows of ``bone_world`` in place.

        Returns how many bodies were reset after blowing up this step.
        """
        self._check(bone_world)
        if not self._initialized:
            self.reset(bone_world, 0)
        _body_targets(bone_world, self._body_follow, self._body_offset, self._targets)
        self.world.set_kinematic_transforms(self._all, self._targets)
        bad = self.world.step(float(dt), self.max_substeps, self.fixed_step, BLOWUP_LIMIT)
        self.blowup_resets += bad
        self.world.get_transforms_into(self.body_world)
        _write_bones(self.body_world, self._drive_body, self._drive_bone, self._drive_mode,
                     self._body_offset_inv, self._body_active, bone_world)
        return bad

    def step_async(self, dt: float, bone_world: np.ndarray) -> concurrent.futures.Future:
        """``step`` on this world's own worker thread; don't touch ``bone_world`` until ``.result()``."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmdphysics")
        return self._executor.submit(self.step, dt, bone_world)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
