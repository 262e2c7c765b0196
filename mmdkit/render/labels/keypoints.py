"""Keypoints of a character: COCO-17 plus the 22 humanoid joints, posed from the skinning matrices.

In: a Model (its humanoid map: ``retarget.humanoid_map``; its head mesh for the derived points).
Out: ``KeypointRig`` — J = 39 keypoints: ``KEYPOINT_NAMES``, ``SKELETON`` (pairs of 1-based
indices, COCO's way), per keypoint the bone it rides ``keypoint_bone`` (J,) int32 (-1: the model
has none: never visible), its rest position ``keypoint_rest`` (J,3) float64 MMD units (posed:
``bone_skin[bone] · rest``), ``keypoint_derived`` (J,) bool and ``keypoint_radius`` (J,) float64
MMD units (how deep the point lies under the surface, for the visibility test).
Rules (docs/dataset.md):
- COCO shoulders/elbows/wrists/hips/knees/ankles are the upper arm / lower arm / hand / upper leg /
  lower leg / foot humanoid bones' heads; eyes are the eye bones (MMD 左目/右目);
- nose (derived): of the vertices labelled head (``parts``), those between one eye separation and a
  quarter of one below the eyes and at most half a separation from their midline, the front-most
  (MMD characters face −z) at rest;
- ears (derived): of the head vertices from one separation below to half a separation above the
  eyes and behind them, the farthest out on each side (+x is the character's left) at rest;
- the 22 humanoid joints: the npz export's names (centre, lower/upper body, neck, head, shoulders,
  arms, elbows, wrists, legs, knees, ankles, toes) read through the humanoid map (MMD's センター for
  centre); a missing one reads its parent joint's bone, as the export does;
- radius: the distance from the rest point to its 32nd-nearest vertex, at most 1.5 units (0 for
  the derived points, which are vertices);
- parts (``keypoint_parts`` (J,2) int32): the body parts that meet at the keypoint, its own surface:
  the part of its bone and that of the nearest bone above it with another part (an elbow: lower
  and upper arm; a hip: upper leg and torso); none for the face's points (nose, eyes, ears), which
  lie on or just under the surface: the depth test alone decides them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.retarget import humanoid_map
from mmdkit.render.labels.parts import PART, bone_parts, vertex_parts

COCO_NAMES = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
              "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
              "right_knee", "left_ankle", "right_ankle")
COCO_SKELETON = ((16, 14), (14, 12), (17, 15), (15, 13), (12, 13), (6, 12), (7, 13), (6, 7), (6, 8), (7, 9),
                 (8, 10), (9, 11), (2, 3), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7))
_COCO_BONE = {"left_eye": "leftEye", "right_eye": "rightEye", "left_shoulder": "leftUpperArm",
              "right_shoulder": "rightUpperArm", "left_elbow": "leftLowerArm", "right_elbow": "rightLowerArm",
              "left_wrist": "leftHand", "right_wrist": "rightHand", "left_hip": "leftUpperLeg",
              "right_hip": "rightUpperLeg", "left_knee": "leftLowerLeg", "right_knee": "rightLowerLeg",
              "left_ankle": "leftFoot", "right_ankle": "rightFoot"}
DERIVED = ("nose", "left_ear", "right_ear")


def _limbs(side: str, hs: str):
    return [(f"{side}_shoulder", "upper_body2", f"{hs}Shoulder"), (f"{side}_arm", f"{side}_shoulder", f"{hs}UpperArm"),
            (f"{side}_elbow", f"{side}_arm", f"{hs}LowerArm"), (f"{side}_wrist", f"{side}_elbow", f"{hs}Hand")]


def _legs(side: str, hs: str):
    return [(f"{side}_leg", "lower_body", f"{hs}UpperLeg"), (f"{side}_knee", f"{side}_leg", f"{hs}LowerLeg"),
            (f"{side}_ankle", f"{side}_knee", f"{hs}Foot"), (f"{side}_toe", f"{side}_ankle", f"{hs}Toes")]


HUMANOID_JOINTS = tuple([("center", None, "center"), ("lower_body", "center", "hips"),
                         ("upper_body", "center", "spine"), ("upper_body2", "upper_body", "chest"),
                         ("neck", "upper_body2", "neck"), ("head", "neck", "head"),
                         *_limbs("left", "left"), *_limbs("right", "right"), *_legs("left", "left"),
                         *_legs("right", "right")])
"""(npz export joint name, parent joint, humanoid-map bone): the 22 joints, parents first."""
KEYPOINT_NAMES = COCO_NAMES + tuple(f"humanoid_{j}" for j, _, _ in HUMANOID_JOINTS)
_H = {j: 18 + i for i, (j, _, _) in enumerate(HUMANOID_JOINTS)}  # 1-based keypoint index
SKELETON = COCO_SKELETON + tuple((_H[p], _H[j]) for j, p, _ in HUMANOID_JOINTS if p is not None)
RADIUS_NEIGHBOURS, MAX_RADIUS = 32, 1.5


@dataclass(frozen=True)
class KeypointRig:
    """See the module docstring."""

    keypoint_bone: np.ndarray
    keypoint_rest: np.ndarray
    keypoint_derived: np.ndarray
    keypoint_radius: np.ndarray
    keypoint_parts: np.ndarray

    def positions(self, bone_skin, offset, out: np.ndarray) -> np.ndarray:
        """(J,3) float64 MMD model space of one character: its (B,4,4) skinning matrices, its crowd
        offset (3,); a keypoint without a bone is NaN."""
        ok = self.keypoint_bone >= 0
        m = np.asarray(bone_skin, np.float64)[self.keypoint_bone[ok]]
        out[ok] = np.einsum("jik,jk->ji", m[:, :3, :3], self.keypoint_rest[ok]) + m[:, :3, 3] + offset
        out[~ok] = np.nan
        return out


def _head_points(model, head_bone: int, eyes) -> dict:
    """Rest positions of the derived nose and ears (the module docstring's rule), from the head's mesh."""
    if eyes is None or not model.num_vertices:
        return {}
    le, re = eyes
    sep = float(np.linalg.norm(le - re))
    mid = (le + re) / 2
    p = np.asarray(model.vertex_position, np.float64)[vertex_parts(model) == PART["head"]]
    if not len(p) or sep <= 0:
        return {}
    out = {}
    band = (p[:, 1] >= mid[1] - sep) & (p[:, 1] <= mid[1] - 0.25 * sep) & (np.abs(p[:, 0] - mid[0]) <= 0.5 * sep)
    if band.any():
        q = p[band]
        out["nose"] = q[np.argmin(q[:, 2])]
    ring = (p[:, 1] >= mid[1] - sep) & (p[:, 1] <= mid[1] + 0.5 * sep) & (p[:, 2] >= mid[2])
    for name, sign in (("left_ear", 1.0), ("right_ear", -1.0)):
        side = ring & (sign * (p[:, 0] - mid[0]) > 0)
        if side.any():
            q = p[side]
            out[name] = q[np.argmax(sign * q[:, 0])]
    return out


def _radius(model, points: np.ndarray) -> np.ndarray:
    """(J,) distance from each point to its RADIUS_NEIGHBOURS-th nearest vertex (≤ MAX_RADIUS)."""
    v = np.asarray(model.vertex_position, np.float64)
    if not len(v):
        return np.zeros(len(points))
    k = min(RADIUS_NEIGHBOURS, len(v)) - 1
    out = np.empty(len(points))
    for j, p in enumerate(points):
        d = np.linalg.norm(v - p, axis=1) if np.isfinite(p).all() else np.zeros(1)
        out[j] = np.partition(d, min(k, len(d) - 1))[min(k, len(d) - 1)]
    return np.minimum(out, MAX_RADIUS)


def keypoint_rig(model) -> KeypointRig:
    """The model's ``KeypointRig`` (the module docstring's rules)."""
    hmap = humanoid_map(model)
    mapped = dict(hmap.as_dict(), **{k: v for k, v in hmap.extra.items() if k == "center"})
    rest = np.asarray(model.bone_position, np.float64)
    J = len(KEYPOINT_NAMES)
    bone, point = np.full(J, -1, np.int32), np.full((J, 3), np.nan)
    for j, name in enumerate(COCO_NAMES):
        b = mapped.get(_COCO_BONE.get(name), -1)
        if b >= 0:
            bone[j], point[j] = b, rest[b]
    joint_bone = {}
    for i, (name, parent, hb) in enumerate(HUMANOID_JOINTS):
        b = mapped.get(hb, -1)
        if b < 0 and parent is not None:
            b = joint_bone[parent]
        if b < 0 and name == "center":
            b = mapped.get("hips", -1)
        joint_bone[name] = b
        if b >= 0:
            bone[17 + i], point[17 + i] = b, rest[b]
    eyes = (point[1], point[2]) if bone[1] >= 0 and bone[2] >= 0 else None
    head = mapped.get("head", -1)
    for name, p in _head_points(model, head, eyes).items() if head >= 0 else ():
        j = COCO_NAMES.index(name)
        bone[j], point[j] = head, p
    derived = np.array([n in DERIVED for n in KEYPOINT_NAMES])
    radius = _radius(model, point)
    radius[derived] = 0.0
    return KeypointRig(bone, np.where(np.isfinite(point), point, 0.0), derived, radius,
                       _meeting_parts(model, bone, hmap))


def _meeting_parts(model, bone, hmap) -> np.ndarray:
    """(J,2) int32: the part of each keypoint's bone and of the nearest bone above with another part
    (0 for a keypoint without a bone)."""
    part = bone_parts(model, hmap)
    parent = np.asarray(model.bone_parent, np.int64)
    out = np.zeros((len(bone), 2), np.int32)
    for j, b in enumerate(bone):
        if b < 0 or KEYPOINT_NAMES[j] in COCO_NAMES[:5]:
            continue
        out[j] = part[b]
        k, steps = int(parent[b]), 0
        while k >= 0 and part[k] == part[b] and steps < len(part):
            k, steps = int(parent[k]), steps + 1
        if k >= 0:
            out[j, 1] = part[k]
    return out
