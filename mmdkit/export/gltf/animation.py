"""The skeleton and the baked clip in glTF space: joint nodes, keyed channels, a camera track.

In: a ``BakedMotion`` (MMD space, IK/append/morphs/physics applied), the ``Space`` MMD → glTF,
a tolerance (glTF units; 0 = a key on every frame). Out: ``Skeleton`` (which bones become
joints: those that move a vertex and their ancestors, parents first) and its rest nodes,
``joint_channels`` (per-joint local translation/rotation with the frames to keep), morph weight
and camera channels, all written by ``add_channel`` into one glTF animation.
MMD bones have no bind rotation, so a joint's local rotation is the bone's MMD-local rotation
(mirrored) and its local translation the parent-to-bone offset (rest offset + MMD translation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.animation.camera import sample_camera
from mmdkit.animation.view import FLIP_Z, mmd_view
from mmdkit.export.gltf.reduce import (LERP_L2, LERP_WEIGHTED_L1, ROTATION_ANGLE, continuous_quaternions,
                                       joint_budgets, keep_keys)
from mmdkit.model.space import quaternions_from_rotations

STATIC = 1e-9
"""A joint whose local translation and rotation stay this close (glTF units / radians) to the rest
pose on every frame counts as at rest (it takes no share of the tolerance)."""
CAMERA_ANGLE_TOLERANCE = 1e-4
"""Radians the reduced camera rotation may deviate from the sampled one."""


@dataclass(frozen=True)
class Skeleton:
    """J joints. joint_bone (J,) int64: model bone of each joint, parents before children;
    joint_parent (J,) int64: parent joint or −1; bone_joint (B,) int64: joint of each bone or −1;
    joint_rest (J, 3) float64: local rest translation (glTF units, rotation identity)."""

    joint_bone: np.ndarray
    joint_parent: np.ndarray
    bone_joint: np.ndarray
    joint_rest: np.ndarray


def skeleton(model, deforming: np.ndarray, space) -> Skeleton:
    """The joints: bones in ``deforming`` (B,) bool and every ancestor of one (so each joint's
    parent is a joint); helper bones (IK targets, tips, unused physics bones) are left out."""
    parent = np.asarray(model.bone_parent, np.int64)
    depth = np.zeros(len(parent), np.int64)
    for b in range(len(parent)):
        p, d = parent[b], 0
        while p >= 0 and d < len(parent):
            p, d = parent[p], d + 1
        depth[b] = d
    keep = np.array(deforming, bool)
    for b in np.argsort(-depth, kind="stable"):  # deepest first: marks climb the whole chain
        if keep[b] and parent[b] >= 0:
            keep[parent[b]] = True
    joint_bone = np.array([b for b in np.argsort(depth, kind="stable") if keep[b]], np.int64)
    bone_joint = np.full(len(parent), -1, np.int64)
    bone_joint[joint_bone] = np.arange(len(joint_bone))
    joint_parent = np.where(parent[joint_bone] >= 0, bone_joint[np.maximum(parent[joint_bone], 0)], -1)
    rest = np.asarray(model.bone_position, np.float64)
    offset = rest[joint_bone] - np.where((joint_parent >= 0)[:, None], rest[np.maximum(parent[joint_bone], 0)], 0.0)
    return Skeleton(joint_bone, joint_parent, bone_joint, space.points(offset))


@dataclass(frozen=True)
class Channel:
    """One glTF sampler + channel target: node, path, values (F, C, n) float64 per frame,
    keep (F,) bool: frames written as keys (C > 1 only for morph weights)."""

    node: int
    path: str
    values: np.ndarray
    keep: np.ndarray


def joint_channels(baked, skel: Skeleton, space, reach: np.ndarray, time: np.ndarray,
                   tolerance: float | None, joint_node: np.ndarray) -> list[Channel]:
    """Translation and rotation channels of every joint; ``tolerance`` None keys every frame,
    else keys are reduced so each joint's points stay within it (``joint_budgets``). A channel
    that stays within its tolerance of the rest pose on every frame is left out."""
    jb = skel.joint_bone
    translation = space.points(baked.bone_local_translation[:, jb]) + skel.joint_rest
    rotation = continuous_quaternions(space.quaternions(baked.bone_local_rotation[:, jb]))
    F, J = translation.shape[:2]
    if tolerance is None:
        keep_t = keep_r = np.ones((F, J), bool)
    else:
        from_rest_t = np.linalg.norm(translation - skel.joint_rest, axis=2).max(axis=0)
        from_rest_r = 2 * np.arccos(np.minimum(np.abs(rotation[..., 3]), 1.0)).max(axis=0)
        # a joint at rest on every frame adds no error wherever its keys go; any other one may
        tol_t, tol_r = joint_budgets(skel.joint_parent, (from_rest_t > STATIC) | (from_rest_r > STATIC), reach,
                                     tolerance)
        keep_t, keep_r = np.empty((F, J), bool), np.empty((F, J), bool)
        keep_keys(time, translation, tol_t, LERP_L2, np.ones(3), keep_t)
        keep_keys(time, rotation, tol_r, ROTATION_ANGLE, np.ones(4), keep_r)
        off_rest_t, off_rest_r = from_rest_t > tol_t, from_rest_r > tol_r
    out = []
    for j in range(J):
        if tolerance is None or off_rest_t[j]:
            out.append(Channel(int(joint_node[j]), "translation", translation[:, j:j + 1], keep_t[:, j]))
        if tolerance is None or off_rest_r[j]:
            out.append(Channel(int(joint_node[j]), "rotation", rotation[:, j:j + 1], keep_r[:, j]))
    return out


def weight_channel(weight: np.ndarray, delta_norm: np.ndarray, time: np.ndarray, tolerance: float | None,
                   node: int) -> Channel | None:
    """The morph weights channel: weight (F, N) float, delta_norm (N,) the largest vertex delta of
    each target; keys reduced so Σ_n |Δw_n|·delta_norm_n ≤ ``tolerance``. None when all weights
    stay 0."""
    w = np.asarray(weight, np.float64)
    if w.shape[1] == 0 or not w.any():
        return None
    keep = np.ones((len(w), 1), bool)
    if tolerance is not None:
        keep_keys(time, w[:, None, :], np.array([tolerance]), LERP_WEIGHTED_L1, np.asarray(delta_norm, np.float64), keep)
    return Channel(node, "weights", w[:, None, :], keep[:, 0])


def camera_pose(camera_motion, frames: np.ndarray, space) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The MMD camera at ``frames`` as a glTF camera node: (eye (F, 3) glTF units, rotation (F, 4)
    x y z w (looking down its −Z, +Y up), fov (F,) degrees). The view is ``mmd_view``'s: eye =
    target + R·(0, 0, distance) looking at the target; a zero distance looks along R·(0, 0, 1)."""
    cam = sample_camera(camera_motion, frames)
    dist = np.where(np.abs(cam["distance"]) < 1e-6, -1e-6, cam["distance"])
    view = np.stack([mmd_view(cam["position"][i], cam["rotation"][i], dist[i]) for i in range(len(frames))])
    world = np.linalg.inv(view @ FLIP_Z)  # mmd_view takes MMD points; GL space = MMD with z flipped
    eye = world[:, :3, 3] * space.scale
    return eye, quaternions_from_rotations(world[:, :3, :3]), np.asarray(cam["fov"], np.float64)


