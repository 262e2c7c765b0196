"""The VRM 1.0 humanoid bone set: the common target every skeleton is mapped onto.

In: nothing (constants). Out: ``HUMANOID_BONES`` (H,) names in VRM 1.0 spelling, ``HUMANOID_PARENT``
(H,) the humanoid parent of each (a name or None), ``REQUIRED_BONES`` (what VRM 1.0 requires),
``MAIN_LIMBS`` (the bones a skeleton must give for a usable map: hips, spine, head, arms, legs),
``EXTRA_BONES`` (MMD bones with no VRM counterpart kept beside the map: センター, グルーブ, 腰,
twist bones) and ``VRM0_RENAMES`` (VRM 0.x names that differ: its thumbs have no metacarpal).
"""

from __future__ import annotations

_TORSO = [("hips", None), ("spine", "hips"), ("chest", "spine"), ("upperChest", "chest"),
          ("neck", "upperChest"), ("head", "neck"), ("leftEye", "head"), ("rightEye", "head"), ("jaw", "head")]
_FINGERS = [("Thumb", ("Metacarpal", "Proximal", "Distal"))] + [
    (f, ("Proximal", "Intermediate", "Distal")) for f in ("Index", "Middle", "Ring", "Little")]


def _side(side: str) -> list[tuple[str, str | None]]:
    rows = [(f"{side}UpperLeg", "hips"), (f"{side}LowerLeg", f"{side}UpperLeg"),
            (f"{side}Foot", f"{side}LowerLeg"), (f"{side}Toes", f"{side}Foot"),
            (f"{side}Shoulder", "upperChest"), (f"{side}UpperArm", f"{side}Shoulder"),
            (f"{side}LowerArm", f"{side}UpperArm"), (f"{side}Hand", f"{side}LowerArm")]
    for finger, joints in _FINGERS:
        parent = f"{side}Hand"
        for j in joints:
            rows.append((f"{side}{finger}{j}", parent))
            parent = f"{side}{finger}{j}"
    return rows


_ROWS = _TORSO + _side("left") + _side("right")
HUMANOID_BONES: tuple[str, ...] = tuple(n for n, _ in _ROWS)
"""(H,) = 55 VRM 1.0 humanoid bone names, parents before children."""
HUMANOID_PARENT: dict[str, str | None] = dict(_ROWS)
"""Humanoid parent of each bone (VRM 1.0's hierarchy; a missing parent means the next one up)."""
HUMANOID_INDEX: dict[str, int] = {n: i for i, n in enumerate(HUMANOID_BONES)}

REQUIRED_BONES: tuple[str, ...] = ("hips", "spine", "head") + tuple(
    f"{s}{p}" for s in ("left", "right") for p in ("UpperLeg", "LowerLeg", "Foot", "UpperArm", "LowerArm", "Hand"))
"""The 15 bones VRM 1.0 requires."""

MAIN_LIMBS: tuple[str, ...] = ("hips", "spine", "head") + tuple(
    f"{s}{p}" for s in ("left", "right") for p in ("UpperLeg", "LowerLeg", "Foot", "UpperArm", "LowerArm"))
"""Bones the geometry pass (names unknown) always looks for; hands too where a chain has them."""

EXTRA_BONES: tuple[str, ...] = ("center", "groove", "waist", "leftUpperArmTwist", "rightUpperArmTwist",
                                "leftLowerArmTwist", "rightLowerArmTwist")
"""MMD bones outside the VRM set that a retarget writes to: センター, グルーブ, 腰, 腕捩, 手捩."""

VRM0_RENAMES: dict[str, str] = {}
for _s in ("left", "right"):
    VRM0_RENAMES.update({f"{_s}ThumbProximal": f"{_s}ThumbMetacarpal",
                         f"{_s}ThumbIntermediate": f"{_s}ThumbProximal"})
"""VRM 0.x humanoid names → 1.0 (0.x thumbs are Proximal/Intermediate/Distal; 1.0's
Metacarpal/Proximal/Distal name the same three bones)."""
