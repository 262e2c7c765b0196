"""Joint sets for export: every bone, or a standard humanoid skeleton mapped from MMD bone names.

In: a ``Model`` and ``'all'``/None or ``'humanoid'``. Out: ``JointSet`` — J joint names, the model
bone each joint reads (J,) int32, the joint tree's parents (J,) int32 and which joints fell back
to another bone (J,) bool. Humanoid joints read MMD's standard bones (センター, 上半身, 左ひじ, …);
a missing bone falls back along ``HUMANOID`` (e.g. 上半身2 → 上半身); a joint with no bone at all
is an ``OptionError`` naming the joint and the bones tried.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.errors import OptionError


def _side(side: str, jp: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """The arm and leg joints of one side ('left'/'right', 左/右)."""
    return [
        (f"{side}_shoulder", "upper_body2", (f"{jp}肩",)),
        (f"{side}_arm", f"{side}_shoulder", (f"{jp}腕",)),
        (f"{side}_elbow", f"{side}_arm", (f"{jp}ひじ",)),
        (f"{side}_wrist", f"{side}_elbow", (f"{jp}手首",)),
    ]


def _leg(side: str, jp: str) -> list[tuple[str, str, tuple[str, ...]]]:
    return [
        (f"{side}_leg", "lower_body", (f"{jp}足", f"{jp}足D")),
        (f"{side}_knee", f"{side}_leg", (f"{jp}ひざ", f"{jp}ひざD")),
        (f"{side}_ankle", f"{side}_knee", (f"{jp}足首", f"{jp}足首D")),
        (f"{side}_toe", f"{side}_ankle", (f"{jp}つま先", f"{jp}足先", f"{jp}足先EX")),
    ]


HUMANOID: tuple[tuple[str, str | None, tuple[str, ...]], ...] = tuple([
    ("center", None, ("センター", "全ての親")),
    ("lower_body", "center", ("下半身",)),
    ("upper_body", "center", ("上半身",)),
    ("upper_body2", "upper_body", ("上半身2",)),
    ("neck", "upper_body2", ("首",)),
    ("head", "neck", ("頭",)),
    *_side("left", "左"), *_side("right", "右"), *_leg("left", "左"), *_leg("right", "右"),
])
"""(joint, parent joint, MMD bone names tried in order). A joint whose names all miss reads its
parent joint's bone (a fallback: 上半身2 → 上半身, 左肩 → 上半身2, 下半身 → センター, 左つま先 →
左足首), except 'center' and the arm/leg chains below the shoulder/hip, which must exist."""

_REQUIRED = {"center", "upper_body", "left_arm", "left_elbow", "left_wrist", "right_arm", "right_elbow",
             "right_wrist", "left_leg", "left_knee", "left_ankle", "right_leg", "right_knee", "right_ankle"}
JOINT_SETS = ("all", "humanoid")


@dataclass(frozen=True)
class JointSet:
    """J joints: joint_name (J,) str, joint_bone (J,) int32 model bone read, joint_parent (J,) int32
    (-1 root), joint_fallback (J,) bool (reads its parent joint's bone: a missing bone)."""

    kind: str
    joint_name: tuple
    joint_bone: np.ndarray
    joint_parent: np.ndarray
    joint_fallback: np.ndarray


def joint_set(model, joints=None) -> JointSet:
    """The ``JointSet`` for ``joints``: None/'all' = every bone (model order and parents),
    'humanoid' = ``HUMANOID`` (parents always earlier joints)."""
    kind = "all" if joints in (None, "all") else joints
    if kind == "all":
        B = model.num_bones
        return JointSet("all", tuple(model.bone_name), np.arange(B, dtype=np.int32),
                        np.asarray(model.bone_parent, np.int32), np.zeros(B, bool))
    if kind != "humanoid":
        raise OptionError("joints", f"must be one of {', '.join(JOINT_SETS)}, not {joints!r}")
    index = {}
    for i, n in enumerate(model.bone_name):
        index.setdefault(n, i)
    names, bones, parents, fallback = [], [], [], []
    for joint, parent, candidates in HUMANOID:
        b = next((index[c] for c in candidates if c in index), -1)
        p = names.index(parent) if parent else -1
        if b < 0 and (joint in _REQUIRED or p < 0):
            raise OptionError("joints", f"humanoid joint '{joint}' needs one of the bones "
                                        f"{', '.join(candidates)}; {model.name or 'the model'} has none")
        names.append(joint)
        bones.append(b if b >= 0 else bones[p])
        parents.append(p)
        fallback.append(b < 0)
    return JointSet("humanoid", tuple(names), np.asarray(bones, np.int32), np.asarray(parents, np.int32),
                    np.asarray(fallback, bool))


@dataclass(frozen=True)
class JointPose:
    """A BakedMotion read through a JointSet (F frames, J joints; model space, MMD units, float64):
    position (F,J,3) and rotation (F,J,4) world; local_translation (F,J,3) / local_rotation (F,J,4)
    relative to the parent joint (translation minus the rest offset; roots: model space), so FK
    over the joint tree alone gives the world poses back; rest_position (J,3)."""

    joints: JointSet
    position: np.ndarray
    rotation: np.ndarray
    local_translation: np.ndarray
    local_rotation: np.ndarray
    rest_position: np.ndarray


def joint_pose(baked, joints: JointSet) -> JointPose:
    """``baked`` (a ``BakedMotion``) for the joints of ``joints``; dropped bones' motion is folded
    into the kept joints' local transforms (world poses are preserved)."""
    from mmdkit.export.bake import local_from_world

    b = joints.joint_bone
    position = np.ascontiguousarray(baked.bone_world_position[:, b])
    rotation = np.ascontiguousarray(baked.bone_world_rotation[:, b])
    rest = np.asarray(baked.model.bone_position, np.float64)[b]
    F, J = position.shape[:2]
    local_t, local_q = np.empty((F, J, 3)), np.empty((F, J, 4))
    local_from_world(joints.joint_parent, rest, position, rotation, local_t, local_q)
    return JointPose(joints, position, rotation, local_t, local_q, rest)
