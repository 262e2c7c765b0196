"""Body-part labels of a model's vertices, from the humanoid map and bone weights.

In: a Model (any skeleton: the humanoid map is ``retarget.humanoid_map``'s). Out: ``PART_NAMES``
(id → name, 0 = background) and ``vertex_parts(model)`` → (V,) int32 part id per vertex.
Rule (docs/dataset.md): a vertex takes the part of the bone it weighs most on
(``skinning.bounds.strongest_bone``). A bone's part: walking up from the bone, the first humanoid
bone met gives it (``_HUMANOID_PART``: head/neck/eyes/jaw → head; hips/spine/chest/upper chest/
shoulders, and MMD's centre/groove/waist → torso; upper arm, lower arm (its twist bones
included), hand and fingers, upper leg, lower leg, foot and toes per side); a bone driven by
physics (a dynamic rigid body on it or on a bone above it below that humanoid bone) is hair when
that humanoid bone is the head or neck, else cloth (skirts, coats, ribbons); a bone no humanoid
bone is above is 'other'.
"""

from __future__ import annotations

import numpy as np

from mmdkit.model.model import BODY_STATIC
from mmdkit.retarget import humanoid_map
from mmdkit.skinning.bounds import strongest_bone

PART_NAMES = ("background", "head", "torso", "left_upper_arm", "right_upper_arm", "left_lower_arm",
              "right_lower_arm", "left_hand", "right_hand", "left_upper_leg", "right_upper_leg", "left_lower_leg",
              "right_lower_leg", "left_foot", "right_foot", "hair", "cloth", "other")
"""Part id → name (ids are positions here; 0 = no character)."""
PART = {n: i for i, n in enumerate(PART_NAMES)}


def _humanoid_part(name: str) -> str | None:
    """The part a VRM humanoid bone (or MMD extra bone) names."""
    if name in ("head", "neck", "leftEye", "rightEye", "jaw"):
        return "head"
    if name in ("hips", "spine", "chest", "upperChest", "center", "groove", "waist") or name.endswith("Shoulder"):
        return "torso"
    side = "left" if name.startswith("left") else "right" if name.startswith("right") else None
    if side is None:
        return None
    rest = name[len(side):]
    for prefix, part in (("UpperArmTwist", "upper_arm"), ("LowerArmTwist", "lower_arm"), ("UpperArm", "upper_arm"),
                         ("LowerArm", "lower_arm"), ("Hand", "hand"), ("Thumb", "hand"), ("Index", "hand"),
                         ("Middle", "hand"), ("Ring", "hand"), ("Little", "hand"), ("UpperLeg", "upper_leg"),
                         ("LowerLeg", "lower_leg"), ("Foot", "foot"), ("Toes", "foot")):
        if rest.startswith(prefix):
            return f"{side}_{part}"
    return None


def bone_parts(model, hmap=None) -> np.ndarray:
    """(B,) int32 part id of every bone (the module docstring's rule)."""
    hmap = humanoid_map(model) if hmap is None else hmap
    own = {}
    for name, b in list(hmap.as_dict().items()) + list(hmap.extra.items()):
        part = _humanoid_part(name)
        if part is not None and b >= 0:
            own.setdefault(int(b), part)
    B = model.num_bones
    physics = np.zeros(B, bool)
    if model.rigid_body_mode is not None and len(model.rigid_body_mode):
        bodies = np.asarray(model.rigid_body_bone, np.int64)
        physics[bodies[(np.asarray(model.rigid_body_mode) != BODY_STATIC) & (bodies >= 0) & (bodies < B)]] = True
    parent = np.asarray(model.bone_parent, np.int64)
    out = np.empty(B, np.int32)
    for b in range(B):
        moved, k, seen = False, b, 0
        while k >= 0 and k not in own and seen <= B:
            moved |= bool(physics[k])
            k, seen = int(parent[k]), seen + 1
        part = own.get(k, "other") if k >= 0 else "other"
        if moved:
            part = "hair" if part == "head" else "cloth"
        out[b] = PART[part]
    return out


def vertex_parts(model, hmap=None) -> np.ndarray:
    """(V,) int32 part id of every vertex: its strongest bone's (``bone_parts``)."""
    if not model.num_vertices:
        return np.zeros(0, np.int32)
    return bone_parts(model, hmap)[strongest_bone(model)].astype(np.int32)
