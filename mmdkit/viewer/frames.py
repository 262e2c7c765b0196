"""Frames the viewer streams: bone transforms and morph weights, baked ahead in a background thread.

In: a ``Model``, a ``Motion`` (or None), the physics world (or None), ``scale`` (glTF units per
MMD unit). Out: ``FrameStore.rows(physics, start, count)`` → (count, stride) float32 rows, one per
motion frame, waiting until the bake has reached them. A row is, per bone b, its world position
(3) and rotation quaternion x y z w (4) in glTF space (z flipped, × scale), then the N morph
weights (the page maps them onto the GLB's morph targets).
Two bakes fill in turn, frame by frame, on one thread: with physics (``Character.update``, Bullet,
history from frame 0, as ``mmdkit.runtime.pose``) and without (keys, IK, append only).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from mmdkit.model.space import Space, quaternions_from_rotations
from mmdkit.runtime import STAGES, Character, numba_threads

BONE_FLOATS = 7
"""Floats per bone in a row: position x y z, quaternion x y z w (glTF space)."""

WAIT_SECONDS = 60.0
"""Longest a request waits for frames not baked yet."""


def gltf_bones(bone_world: np.ndarray, space: Space, out: np.ndarray | None = None) -> np.ndarray:
    """(B, 4, 4) MMD model-space bone (or body) frames → (B, 7) glTF position + quaternion x y z w,
    into ``out`` (any float dtype) or a new float64 array."""
    if out is None:
        out = np.empty((len(bone_world), BONE_FLOATS), np.float64)
    out[:, :3] = space.points(bone_world[:, :3, 3])
    out[:, 3:] = space.quaternions(quaternions_from_rotations(bone_world[:, :3, :3]))
    return out


class FrameStore:
    """Rows of ``num_frames`` motion frames (0, 1, …) for physics on and off, baked by ``start()``.

    num_frames, stride (floats per row), baked {True: n, False: n} frames done so far,
    stage_ms {stage: mean ms per frame} of the physics bake, error (str) if the bake failed.
    """

    def __init__(self, model, motion, physics, *, scale: float, num_frames: int):
        self.model, self.motion, self.physics_world = model, motion, physics
        self.space = Space(scale=scale, flip_z=True)
        self.num_frames = max(1, int(num_frames))
        self.stride = model.num_bones * BONE_FLOATS + model.num_morphs
        self._rows = {True: np.zeros((self.num_frames, self.stride), np.float32),
                      False: np.zeros((self.num_frames, self.stride), np.float32)}
        self.baked = {True: 0, False: 0}
        self.has_physics = physics is not None
        self.stage_ms = dict.fromkeys(STAGES[:-1], 0.0)
        self.bake_seconds = 0.0
        self.error = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._bake, name="mmdkit-viewer-bake", daemon=True)

    def start(self) -> "FrameStore":
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the bake (its characters and physics world are freed when its thread returns)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self.physics_world = None

    def _put(self, physics: bool, i: int, ch: Character) -> None:
        row, nb = self._rows[physics][i], self.model.num_bones
        gltf_bones(ch.bone_world, self.space, out=row[:nb * BONE_FLOATS].reshape(nb, BONE_FLOATS))
        row[nb * BONE_FLOATS:] = ch.morph_weight

    def _bake(self) -> None:
        try:
            with numba_threads(1):
                self._bake_frames()
        except Exception as e:  # shown on the page and in /state.json; the server keeps serving
            with self._cond:
                self.error = f"{type(e).__name__}: {e}"
                self._cond.notify_all()

    def _bake_frames(self) -> None:
        physics_world, self.physics_world = self.physics_world, None  # the bake thread owns it
        kinematic = Character(self.model, self.motion, None)
        kinematic.geometry = False
        simulated = Character(self.model, self.motion, physics_world) if self.has_physics else None
        del physics_world
        if simulated is not None:
            simulated.geometry = False
        sums = dict.fromkeys(self.stage_ms, 0.0)
        t0 = time.perf_counter()
        for i in range(self.num_frames):
            if self._stop.is_set():
                return
            kinematic.update(float(i))
            self._put(False, i, kinematic)
            if simulated is not None:
                simulated.update(float(i), timed=True)
                self._put(True, i, simulated)
                for k in sums:
                    sums[k] += simulated.stage_seconds.get(k, 0.0)
            with self._cond:
                self.baked[False] = i + 1
                self.baked[True] = i + 1 if simulated is not None else 0
                if simulated is not None:
                    self.stage_ms = {k: 1e3 * v / (i + 1) for k, v in sums.items()}
                self.bake_seconds = time.perf_counter() - t0
                self._cond.notify_all()

    def rows(self, physics: bool, start: int, count: int) -> np.ndarray:
        """(n, stride) float32 rows of frames start … start + n − 1 (n ≤ count, clipped to the
        motion), once baked; fewer (maybe none) if the bake failed or WAIT_SECONDS passed."""
        physics = bool(physics) and self.has_physics
        start = min(max(0, int(start)), self.num_frames - 1)
        end = min(self.num_frames, start + max(1, int(count)))
        with self._cond:
            self._cond.wait_for(lambda: self.baked[physics] >= end or self.error is not None or self._stop.is_set(),
                                timeout=WAIT_SECONDS)
            end = min(end, max(start, self.baked[physics]))
        return self._rows[physics][start:end]
