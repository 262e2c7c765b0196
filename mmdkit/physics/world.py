"""``MMDPhysics``: one Bullet world (C++ bridge ``mmdkit.physics._bullet``) for one Model.

In: a ``Model`` once (through ``setup.body_setup``/``joint_setup`` and ``soft.add_soft_bodies``),
then per frame bone_world (B, 4, 4) float32 model space. Out: the same array with the rows of
bones driven by dynamic bodies overwritten; body_world (R, 4, 4) float32. State: the Bullet world
(body poses, velocities, the substep accumulator) and which bodies are dynamic now. A frame is one
call into the bridge (bones → bodies, Bullet's fixed steps, bodies → bones) with the GIL released.
MMD file coordinates throughout, gravity (0, -98, 0).
"""

from __future__ import annotations

import concurrent.futures

import numpy as np

from mmdkit.errors import OptionError
from mmdkit.physics import _bullet
from mmdkit.physics.setup import (BLOWUP_SIZES, DEFAULT_FIXED_STEP, DEFAULT_MAX_SUBSTEPS, DEFAULT_WARMUP_STEPS,
                                  GRAVITY, PHYSICS_WORLDS, BodySetup, JointSetup, body_partition, body_setup, joint_setup,
                                  mesh_linked_bones, model_size, subset_bodies, subset_joints)
from mmdkit.physics.soft import add_soft_bodies

__all__ = ["MMDPhysics", "JOINT_SOLVERS"]

JOINT_SOLVERS = ("mmd", "bullet")


def _new_world(bodies: BodySetup, kinematic, floor: bool, gravity, solver_iterations: int, soft: bool):
    """A Bullet world holding ``bodies`` at their bind frames (kinematic where ``kinematic``)."""
    b = bodies
    return _bullet.World(
        b.body_shape, b.body_size, b.body_mass, b.body_linear_damping, b.body_angular_damping, b.body_friction,
        b.body_restitution, b.body_group_bit, b.body_collide_mask, kinematic.copy(),
        np.ascontiguousarray(b.body_bind, np.float32), bool(floor), np.asarray(gravity, np.float32),
        int(solver_iterations), bool(soft))


def _couple(world, bodies: BodySetup, num_bones: int) -> None:
    """Tell the world which bone each body follows and which bones dynamic bodies drive."""
    b = bodies
    i32 = lambda a: np.ascontiguousarray(a, np.int32)
    f32 = lambda a: np.ascontiguousarray(a, np.float32)
    world.set_coupling(i32(b.body_follow), f32(b.body_offset), i32(b.drive_body), i32(b.drive_bone),
                       i32(b.drive_mode), f32(b.body_offset_inv), int(num_bones))


def _add_joints(world, joints: JointSetup, solver: str, stop_erp: float) -> None:
    """The kept joints as 6-DOF spring constraints, frames given in world space at bind; solver
    'mmd' = as Bullet 2.75 solved them (no frame offset, 2.75's lever arm), 'bullet' = Bullet 3's."""
    j = joints
    if len(j.joint_index):
        world.add_joints(j.joint_body_a, j.joint_body_b, j.joint_frame, j.joint_frame,
                         j.joint_translation_lower, j.joint_translation_upper,
                         j.joint_rotation_lower, j.joint_rotation_upper, j.joint_stiffness,
                         world_frame=True, use_frame_offset=solver == "bullet", stop_erp=stop_erp,
                         lever_arm_275=solver == "mmd")


class _Part:
    """One Bullet world of an ``MMDPhysics``: the bodies ``body`` ((n,) int64 ascending into the
    model's R bodies; None when it holds all of them) with the joints between them, and its own
    (n,4,4) float32 ``body_target``/``body_world`` (the character's own arrays when it holds all
    bodies, else gathered into them when they are read)."""

    def __init__(self, phys, index, floor, gravity, solver_iterations, soft, joint_solver, stop_erp):
        R = len(phys.body_mode)
        whole = len(index) == R
        self.body = None if whole else index
        bodies = phys.bodies if whole else subset_bodies(phys.bodies, index)
        joints = phys.joints if whole else subset_joints(phys.joints, index, R)
        self.world = _new_world(bodies, phys.body_kinematic[index], floor, gravity, solver_iterations, soft)
        _add_joints(self.world, joints, joint_solver, stop_erp)
        _couple(self.world, bodies, phys.num_bones)
        self.body_target = phys._body_target if whole else np.zeros((len(index), 4, 4), np.float32)
        self.body_world = phys._body_world if whole else np.zeros((len(index), 4, 4), np.float32)


