"""Bake a motion through the full MMD pipeline into per-frame arrays every exporter reads.

In: ``Model``, ``Motion`` (VMD; a VPD ``Pose`` or None = one still pose), output frames (motion
frames, fractional allowed) or an output ``fps``, physics on/off. Out: ``BakedMotion`` — bone
world matrices and rotations, MMD-local bone translations/rotations (what a VMD key holds,
IK/append/physics included), morph weights. ``Bake`` is the frame loop's sink
(``mmdkit.runtime.driver``) that collects them, so the batch-or-frame-by-frame policy and the
physics seek/settle policy are the runtime's (``runtime.simulation.Simulation``: the first frame
puts the bodies on the pose and settles them ``settle_seconds`` with the pose held; a continuous
sink steps them through every motion frame between output frames).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from mmdkit.animation.frames import MOTION_FPS, check_fps, check_frames
from mmdkit.animation.frames import output_frames as frame_range
from mmdkit.animation.motion import Motion
from mmdkit.mathutil import qmul_scalar, qrot_scalar
from mmdkit.runtime.driver import Sink, run
from mmdkit.runtime.take import LoadedTake


@dataclass(frozen=True, eq=False)
class BakedMotion:
    """One run of the MMD pipeline, sampled at ``frames`` (F frames, B bones, N morphs, K IK).

    frames (F,) float64: motion frames (30 per second) of the samples; fps: output frames/second
    bone_world (F,B,4,4) float32 model space (MMD left-handed units), after physics
    bone_world_position (F,B,3) float64, bone_world_rotation (F,B,4) float64 (x,y,z,w) model space
    bone_local_translation (F,B,3) float64: parent-local translation minus the rest offset
    bone_local_rotation (F,B,4) float64: parent_world⁻¹ · world rotation (x,y,z,w) — together what
        a VMD key would hold for the bone to land where the pipeline put it (roots: model space)
    morph_weight (F,N) float32 after group/flip expansion
    bone_driven (B,) bool: bones whose world came from a physics body on some frame
    physics: bool, whether a physics world ran
    """

    model: object
    frames: np.ndarray
    fps: float
    bone_world: np.ndarray
    bone_world_position: np.ndarray
    bone_world_rotation: np.ndarray
    bone_local_translation: np.ndarray
    bone_local_rotation: np.ndarray
    morph_weight: np.ndarray
    bone_driven: np.ndarray
    physics: bool

    @property
    def num_frames(self) -> int:
        return len(self.frames)


def output_frames(motion, fps: float = MOTION_FPS, start: float = 0.0, end: float | None = None) -> np.ndarray:
    """(F,) float64 motion frames of output frames at ``fps`` from ``start`` to ``end`` (default: the
    motion's last key frame; 0 for a pose or no motion), inclusive (``animation.frames.output_frames``)."""
    if end is None:
        end = float(motion.last_frame) if isinstance(motion, Motion) else 0.0
    return frame_range(start, end, fps)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def local_from_world(parent, position, world_p, world_q, local_t_out, local_q_out):
    """MMD-local transforms from world ones: local_q = q_parent⁻¹ ⊗ q (both made unit), local_t =
    R_parent⁻¹ · (p − p_parent) − (rest − rest_parent) (roots: q and p − rest). parent (B,) int32, position
    (B,3) float64 rest; world_p (F,B,3), world_q (F,B,4) float64 model space → local_t_out (F,B,3),
    local_q_out (F,B,4) float64."""
    for f in prange(world_p.shape[0]):
        for b in range(world_p.shape[1]):
            p = parent[b]
            s = p if p >= 0 else b
            px, py, pz, pw = -world_q[f, s, 0], -world_q[f, s, 1], -world_q[f, s, 2], world_q[f, s, 3]
            dx = world_p[f, b, 0] - world_p[f, s, 0]
            dy = world_p[f, b, 1] - world_p[f, s, 1]
            dz = world_p[f, b, 2] - world_p[f, s, 2]
            rx = position[b, 0] - position[s, 0]
            ry = position[b, 1] - position[s, 1]
            rz = position[b, 2] - position[s, 2]
            qx, qy, qz, qw = world_q[f, b, 0], world_q[f, b, 1], world_q[f, b, 2], world_q[f, b, 3]
            if p < 0:
                px, py, pz, pw = 0.0, 0.0, 0.0, 1.0
                dx, dy, dz = world_p[f, b, 0], world_p[f, b, 1], world_p[f, b, 2]
                rx, ry, rz = position[b, 0], position[b, 1], position[b, 2]
            n = math.sqrt(px * px + py * py + pz * pz + pw * pw)  # the engine's worlds drift ~1e-5 off unit
            px, py, pz, pw = px / n, py / n, pz / n, pw / n
            n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
            qx, qy, qz, qw = qx / n, qy / n, qz / n, qw / n
            v = qrot_scalar(px, py, pz, pw, dx, dy, dz)
            q = qmul_scalar(px, py, pz, pw, qx, qy, qz, qw)
            if q[3] < 0.0:  # one hemisphere: neighbouring frames interpolate the short way
                q = (-q[0], -q[1], -q[2], -q[3])
            local_t_out[f, b, 0] = v[0] - rx
            local_t_out[f, b, 1] = v[1] - ry
            local_t_out[f, b, 2] = v[2] - rz
            for c in range(4):
                local_q_out[f, b, c] = q[c]


class Bake(Sink):
    """The driver's sink every exporter reads: each output frame's bone worlds (matrices, positions,
    rotations), morph weights and the bones physics drove, kept in arrays allocated at ``open`` (or
    handed over by the batch poser: ``posed``);
    ``close`` derives the MMD-local transforms and leaves the ``BakedMotion`` in ``baked``.
    ``on_frame(i, character)`` callbacks run after output frame i is posed (e.g. to skin and
    stream its vertices: those need frame by frame posing with geometry)."""

    batch = True
    continuous = True
    world_pq = True

    def __init__(self, on_frame=()):
        self.on_frame = tuple(on_frame)
        self.geometry = bool(self.on_frame)
        self.batch = not self.on_frame
        self.baked: BakedMotion | None = None

    def open(self, loaded) -> None:
        model, F = loaded.model, len(loaded.frames)
        B = model.num_bones
        self.model, self.frames, self.fps = model, loaded.frames, loaded.fps
        if not self.batched:
            self.bone_world = np.empty((F, B, 4, 4), np.float32)
            self.world_p = np.empty((F, B, 3))
            self.world_q = np.empty((F, B, 4))
            self.morph_weight = np.empty((F, model.num_morphs), np.float32)
        self.driven = np.zeros(B, bool)
        self.active = False

    def frame(self, i: int, characters) -> None:
        ch = characters[0]
        state = ch.state
        self.bone_world[i] = state.bone_world
        self.world_p[i] = state.bone_world_p
        self.world_q[i] = state.bone_world_q
        self.morph_weight[i] = state.morph_weight
        self.driven[state.bone_driven] = True
        self.active = ch.simulation.active
        for f in self.on_frame:
            f(i, ch)

    def posed(self, bone_world: np.ndarray, morph_weight: np.ndarray, world_p, world_q) -> None:
        self.bone_world, self.morph_weight, self.world_p, self.world_q = bone_world, morph_weight, world_p, world_q

    def close(self) -> dict:
        model, F, B = self.model, len(self.frames), self.model.num_bones
        local_t = np.empty((F, B, 3))
        local_q = np.empty((F, B, 4))
        local_from_world(np.asarray(model.bone_parent, np.int32), np.asarray(model.bone_position, np.float64),
                         self.world_p, self.world_q, local_t, local_q)
        self.baked = BakedMotion(model=model, frames=self.frames, fps=self.fps, bone_world=self.bone_world,
                                 bone_world_position=self.world_p, bone_world_rotation=self.world_q,
                                 bone_local_translation=local_t, bone_local_rotation=local_q,
                                 morph_weight=self.morph_weight, bone_driven=self.driven, physics=self.active)
        return {"frames": F}


def bake(model, motion=None, frames=None, *, fps: float = MOTION_FPS, physics: bool = True,
         progress: bool = False, on_frame=None) -> BakedMotion:
    """Run the pipeline over ``frames`` (motion frames in playing order; None: the whole motion at
    ``fps``, from 0) and return a ``BakedMotion``. ``physics``: simulate the model's bodies; the
    first frame settles them (``Simulation.settle``). ``on_frame(i, character)`` is called after
    output frame i is posed (e.g. to skin and stream its vertices)."""
    fps = check_fps(fps)
    frames = output_frames(motion, fps) if frames is None else check_frames(frames)
    loaded = LoadedTake.of(model, motion, frames, fps=fps, physics=bool(physics))
    sink = Bake(() if on_frame is None else (on_frame,))
    run(loaded, [sink], progress=progress, desc="baking")
    return sink.baked
