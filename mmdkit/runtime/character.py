"""A character: one (shared, read-only) Model + its own pose state, physics world and skinner.

In: ``Model``, optional ``Motion`` (or VPD ``Pose``), optional physics ``world``, optional shared
``Rig`` (``pose.rig.build_rig``; built here when not given) and ``CpuSkinner``. ``update(frame)`` runs ``mmdkit.pose.stages`` in MMD's order — sample → morphs →
bones before physics → physics (``Simulation``) → bones after physics — into the preallocated
``PoseState`` (``.state``); the properties below are views of it. Nothing is allocated per frame.
"""

from __future__ import annotations

import time

import numpy as np

from mmdkit.animation.binding import BoundMotion, bind_motion
from mmdkit.animation.frames import MOTION_FPS
from mmdkit.animation.motion import Pose
from mmdkit.animation.vpd import motion_from_pose
from mmdkit.pose.rig import MATERIAL_MORPH_CHANNELS, build_rig
from mmdkit.pose.stages import (BONES_AFTER_PHYSICS, BONES_BEFORE_PHYSICS, PHYSICS, SAMPLE, STAGES, frame_args,
                                motion_in, run_frame)
from mmdkit.pose.state import PoseState
from mmdkit.runtime.simulation import DEFAULT_SETTLE_SECONDS, Simulation

FPS = MOTION_FPS
"""Motion frames per second (VMD keys are at 30 fps)."""


def _state_view(name: str, doc: str) -> property:
    """A read-only property returning the pose state's array ``name``."""
    return property(lambda self: getattr(self.state, name), doc=doc)