class MMDPhysics:
    """One Bullet world for one Model.

    MMDPhysics(model, fixed_step=1/120, max_substeps=10, floor=False, joint_solver="mmd",
               solver_iterations=10, gravity=(0,-98,0), warmup_steps=60, joint_stop_erp=0, threads=1)
    reset(bone_world)           bodies to their bones' pose, zero velocity, warm-up steps
    step(dt, bone_world)        kinematic bodies follow bone_world (B,4,4) f32; after stepping the
                                rows of bones driven by dynamic bodies are overwritten in place
                                (= push_targets, simulate, pull_bones, in one call)
    step_async(dt, bone_world)  the same on this world's own worker thread → Future (.result())
    driven_bone_mask            (B,) bool, bones whose world comes from a body
    set_bone_physics(mask)      (B,) bool, False = that bone's bodies follow it kinematically
    warnings                    list of str (dropped joints, replaced non-finite values, blow-up resets)
    blowup_distance             bodies farther than this from where their bones put them (or
                                non-finite) are put back there after a step: BLOWUP_SIZES × model size
    bodies, joints              the ``setup.BodySetup`` / ``setup.JointSetup`` it was built from
    body_target, body_world     (R,4,4) float32 model space: where bones put the bodies / where they are
    soft_body_vertex[i], soft_body_positions(i)   PMX 2.1 soft bodies: model vertices and node positions
    ``joint_solver``: 'mmd' (default) solves the 6-DOF spring joints as MMD's Bullet 2.75 did (no
    frame offset; a linear limit's lever arm on body A from frame A — Bullet 2.76+ took frame B's,
    which lets long locked chains such as mokou_B's side hair pull apart); 'bullet' = Bullet 3's
    own (frame offset on). ``joint_stop_erp`` > 0 sets the joints' error reduction at their limits
    on all six axes (Bullet's default 0.2; three.js and babylon-mmd use 0.475).
    Bodies that never meet (no joint, no collision pair) are dealt into ``setup.PHYSICS_WORLDS``
    Bullet worlds (``setup.body_partition``; one world when the model does not split or has soft
    bodies, and then ``world`` is it): ``threads`` ≥ 2 steps two worlds side by side, the second
    on a thread the first keeps, in one bridge call with the GIL released. The motion is the same
    for any ``threads``; ``threads`` after building says how many are used (1 or 2).
    """

    def __init__(self, model, fixed_step: float = DEFAULT_FIXED_STEP, max_substeps: int = DEFAULT_MAX_SUBSTEPS,
                 floor: bool = False, joint_solver: str = "mmd", solver_iterations: int = 10,
                 gravity=GRAVITY, warmup_steps: int = DEFAULT_WARMUP_STEPS, joint_stop_erp: float = 0.0,
                 threads: int = 1):
        if joint_solver not in JOINT_SOLVERS:
            raise OptionError("joint_solver", f"must be one of {', '.join(JOINT_SOLVERS)}, not {joint_solver!r}")
        self.fixed_step = float(fixed_step)
        self.warmup_steps = int(warmup_steps)
        self.max_substeps = int(max_substeps)
        self.blowup_resets = 0
        self.blowup_distance = BLOWUP_SIZES * model_size(model)
        self.bodies = body_setup(model)
        self.joints = joint_setup(model)
        self.num_bones = int(len(model.bone_name))
        self.num_bodies = R = int(len(model.rigid_body_name))
        self.body_mode = self.bodies.body_mode
        self.driven_bone_mask = self.bodies.bone_driven.copy()
        self.body_active = self.body_mode != 0  # dynamic and currently simulated
        self.body_kinematic = ~self.body_active
        soft = bool(tuple(getattr(model, "soft_bodies", ()) or ()))
        threads = int(threads)
        if threads < 1:
            raise OptionError("threads", f"must be 1 or more, not {threads}")
        split = [np.arange(R)] if soft else body_partition(self.bodies, self.joints, PHYSICS_WORLDS)
        self._body_target = np.zeros((R, 4, 4), np.float32)
        self._body_world = np.zeros((R, 4, 4), np.float32)
        self._parts = [_Part(self, index, floor, gravity, solver_iterations, soft, joint_solver,
                             float(joint_stop_erp)) for index in split]
        self.world = self._parts[0].world  # the world, when there is one (always with soft bodies)
        self.threads = min(threads, len(self._parts), 2)
        self.joint_index = self.joints.joint_index
        self.joint_body_a, self.joint_body_b = self.joints.joint_body_a, self.joints.joint_body_b
        self.joint_position = self.joints.joint_position
        self.soft_body_vertex, self.soft_body_index, soft_warnings = add_soft_bodies(self.world, model, R)
        self._build_warnings = self.bodies.warnings + self.joints.warnings + soft_warnings
        self._initialized = False
        self._executor = None

    def _gathered(self, name: str) -> np.ndarray:
        """The character's (R,4,4) array ``name`` with every world's rows copied in (nothing to copy
        with one world: it writes the array itself)."""
        out = getattr(self, "_" + name)
        for p in self._parts:
            if p.body is not None:
                out[p.body] = getattr(p, name)
        return out

    body_target = property(lambda self: self._gathered("body_target"),
                           doc="(R,4,4) float32 model space: where the bones put the bodies (last push)")
    body_world = property(lambda self: self._gathered("body_world"),
                          doc="(R,4,4) float32 model space: where the bodies are (last step or reset)")

    def soft_body_positions(self, i: int) -> np.ndarray:
        """(n,3) float32 current node positions of soft body ``i`` (model vertices
        ``soft_body_vertex[i]``), model space."""
        return self.world.soft_node_positions(i)

    @property
    def warnings(self) -> list[str]:
        w = list(self._build_warnings)
        if self.blowup_resets:
            w.append(f"{self.blowup_resets} body resets after a blow-up (non-finite, or farther than "
                     f"{self.blowup_distance:g} units from where its bone puts it)")
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
        self.push_targets(bone_world)
        for p in self._parts:
            p.world.reset(p.body_target)
        n = self.warmup_steps if warmup_steps is None else int(warmup_steps)
        if n > 0:
            self.blowup_resets += self._side_by_side(n * self.fixed_step, n)
        for p in self._parts:
            p.world.get_transforms_into(p.body_world)
        self._initialized = True

    def joint_reach(self, body_bind_position=None, stretch: float = 1.0, slack: float = 2.0):
        """Diagnostics: per kept joint, (distance between its two bodies now, the distance it may
        reach = (distance at bind + translation-limit span) × stretch + slack), both (J,) float64.
        Bind positions (R,3) default to the model's rigid body positions."""
        bind = self.bodies.body_bind[:, :3, 3] if body_bind_position is None \
            else np.asarray(body_bind_position, np.float64)
        a, b = self.joint_body_a, self.joint_body_b
        pos = self.body_world[:, :3, 3].astype(np.float64)
        now = np.linalg.norm(pos[a] - pos[b], axis=1)
        reach = (np.linalg.norm(bind[a] - bind[b], axis=1) + self.joints.joint_span) * stretch + slack
        return now, reach

    def skinned_joint_mask(self, model) -> np.ndarray:
        """(J,) bool: kept joints whose two bodies both sit on bones that carry vertices (the
        ones whose stretch shows; helper bodies such as hanging weights are excluded)."""
        skinned = np.zeros(self.num_bones, bool)
        skinned[np.unique(np.asarray(model.vertex_bone_index)[np.asarray(model.vertex_bone_weight) > 0])] = True
        body_bone = self.bodies.body_bone
        on = lambda bodies: (body_bone[bodies] >= 0) & skinned[np.maximum(body_bone[bodies], 0)]
        return on(self.joint_body_a) & on(self.joint_body_b)

    def visible_joint_mask(self, model) -> np.ndarray:
        """(J,) bool: skinned joints (``skinned_joint_mask``) whose two bones the mesh joins
        (``setup.mesh_linked_bones``): where a stretch opens a visible tear. Cross-links between
        strands and pins such as mokou's head-to-hair-tip joints are not among them."""
        linked = mesh_linked_bones(model)
        bone_a = np.maximum(self.bodies.body_bone[self.joint_body_a], 0)
        bone_b = np.maximum(self.bodies.body_bone[self.joint_body_b], 0)
        return self.skinned_joint_mask(model) & linked[bone_a, bone_b]

    def set_bone_physics(self, bone_mask: np.ndarray) -> None:
        """(B,) bool per-bone physics flags: False makes that bone's bodies follow it kinematically."""
        m = np.asarray(bone_mask, bool).reshape(self.num_bones)
        follow = self.bodies.body_follow
        follow_ok = np.where(follow >= 0, m[np.maximum(follow, 0)], True)
        active = (self.body_mode != 0) & follow_ok
        if np.array_equal(active, self.body_active):
            return
        self.body_active[:] = active
        self.body_kinematic[:] = ~active
        for p in self._parts:
            p.world.set_kinematic_flags(self.body_kinematic if p.body is None else self.body_kinematic[p.body])
        self.driven_bone_mask[:] = False
        self.driven_bone_mask[self.bodies.drive_bone[active[self.bodies.drive_body]]] = True

    def push_targets(self, bone_world: np.ndarray) -> None:
        """Bodies' targets from bone_world (B,4,4) f32; kinematic bodies move there over the next step."""
        for p in self._parts:
            p.world.set_bones(bone_world, p.body_target)

    def simulate(self, dt: float) -> int:
        """Advance Bullet ``dt`` seconds in fixed steps; returns how many bodies were reset after a
        blow-up (non-finite, or farther than ``blowup_distance`` from their targets)."""
        bad = self._side_by_side(float(dt), self.max_substeps)
        self.blowup_resets += bad
        return bad

    def _side_by_side(self, dt: float, max_substeps: int) -> int:
        """Step every world ``dt`` seconds (two on two threads: the second on the first's worker
        thread, in one bridge call); the blow-up resets summed."""
        args = dt, max_substeps, self.fixed_step, self.blowup_distance
        if self.threads == 2:
            return self._parts[0].world.step_beside(self._parts[1].world, *args)
        return sum(p.world.step(*args) for p in self._parts)

    def pull_bones(self, bone_world: np.ndarray) -> None:
        """Read the bodies back (``body_world``) and overwrite the driven rows of bone_world in place."""
        for p in self._parts:
            p.world.pull_bones(bone_world, p.body_world)

    def step(self, dt: float, bone_world: np.ndarray) -> int:
        """Advance ``dt`` seconds; overwrite driven bones' rows of ``bone_world`` in place.

        Returns how many bodies were reset after blowing up this step.
        """
        self._check(bone_world)
        if not self._initialized:
            self.reset(bone_world, 0)
        args = float(dt), self.max_substeps, self.fixed_step, self.blowup_distance
        if len(self._parts) == 1:  # one call: targets, steps, bones
            bad = self.world.step_bones(*args, bone_world, self._body_target, self._body_world)
        elif self.threads == 2:  # one call, the second world on the first's worker thread
            a, b = self._parts
            bad = a.world.step_bones_beside(b.world, *args, bone_world, a.body_target, a.body_world,
                                            b.body_target, b.body_world)
        else:  # every world reads its targets before any writes a bone (a body may follow a bone
            # that a body of another world drives)
            self.push_targets(bone_world)
            bad = self._side_by_side(float(dt), self.max_substeps)
            self.pull_bones(bone_world)
        self.blowup_resets += bad
        return bad

    def step_async(self, dt: float, bone_world: np.ndarray) -> concurrent.futures.Future:
        """``step`` on this world's own worker thread; don't touch ``bone_world`` until ``.result()``."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmdphysics")
        return self._executor.submit(self.step, dt, bone_world)

    def close(self) -> None:
        """Stop this world's worker thread (if ``step_async`` started one)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
