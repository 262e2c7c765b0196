"""Where the characters of a crowd stand and how far apart they play: one layout for every sink
(``mmdkit render --crowd N``, ``mmdkit view --crowd N``).

In: n characters, the box (lo, hi) (3,) one character fills (MMD model space: its motion's sweep,
or its rest pose: ``rest_box(model)``). Out: ``crowd_spacing(lo, hi)`` → grid step (MMD units); ``crowd_offsets(n,
spacing)`` → (n, 3) float32 model-space offsets, a grid, front row first, centred on x;
``CROWD_FRAME_OFFSET``: character k plays k × this many motion frames ahead of the first.
"""

from __future__ import annotations

import math

import numpy as np

CROWD_FRAME_OFFSET = 7.0
"""Motion frames between one character of a crowd and the next (they do not move in unison)."""


def rest_box(model) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) (3,) float64, model space: the box of the model's vertices in its rest pose (a model
    without a mesh: its bones' rest positions; zeros for an empty one)."""
    points = model.vertex_position if model.num_vertices else model.bone_position
    points = np.asarray(points, np.float64).reshape(-1, 3)
    return (points.min(0), points.max(0)) if len(points) else (np.zeros(3), np.zeros(3))


def crowd_spacing(lo, hi) -> float:
    """Grid step (MMD units) for characters that each fill the box ``lo``…``hi``: its larger floor
    extent, 1.3 times, plus 2 units."""
    return float(max(hi[0] - lo[0], hi[2] - lo[2]) * 1.3 + 2.0)


def crowd_offsets(n: int, spacing: float) -> np.ndarray:
    """(n, 3) grid positions, front row first, centred on x."""
    cols = max(1, math.ceil(math.sqrt(n)))
    out = []
    for i in range(n):
        r, c = divmod(i, cols)
        out.append(((c - (min(cols, n - r * cols) - 1) / 2) * spacing, 0.0, r * spacing))
    return np.array(out, np.float32)
