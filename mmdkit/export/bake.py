"""Bake a motion through the full MMD pipeline into per-frame arrays every exporter reads.

In: ``Model``, ``Motion`` (VMD; a VPD ``Pose`` or None = one still pose), output frames (motion
frames, fractional allowed) or an output ``fps``, physics on/off (or a world). Out: ``BakedMotion``
— bone world matrices and rotations, MMD-local bone translations/rotations (what a VMD key holds,
IK/append/physics included), morph weights. Physics runs through ``mmdkit.runtime.Character``, so
its seek/settle policy is the runtime's (``runtime.simulation.Simulation``: the first frame puts the
bodies on the pose and settles them ``settle_seconds`` with the pose held).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import get_num_threads, njit, prange

from mmdkit.animation.frames import MOTION_FPS, check_fps, check_frames
from mmdkit.animation.frames import output_frames as frame_range
from mmdkit.animation.motion import Motion
from mmdkit.mathutil import qfrom_matrix3_scalar, qmul_scalar, qrot_scalar
from mmdkit.runtime.simulation import physics_frames


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


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def world_from_matrices(bone_world, world_p_out, world_q_out):
    """world_p_out (F,B,3) / world_q_out (F,B,4) float64 from bone_world (F,B,4,4) float32 model
    space (rotation part → unit quaternion (x,y,z,w))."""
    for f in prange(bone_world.shape[0]):
        for b in range(bone_world.shape[1]):
            q = qfrom_matrix3_scalar(bone_world[f, b, 0, 0], bone_world[f, b, 0, 1], bone_world[f, b, 0, 2],
                                     bone_world[f, b, 1, 0], bone_world[f, b, 1, 1], bone_world[f, b, 1, 2],
                                     bone_world[f, b, 2, 0], bone_world[f, b, 2, 1], bone_world[f, b, 2, 2])
            for c in range(4):
                world_q_out[f, b, c] = q[c]
            for c in range(3):
                world_p_out[f, b, c] = bone_world[f, b, c, 3]


def _physics_world(model, physics):
    """A world from ``physics``: True/False → ``physics_for``, its Bullet worlds stepped on as many
    threads as numba may use (``numba.get_num_threads``; the batch runner lowers it per worker),
    the motion the same either way; None → off; else the world given."""
    if isinstance(physics, (bool, np.bool_)):
        from mmdkit.physics import physics_for

        return physics_for(model, bool(physics), threads=get_num_threads())
    return physics


def bake(model, motion=None, frames=None, *, fps: float = MOTION_FPS, physics=True,
         progress: bool = False, on_frame=None) -> BakedMotion:
    """Run the pipeline over ``frames`` (motion frames in playing order; None: the whole motion at
    ``fps``, from 0) and return a ``BakedMotion``. ``physics``: True/False, or a physics world
    (``mmdkit.physics.physics_for``) to use; the first frame settles it (``Simulation.settle``).
    ``on_frame(i, character)`` is called after output frame i is posed (e.g. to skin and stream
    its vertices)."""
    from mmdkit.runtime import Character

    fps = check_fps(fps)
    frames = output_frames(motion, fps) if frames is None else check_frames(frames)
    world = _physics_world(model, physics)
    F, B = len(frames), model.num_bones
    if world is None and on_frame is None:  # nothing needs history: the parallel batch poser
        from mmdkit.pose.batch import pose_batch

        bone_world, morph_weight = pose_batch(model, motion, frames)
        world_p, world_q = np.empty((F, B, 3)), np.empty((F, B, 4))
        world_from_matrices(bone_world, world_p, world_q)
        driven, active = np.zeros(B, bool), False
    else:
        ch = Character(model, motion, world)
        ch.geometry = on_frame is not None  # vertices (skinned per frame) need the morph offsets
        bone_world, world_p, world_q, morph_weight, driven = _run(ch, frames, progress, on_frame)
        active = ch.simulation.active
    local_t = np.empty((F, B, 3))
    local_q = np.empty((F, B, 4))
    local_from_world(np.asarray(model.bone_parent, np.int32), np.asarray(model.bone_position, np.float64), world_p,
                     world_q, local_t, local_q)
    return BakedMotion(model=model, frames=frames, fps=fps, bone_world=bone_world, bone_world_position=world_p,
                       bone_world_rotation=world_q, bone_local_translation=local_t, bone_local_rotation=local_q,
                       morph_weight=morph_weight, bone_driven=driven, physics=active)


def _run(ch, frames: np.ndarray, progress: bool, on_frame):
    """Pose character ``ch`` frame by frame (in-between frames simulated where physics needs them);
    returns bone_world (F,B,4,4) f32, world_p (F,B,3), world_q (F,B,4) f64, morph_weight (F,N) f32
    and the (B,) bool mask of bones physics drove."""
    posed, keep = physics_frames(frames) if ch.simulation.active else (frames, np.arange(len(frames)))
    F, B, N = len(frames), ch.model.num_bones, ch.model.num_morphs
    bone_world = np.empty((F, B, 4, 4), np.float32)
    world_p = np.empty((F, B, 3))
    world_q = np.empty((F, B, 4))
    morph_weight = np.empty((F, N), np.float32)
    driven = np.zeros(B, bool)
    record = np.zeros(len(posed), bool)
    record[keep] = True
    it = range(len(posed))
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="baking", unit="frame")
    i = 0
    state = ch.state
    for j in it:
        ch.update(posed[j])
        if record[j]:
            bone_world[i] = state.bone_world
            world_p[i] = state.bone_world_p
            world_q[i] = state.bone_world_q
            morph_weight[i] = state.morph_weight
            driven[state.bone_driven] = True
            if on_frame is not None:
                on_frame(i, ch)
            i += 1
    return bone_world, world_p, world_q, morph_weight, driven
