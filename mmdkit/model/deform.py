"""Per-vertex deform rules: which bone weights and slots each deform type really uses.

In: ``vertex_deform`` (V,) uint8 (``DEFORM_*``) and ``vertex_bone_weight`` (V, 4) float32 as stored.
Out: the weights every skinning path applies (BDEF1 = (1, 0, 0, 0); BDEF2 and SDEF = (w, 1 − w,
0, 0); BDEF4 and QDEF as stored) and the mask of bone slots those paths read. The one home of
these rules for CPU skinning, bone boxes, palette batches and the model builder.
"""

from __future__ import annotations

import numpy as np

from mmdkit.model.model import DEFORM_BDEF1, DEFORM_BDEF2, DEFORM_SDEF

__all__ = ["effective_weights", "used_slots"]


def effective_weights(vertex_deform, vertex_bone_weight) -> np.ndarray:
    """(V,) uint8 deform types, (V, 4) float32 stored weights → (V, 4) float32 weights as applied
    (a new array): BDEF1 → (1, 0, 0, 0); BDEF2/SDEF → (w0, 1 − w0, 0, 0); BDEF4/QDEF unchanged."""
    d = np.asarray(vertex_deform)
    w = np.array(vertex_bone_weight, np.float32, copy=True).reshape(len(d), 4)
    w[d == DEFORM_BDEF1] = (1.0, 0.0, 0.0, 0.0)
    two = (d == DEFORM_BDEF2) | (d == DEFORM_SDEF)
    w[two, 1] = np.float32(1.0) - w[two, 0]
    w[two, 2:] = 0.0
    return w


def used_slots(vertex_deform, vertex_weight) -> np.ndarray:
    """(V,) uint8 deform types, (V, 4) float32 weights from ``effective_weights`` → (V, 4) bool:
    the bone slots skinning reads — slots with a non-zero weight, slot 0 of BDEF1, slots 0 and 1
    of SDEF (its rotation blend reads both bones whatever the weight)."""
    d = np.asarray(vertex_deform)
    used = np.asarray(vertex_weight) != 0
    used[d == DEFORM_BDEF1, 0] = True
    used[d == DEFORM_SDEF, :2] = True
    return used
