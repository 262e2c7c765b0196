"""Posed arrays in memory: the ``PoseArrays`` sink and ``pose(model, motion, frames)`` over it.

In: a LoadedTake's frames as the driver poses them. Out: ``PoseArrays.result`` (and ``pose``'s
return): frames (F,) float64 motion frames, bone_world (F,B,4,4) float32 model space (MMD
left-handed units), morph_weight (F,N) float32 after group/flip expansion, and with ``vertices``
vertex_position (F,V,3) float32 model space after morphs and skinning. Without physics and
vertices the driver fills it from the parallel batch poser.
"""

from __future__ import annotations

import numpy as np

from mmdkit.runtime.driver import Sink, run
from mmdkit.runtime.take import LoadedTake


class PoseArrays(Sink):
    """Keeps every output frame's bone matrices and morph weights (and skinned vertices)."""

    batch = True

    def __init__(self, vertices: bool = False):
        self.vertices = bool(vertices)
        self.geometry = self.vertices
        self.result: dict = {}

    def open(self, loaded) -> None:
        model, F = loaded.model, len(loaded.frames)
        self.result = {"frames": loaded.frames}
        if not self.batched:  # else the batch poser's arrays are handed over (``posed``)
            self.result.update(bone_world=np.empty((F, model.num_bones, 4, 4), np.float32),
                               morph_weight=np.empty((F, model.num_morphs), np.float32))
        if self.vertices:
            self.result["vertex_position"] = np.empty((F, model.num_vertices, 3), np.float32)
            self._normal = np.empty((model.num_vertices, 3), np.float32)

    def frame(self, i: int, characters) -> None:
        ch = characters[0]
        self.result["bone_world"][i] = ch.bone_world
        self.result["morph_weight"][i] = ch.morph_weight
        if self.vertices:
            ch.skin(self.result["vertex_position"][i], self._normal)

    def posed(self, bone_world: np.ndarray, morph_weight: np.ndarray, world_p, world_q) -> None:
        self.result["bone_world"], self.result["morph_weight"] = bone_world, morph_weight

    def close(self) -> dict:
        return {"frames": len(self.result["frames"])}


def pose(model, motion, frames, *, physics: bool = False, vertices: bool = False, progress: bool = False) -> dict:
    """Pose ``frames`` (numbers, in order) of ``motion`` (a Motion, a VPD Pose, or None: the rest
    pose) on ``model``; ``physics``: simulate the model's bodies (Bullet) frame by frame. Returns
    ``PoseArrays.result`` (see the module docstring)."""
    loaded = LoadedTake.of(model, motion, np.asarray(list(frames), np.float64), physics=bool(physics))
    sink = PoseArrays(vertices)
    run(loaded, [sink], progress=progress)
    return sink.result
