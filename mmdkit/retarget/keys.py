"""The retargeted pose as a ``Motion`` keyed on the target's own bones.

In: the target ``Model``, key frames (F,) int, the bones to key (K,) int with their local
translation (F,B,3) and rotation (F,B,4) float64 (parent-local, MMD units), the source ``Motion``
(its morph keys between the first and last key frame, on
morphs the target has, are copied) and the IK bones to switch off. Out: a frozen
``Motion`` (``animation.build.build_motion``): one linear key per bone and frame, the morph keys
whose names the target's morphs carry, and one property key at frame 0 switching off the IK
solvers the retarget could not key (``mmd.ik_keys``).
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.build import build_motion
from mmdkit.animation.curves import interpolation_block
from mmdkit.retarget.kernels import key_rows
from mmdkit.text import encode_cp932


def _names(names) -> dict:
    names = tuple(names)
    return dict(names=names, raw=tuple(encode_cp932(n) for n in names))


def _morphs(target, source_motion, frames) -> dict:
    own = set(target.morph_name)
    names = tuple(getattr(source_motion, "morph_track_name", ()) or ())
    keep = np.array([n in own for n in names], bool)
    track = np.asarray(source_motion.morph_key_track if names else np.zeros(0), np.int64)
    at = np.asarray(source_motion.morph_key_frame if names else np.zeros(0), np.int64)
    rows = keep[track] & (at >= frames[0]) & (at <= frames[-1]) if len(track) else np.zeros(0, bool)
    new_index = np.cumsum(keep) - 1
    kept = tuple(n for n, k in zip(names, keep) if k)
    n = _names(kept)
    return dict(morph_track_name=n["names"], morph_track_name_bytes=n["raw"],
                morph_key_track=(new_index[track[rows]] if len(track) else track).astype(np.int32),
                morph_key_frame=at[rows],
                morph_key_weight=np.asarray(source_motion.morph_key_weight if names else np.zeros(0), np.float32)[rows])


def _property(ik_off) -> dict:
    if not ik_off:
        return {}
    n = _names(ik_off)
    return dict(property_key_frame=np.zeros(1, np.int64), property_key_visible=np.ones(1, np.uint8),
                property_ik_name=n["names"], property_ik_name_bytes=n["raw"],
                property_ik_start=np.array([0, len(ik_off)], np.int32),
                property_ik_track=np.arange(len(ik_off), dtype=np.int32),
                property_ik_enabled=np.zeros(len(ik_off), np.uint8))


def build_keys(target, frames: np.ndarray, bones, local_t: np.ndarray, local_q: np.ndarray, source_motion,
               ik_off=()):
    """The Motion (see module); keys track by track, frames in order."""
    bones = [int(b) for b in bones]
    F, K = len(frames), len(bones)
    n = _names(target.bone_name[b] for b in bones)
    translation, rotation = np.empty((K * F, 3), np.float32), np.empty((K * F, 4), np.float32)
    key_rows(np.asarray(bones, np.int64), np.ascontiguousarray(local_t, np.float64),
             np.ascontiguousarray(local_q, np.float64), translation, rotation)
    fields = dict(model_name=target.name, model_name_bytes=encode_cp932(target.name),
                  bone_track_name=n["names"], bone_track_name_bytes=n["raw"],
                  bone_key_track=np.repeat(np.arange(K, dtype=np.int32), F),
                  bone_key_frame=np.tile(np.asarray(frames, np.int64), K),
                  bone_key_translation=translation, bone_key_rotation=rotation,
                  bone_key_interpolation=np.tile(interpolation_block(None), (K * F, 1)),
                  source_extras={"format": "retarget"})
    if source_motion is not None:
        fields.update(_morphs(target, source_motion, frames))
    fields.update(_property(list(ik_off)))
    return build_motion(fields)
