"""What the automatic camera frames: the space a character's motion sweeps, not its rest pose.

In: a Model, a Motion (or None: the rest pose), the motion frames (F,) to be rendered, and the
crowd offsets (N, 3) float32. Out: ``motion_box`` → (lo, hi) (3,) float64, model space (MMD
units, left-handed): each bone's box around the vertices it carries most
(``skinning.bounds.BoneBoxes``), posed without physics at up to ``samples`` of the frames spread
evenly (first and last included), over every crowd position (a model without a mesh: its bones).
"""

from __future__ import annotations

import numpy as np

from mmdkit.retarget import humanoid_map
from mmdkit.runtime import Character
from mmdkit.runtime.crowd import rest_box
from mmdkit.skinning.bounds import BoneBoxes

#: Frames posed at most to find the box (evenly spread over the rendered ones).
FRAMING_SAMPLES = 96


def facing_yaw(model) -> float:
    """Degrees to turn the automatic camera about the vertical so it sees the character's front: 0
    for MMD's convention (facing −Z: the left leg at +x), 180 for a character facing +Z (VRM 0.x),
    read from its humanoid legs (0 without them)."""
    hmap = humanoid_map(model)
    left, right = hmap["leftUpperLeg"], hmap["rightUpperLeg"]
    if left < 0 or right < 0:
        return 0.0
    pos = np.asarray(model.bone_position, np.float64)
    return 180.0 if pos[left, 0] < pos[right, 0] else 0.0


def sample_frames(frames, samples: int = FRAMING_SAMPLES) -> np.ndarray:
    """(≤ samples,) float64: ``frames`` thinned evenly, first and last kept."""
    frames = np.asarray(frames, np.float64)
    if len(frames) <= samples:
        return frames
    return frames[np.unique(np.linspace(0, len(frames) - 1, samples).round().astype(np.int64))]


def motion_box(model, motion, frames, offsets=None, samples: int = FRAMING_SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) (3,) float64: the box the character (every crowd member) fills over ``frames``."""
    if model.num_vertices:
        boxes = BoneBoxes(model)  # per bone, its vertices' box in the bone's rest frame
        bones = np.flatnonzero(boxes.valid)
        rest_center = np.asarray(boxes.rest_center, np.float64)[bones]  # (K, 3) from the bone
        half = np.asarray(boxes.half_extent, np.float64)[bones]  # (K, 3)
    else:  # a bare skeleton: its bones' positions
        bones = np.arange(model.num_bones)
        rest_center = half = np.zeros((model.num_bones, 3))
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    if motion is not None and len(bones):
        ch = Character(model, motion)
        ch.geometry = False  # bones only
        for frame in sample_frames(frames, samples):
            world = np.asarray(ch.update(frame).bone_world, np.float64)[bones]
            rot = world[:, :3, :3]
            center = np.einsum("kij,kj->ki", rot, rest_center) + world[:, :3, 3]
            reach = np.einsum("kij,kj->ki", np.abs(rot), half)  # the posed box's world half size
            ok = np.isfinite(center).all(1) & np.isfinite(reach).all(1)
            if ok.any():
                lo = np.minimum(lo, (center - reach)[ok].min(0))
                hi = np.maximum(hi, (center + reach)[ok].max(0))
    if not (lo <= hi).all():  # no motion (or nothing posed): the rest pose
        lo, hi = rest_box(model)
    if offsets is not None and len(offsets):
        off = np.asarray(offsets, np.float64)
        lo, hi = lo + off.min(0), hi + off.max(0)
    return lo, hi
