"""The physics policy of a character, in one place: when to reset, how far to step, which mode.

In: a physics ``world`` (``mmdkit.physics.MMDPhysics`` or anything with its ``reset``/``step``/
``set_bone_physics``/``driven_bone_mask``), the character's Rig, PoseState and bound motion.
Out: per frame, bone_world (B,4,4) float32 with the driven rows written by the world, and the
pose state's coupling (driven bones, IK solvers to skip) kept in step with the per-key flags.
Seek rule: the first frame, a step back, or a jump of more than MAX_STEP_FRAMES is a seek: the
bodies are put at the pose and the world is stepped ``settle_seconds`` (default
DEFAULT_SETTLE_SECONDS = 1.5 s) with the pose held, so a still, a preview of every 30th frame or
a clip starting mid-song shows hair and skirts hanging as they would, not the modelled rest shape.
Otherwise the world advances by the frames elapsed / fps seconds.
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.sampling import sample_bone_physics
from mmdkit.errors import OptionError

PHYSICS_MODES = ("playing", "always", "off")
"""MMD's modes: 'playing' simulates as frames advance (a repeated frame holds the bodies),
'always' keeps simulating on a repeated frame (paused playback), 'off' lets bones follow keys."""
MAX_STEP_FRAMES = 2.0
"""A forward jump of more than this many frames is a seek (the bodies are reset, not stepped)."""
DEFAULT_SETTLE_SECONDS = 1.5
"""Simulated seconds with the pose held after a seek: Gene's and mokou's hair, ribbons and skirts
stop swinging within 1–2 s (mokou at frame 600: driven bones 5.6 units from the no-physics pose,
a third closer to a run from frame 0 than without settling). ~0.1–0.2 s of CPU per seek."""
PHYSICS_STEP_FRAMES = 1.0
"""Largest gap between posed frames when an output must follow the simulation continuously
(``physics_frames``): bake/export pose in-between frames rather than let a jump become a seek."""


def physics_frames(frames: np.ndarray, max_step: float = PHYSICS_STEP_FRAMES) -> tuple[np.ndarray, np.ndarray]:
    """(frames to pose in order, (F,) indices of the given ones among them): gaps between the
    (F,) float64 ``frames`` wider than ``max_step`` get evenly spaced in-between frames, so the
    bodies are stepped through them instead of being reset by a seek."""
    if len(frames) < 2:
        return frames, np.arange(len(frames))
    gaps = np.diff(frames)
    sub = np.where((gaps > max_step), np.ceil(gaps / max_step), 1).astype(np.int64)
    sub[gaps <= 0] = 1
    out = [frames[:1]]
    for i, n in enumerate(sub):
        out.append(frames[i] + gaps[i] * np.arange(1, n + 1) / n)
    posed = np.concatenate(out)
    keep = np.concatenate(([0], np.cumsum(sub)))
    posed[keep] = frames  # exact values at the given ones
    return posed, keep




class Simulation:
    """Runs one character's physics world between the two bone passes (see module docstring)."""

    def __init__(self, world, rig, state, bound, *, fps: float, mode: str = "playing",
                 settle_seconds: float = DEFAULT_SETTLE_SECONDS):
        if mode not in PHYSICS_MODES:
            raise OptionError("physics_mode", f"must be one of {', '.join(PHYSICS_MODES)}, not {mode!r}")
        if not 0.0 <= settle_seconds <= 60.0:
            raise OptionError("settle_seconds", f"must be between 0 and 60, not {settle_seconds!r}")
        self.world = world
        self.mode = mode
        self.fps = float(fps)
        self.settle_seconds = float(settle_seconds)
        self._rig, self._state, self._bound = rig, state, bound
        self._bone_physics = np.ones(len(rig.bone_parent), bool)  # (B,) per-key VMD physics flags
        self._has_physics_keys = bool(len(bound.bone_key_physics)) and not bound.bone_key_physics.all()
        self._driven = np.zeros(len(rig.bone_parent), bool)
        if self.active:
            self._couple(world.driven_bone_mask)

    @property
    def active(self) -> bool:
        """True when a world runs between the bone passes (there is one and the mode is not 'off')."""
        return self.world is not None and self.mode != "off"

    def _couple(self, driven) -> None:
        self._driven = np.asarray(driven, bool).copy()
        self._state.set_driven(self._rig, self._driven)

    def advance(self, frame: float, previous: float | None, bone_world: np.ndarray) -> None:
        """Bring the world from ``previous`` (None: nothing simulated yet) to ``frame``: reset on a
        seek, else step; the driven rows of bone_world (B,4,4) float32 are then the world's."""
        delta = 0.0 if previous is None else frame - previous
        seek = previous is None or not (0.0 <= delta <= MAX_STEP_FRAMES)
        if delta == 0.0 and self.mode == "always":
            delta = 1.0  # paused: time goes on for the simulation
        if self._has_physics_keys:
            b = self._bound
            sample_bone_physics(frame, b.bone_key_start, b.bone_key_frame, b.bone_key_physics, self._bone_physics)
            self.world.set_bone_physics(self._bone_physics)
            if not np.array_equal(self._driven, self.world.driven_bone_mask):
                self._couple(self.world.driven_bone_mask)
        if seek:
            self.settle(bone_world)
        else:
            self.world.step(delta / self.fps, bone_world)

    def settle(self, bone_world: np.ndarray) -> None:
        """Bodies to the pose in bone_world (B,4,4) float32, zero velocity, then ``settle_seconds``
        of fixed steps with the pose held; the driven rows of bone_world are written from them."""
        steps = int(round(self.settle_seconds / self.world.fixed_step))
        self.world.reset(bone_world, steps)
        if steps:
            self.world.pull_bones(bone_world)