def camera_channels(eye, rotation, time, tolerance: float | None, node: int) -> list[Channel]:
    """Translation and rotation channels of the camera node, reduced within ``tolerance`` (glTF
    units) and CAMERA_ANGLE_TOLERANCE radians."""
    q = continuous_quaternions(rotation[:, None, :])
    F = len(eye)
    keep_t, keep_r = np.ones((F, 1), bool), np.ones((F, 1), bool)
    if tolerance is not None:
        keep_keys(time, eye[:, None, :], np.array([tolerance]), LERP_L2, np.ones(3), keep_t)
        keep_keys(time, q, np.array([CAMERA_ANGLE_TOLERANCE]), ROTATION_ANGLE, np.ones(4), keep_r)
    return [Channel(node, "translation", eye[:, None, :], keep_t[:, 0]),
            Channel(node, "rotation", q, keep_r[:, 0])]


def add_animation(doc, name: str, time: np.ndarray, channels: list[Channel]) -> int | None:
    """One glTF animation with a LINEAR sampler per channel (key times shared between channels
    that keep the same frames); its index, or None without channels."""
    if not channels:
        return None
    inputs: dict[bytes, int] = {}
    samplers, targets = [], []
    for ch in channels:
        sig = np.packbits(ch.keep).tobytes()
        if sig not in inputs:
            inputs[sig] = doc.accessor(time[ch.keep].astype(np.float32), minmax=True)
        values = ch.values[ch.keep].astype(np.float32)
        out = doc.accessor(values.reshape(-1) if ch.path == "weights" else values.reshape(len(values), -1))
        samplers.append({"input": inputs[sig], "output": out, "interpolation": "LINEAR"})
        targets.append({"sampler": len(samplers) - 1, "target": {"node": ch.node, "path": ch.path}})
    return doc.add("animations", {"name": name, "samplers": samplers, "channels": targets})
