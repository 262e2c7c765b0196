"""VPD poses as motions: a pose on its own, or loaded onto a motion at a frame (blended).

In: ``Pose`` (from a .vpd), optionally a ``Model`` + ``Motion`` + frame + weight.
Out: a ``Motion`` the normal pipeline poses (``Character``, ``pose``, ``mmdkit pose/render``).

``motion_from_pose``: one key per bone/morph at frame 0 — bones the pose does not name stay at
rest. ``apply_pose`` is what MMD does when a pose is loaded onto an animated model and then
registered: the bones (and morphs) the pose names get a key at ``frame``; every other bone keeps
the motion. ``weight`` blends between the motion's value at that frame (0) and the pose (1):
translation and morph weight linearly, rotation by slerp. New keys use MMD's default linear
curves; a key the motion already had on that frame for the same bone is replaced.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mmdkit.animation.binding import bind_motion, match_tracks
from mmdkit.animation.build import build_motion, unit_quaternions
from mmdkit.animation.builder import MotionBuilder
from mmdkit.animation.curves import interpolation_block
from mmdkit.animation.motion import Motion, Pose
from mmdkit.animation.sampling import sample_bone_tracks, sample_scalars
from mmdkit.errors import BuildError
from mmdkit.mathutil import qslerp_scalar
from mmdkit.text import encode_cp932


def binding_report(model, motion):
    """How ``motion`` (a Motion, a VPD Pose or None) binds to ``model``: its ``BindingReport``."""
    return bind_motion(model, motion_from_pose(motion) if isinstance(motion, Pose) else motion).report()


def motion_from_pose(pose: Pose) -> Motion:
    """A one-key-per-bone Motion at frame 0 from a VPD ``Pose`` (so the normal pipeline poses it)."""
    mb = MotionBuilder(model_name=pose.model_name)
    for i, name in enumerate(pose.bone_name):
        mb.add_bone_key(name, 0, translation=tuple(pose.bone_translation[i]),
                        rotation=tuple(pose.bone_rotation[i]))
    for i, name in enumerate(pose.morph_name):
        mb.add_morph_key(name, 0, float(pose.morph_weight[i]))
    return mb.build()


def _grow_tracks(names, raw, new_names):
    """Track indices for ``new_names`` (reusing equal names) and the grown name tables."""
    names, raw = list(names), list(raw)
    index = {n: i for i, n in enumerate(names)}
    out = []
    for n in new_names:
        if n not in index:
            index[n] = len(names)
            names.append(n)
            raw.append(encode_cp932(n))
        out.append(index[n])
    return np.asarray(out, np.int32), tuple(names), tuple(raw)


def apply_pose(model, motion: Motion | None, pose: Pose, frame: int, *, weight: float = 1.0) -> Motion:
    """``motion`` with ``pose`` loaded at ``frame`` and registered (see the module docstring).

    Pose bones/morphs the model does not have are skipped and listed in the result's warnings.
    """
    frame = int(frame)
    if frame < 0:
        raise BuildError(f"apply_pose: frame must be >= 0, not {frame}")
    w = float(weight)
    if not 0.0 <= w <= 1.0:
        raise BuildError(f"apply_pose: weight must be in [0, 1], not {weight}")
    if motion is None:
        motion = MotionBuilder(model_name=model.name).build()
    bound = bind_motion(model, motion)
    warnings = list(motion.warnings)

    # bones: motion value at the frame (local, before IK) blended toward the pose
    bone_of, missing = match_tracks(model.bone_name, pose.bone_name, (), 10 ** 9)
    warnings += [f"pose bone {n!r} is not in the model; skipped" for n in missing]
    keep = np.nonzero(bone_of >= 0)[0]
    t_now, q_now = sample_bone_tracks(bound, [frame])
    bones = bone_of[keep]
    t_pose = np.asarray(pose.bone_translation, np.float64)[keep]
    q_pose, zero, _ = unit_quaternions(np.asarray(pose.bone_rotation, np.float64)[keep])
    warnings += [f"pose bone {pose.bone_name[keep[i]]!r} has a zero rotation; read as identity"
                 for i in np.flatnonzero(zero)]
    t_new = (1.0 - w) * t_now[0, bones] + w * t_pose
    q_new = np.array([qslerp_scalar(*q_now[0, b], *q_pose[i], w) for i, b in enumerate(bones)]).reshape(-1, 4)
    b_names = [pose.bone_name[i] for i in keep]
    b_track, b_track_names, b_track_raw = _grow_tracks(motion.bone_track_name, motion.bone_track_name_bytes, b_names)

    # morphs: linear
    morph_of, missing = match_tracks(model.morph_name, pose.morph_name, (), 10 ** 9)
    warnings += [f"pose morph {n!r} is not in the model; skipped" for n in missing]
    mkeep = np.nonzero(morph_of >= 0)[0]
    m_now = np.zeros(model.num_morphs)
    sample_scalars(float(frame), bound.morph_key_start, bound.morph_key_frame, bound.morph_key_weight, m_now)
    m_new = (1.0 - w) * m_now[morph_of[mkeep]] + w * np.asarray(pose.morph_weight, np.float64)[mkeep]
    m_names = [pose.morph_name[i] for i in mkeep]
    m_track, m_track_names, m_track_raw = _grow_tracks(motion.morph_track_name, motion.morph_track_name_bytes,
                                                       m_names)

    def cat(a, b, dtype, width=None):
        a = np.zeros((0,) if width is None else (0, width), dtype) if a is None else np.asarray(a, dtype)
        return np.concatenate([a, np.asarray(b, dtype).reshape((-1,) if width is None else (-1, width))])

    n = len(keep)
    linear = interpolation_block(None, True)
    return build_motion(dict(
        {fl.name: getattr(motion, fl.name) for fl in dataclasses.fields(motion)},
        bone_track_name=b_track_names, bone_track_name_bytes=b_track_raw,
        bone_key_track=cat(motion.bone_key_track, b_track, np.int32),
        bone_key_frame=cat(motion.bone_key_frame, np.full(n, frame), np.uint32),
        bone_key_translation=cat(motion.bone_key_translation, t_new, np.float32, 3),
        bone_key_rotation=cat(motion.bone_key_rotation, q_new, np.float32, 4),
        bone_key_interpolation=cat(motion.bone_key_interpolation, np.tile(linear, (n, 1)), np.uint8, 64),
        bone_key_physics=cat(motion.bone_key_physics, np.ones(n, bool), bool),
        morph_track_name=m_track_names, morph_track_name_bytes=m_track_raw,
        morph_key_track=cat(motion.morph_key_track, m_track, np.int32),
        morph_key_frame=cat(motion.morph_key_frame, np.full(len(mkeep), frame), np.uint32),
        morph_key_weight=cat(motion.morph_key_weight, m_new, np.float32),
        warnings=tuple(warnings),
    ))