class Character:
    """Model + motion + own pose state (+ physics, skinner). Many characters may share one Model.

    Character(model, motion=None, world=None, *, rig=None, fps=30, physics_mode='playing',
              settle_seconds=1.5, skinner=None)   world: a physics world (``physics.physics_for``)
              or None; rig, bound, skinner: a Rig, the motion bound to the model (``bind_motion``)
              and a CpuSkinner to share (crowds), else its own
    update(frame, timed=False)  pose at ``frame`` (fractional allowed); timed fills stage_seconds;
                                a seek settles physics (``Simulation``)
    bone_world, bone_skin (B,4,4) float32 model space; morph_weight (N,) float32;
    vertex_offset (V,3), uv_offset (V,4), additional_uv_offset (V,A,4) float32; ik_enabled (K,);
    visible (bool); material_* (M,...) after material morphs; skin(out_position, out_normal).
    geometry                    True (default): update computes the vertex/UV offsets and material
                                factors too; False leaves them (bones and morph weights only)
    """

    def __init__(self, model, motion=None, world=None, *, rig=None, bound=None, fps: float = FPS,
                 physics_mode: str = "playing", settle_seconds: float = DEFAULT_SETTLE_SECONDS, skinner=None):
        if isinstance(motion, Pose):
            motion = motion_from_pose(motion)
        self.model = model
        self.motion = motion
        self.rig = build_rig(model) if rig is None else rig
        self.bound: BoundMotion = bind_motion(model, motion) if bound is None else bound
        self.state = PoseState.for_rig(self.rig)
        self.simulation = Simulation(world, self.rig, self.state, self.bound, fps=fps, mode=physics_mode,
                                     settle_seconds=settle_seconds)
        self._motion_keys = motion_in(self.bound)
        self._args = self._args_coupling = None
        self._skinner = skinner
        self.geometry = True
        self.frame: float | None = None
        self.stage_seconds = dict.fromkeys(STAGES, 0.0)

    @property
    def world(self):
        """The physics world (None without physics)."""
        return self.simulation.world

    @property
    def physics_mode(self) -> str:
        return self.simulation.mode

    @property
    def fps(self) -> float:
        return self.simulation.fps

    @property
    def unbound(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(bone track names, morph track names) of the motion that matched nothing."""
        return self.bound.unbound_bones, self.bound.unbound_morphs

    # --- views of the pose state ---------------------------------------------------------
    bone_world = _state_view("bone_world", "(B,4,4) float32 model space, after both passes")
    bone_skin = _state_view("bone_skin", "(B,4,4) float32 = bone_world @ translate(-rest position)")
    morph_weight = _state_view("morph_weight", "(N,) float32 after group/flip expansion")
    vertex_offset = _state_view("vertex_offset", "(V,3) float32 summed vertex-morph offsets")
    uv_offset = _state_view("uv_offset", "(V,4) float32 summed UV-morph offsets")
    additional_uv_offset = _state_view("additional_uv_offset", "(V,A,4) float32 additional-UV morph offsets")
    ik_enabled = _state_view("ik_enabled", "(K,) uint8 IK solvers on this frame")

    @property
    def visible(self) -> bool:
        """False on frames where the motion's property keys hide the model (MMD's 表示 off)."""
        return bool(self.state.visible[0])

    def _material(self, name: str) -> np.ndarray:
        lo, hi = MATERIAL_MORPH_CHANNELS[name]
        return self.state.material_out[:, lo] if hi == lo + 1 else self.state.material_out[:, lo:hi]

    material_diffuse = property(lambda self: self._material("diffuse"), doc="(M,4) float32")
    material_specular = property(lambda self: self._material("specular"), doc="(M,3) float32")
    material_specular_power = property(lambda self: self._material("specular_power"), doc="(M,) float32")
    material_ambient = property(lambda self: self._material("ambient"), doc="(M,3) float32")
    material_edge_color = property(lambda self: self._material("edge_color"), doc="(M,4) float32")
    material_edge_size = property(lambda self: self._material("edge_size"), doc="(M,) float32")

    def material_tint(self, which: str):
        """(mul (M,4), add (M,4)) float64 for 'texture', 'sphere' or 'toon' after material morphs."""
        lo, hi = MATERIAL_MORPH_CHANNELS[which]
        return self.state.material_mul[:, lo:hi], self.state.material_add[:, lo:hi]

    # --- stages ----------------------------------------------------------------------------
    def _run(self, first: int, last: int, frame: float) -> None:
        s = self.state
        if self._args_coupling is not s.coupling:  # (re)built when the simulator's coupling changes
            r = self.rig
            self._args = frame_args(self._motion_keys, r.bone_in, r.ik_in, r.morph_in, s.coupling, s.bone_state,
                                     s.morph_state, s.morph_out, s.frame_out)
            self._args_coupling = s.coupling
        run_frame(first, last, frame, self.geometry, self._args)

    def update(self, frame: float, *, timed: bool = False) -> "Character":
        """Pose this character at ``frame`` (fractional allowed). See ``Simulation`` for seeks."""
        frame = float(frame)
        sim = self.simulation
        if timed:
            self._update_timed(frame)
        elif sim.active:
            self._run(SAMPLE, BONES_BEFORE_PHYSICS, frame)
            sim.advance(frame, self.frame, self.state.bone_world)
            self._run(BONES_AFTER_PHYSICS, BONES_AFTER_PHYSICS, frame)
        else:
            self._run(SAMPLE, BONES_AFTER_PHYSICS, frame)
        self.frame = frame
        return self

    def _update_timed(self, frame: float) -> None:
        """The same stages one call each, seconds per stage into ``stage_seconds``."""
        clock = time.perf_counter
        for stage in range(SAMPLE, BONES_AFTER_PHYSICS + 1):
            t0 = clock()
            if stage != PHYSICS:
                self._run(stage, stage, frame)
            elif self.simulation.active:
                self.simulation.advance(frame, self.frame, self.state.bone_world)
            self.stage_seconds[STAGES[stage]] = clock() - t0

    def skin(self, out_position: np.ndarray, out_normal: np.ndarray) -> None:
        """CPU-skin the current pose into caller-owned (V,3) float32 arrays (model space)."""
        if self._skinner is None:
            from mmdkit.skinning.cpu import CpuSkinner

            self._skinner = CpuSkinner(self.model)
        self._skinner.skin(self.state.bone_skin, self.state.vertex_offset, out_position, out_normal)
