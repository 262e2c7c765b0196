"""Humanoid labels from bone names: MMD's Japanese names, Mixamo, Unreal, CMU/BVH, VRoid/Unity.

In: bone names (strings). Out: ``label_names(names)`` → per bone a ``NameMatch`` or None: the
humanoid (or extra) label it names, a priority (2 = an unambiguous name such as 左腕 / UpperArm /
thigh_l, 1 = a name other schemes also use for a neighbour, e.g. Mixamo's 'LeftArm' = upper arm or
MMD's 左つま先 tip, 0 = a weak hint such as 'palm') and the scheme that matched ('mmd' or 'generic').
Torso bones named spine*/chest*/lowerback come back as 'torso' (their order along the chain
decides spine/chest/upperChest, see ``humanoid``); necks likewise as 'neck' ordered by depth.

MMD names are compared after NFKC (full-width digits and letters → ASCII; half-width kana → full)
and lower-casing: 上半身２ = 上半身2, 左親指０ = 左親指0, 左足ＩＫ = 左足ik (not a leg bone).
Other names are split into words (camelCase, '_', '.', '-', ' ', ':'), prefixes such as
'mixamorig', 'J_Bip_C', 'Bip01', 'DEF-' dropped, a side word (Left/L/Right/R, or a glued L/R as in
CMU's 'LThumb') taken off, and the rest looked up with its trailing number.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class NameMatch:
    """label: a humanoid bone ('leftUpperArm'), an extra ('center'), or 'torso'/'neck' (ordered
    later); priority 0..2; scheme 'mmd' | 'generic'; order: the number a torso/neck name carries."""

    label: str
    priority: int
    scheme: str
    order: int = 0


_FINGER_JP = {"親指": "Thumb", "人指": "Index", "人差指": "Index", "中指": "Middle", "薬指": "Ring", "小指": "Little"}
_JOINTS = {"Thumb": ("Metacarpal", "Proximal", "Distal")}


def _finger(finger: str, n: int, mmd: bool) -> str | None:
    """'Thumb', 1 → 'ThumbMetacarpal' (Mixamo/Unreal count thumbs from 1) or 'ThumbProximal' (MMD
    counts them from 親指０); other fingers count from 1 everywhere: 'Index', 1 → 'IndexProximal'."""
    joints = _JOINTS.get(finger, ("Proximal", "Intermediate", "Distal"))
    k = n if (finger == "Thumb" and mmd) else n - 1
    return f"{finger}{joints[k]}" if 0 <= k < 3 else None


# MMD names without their side (左/右), after NFKC + lower: (label or side part, priority)
_MMD_SIDED = {"肩": ("Shoulder", 2), "腕": ("UpperArm", 2), "ひじ": ("LowerArm", 2), "肘": ("LowerArm", 2),
              "手首": ("Hand", 2), "足": ("UpperLeg", 2), "ひざ": ("LowerLeg", 2), "膝": ("LowerLeg", 2),
              "足首": ("Foot", 2), "足先ex": ("Toes", 2), "つま先ex": ("Toes", 2), "つま先": ("Toes", 1),
              "足d": ("UpperLeg", 1), "ひざd": ("LowerLeg", 1), "足首d": ("Foot", 1), "目": ("Eye", 2),
              "腕捩": ("UpperArmTwist", 2), "手捩": ("LowerArmTwist", 2)}
_MMD_CENTRE = {"センター": ("center", 2), "グルーブ": ("groove", 2), "腰": ("waist", 2), "下半身": ("hips", 2),
               "上半身": ("torso", 2), "上半身2": ("torso", 2), "上半身3": ("torso", 2), "首": ("neck", 2),
               "頭": ("head", 2), "あご": ("jaw", 1), "顎": ("jaw", 1)}
_MMD_TORSO_ORDER = {"上半身": 1, "上半身2": 2, "上半身3": 3}
_FINGER_RE = re.compile(r"^(親指|人指|人差指|中指|薬指|小指)([0-3])$")


def _mmd(name: str) -> NameMatch | None:
    s = unicodedata.normalize("NFKC", name).strip().lower()
    if s in _MMD_CENTRE:
        label, prio = _MMD_CENTRE[s]
        return NameMatch(label, prio, "mmd", _MMD_TORSO_ORDER.get(s, 0))
    if s[:1] not in ("左", "右"):
        return None
    side, rest = ("left" if s[0] == "左" else "right"), s[1:]
    if rest in _MMD_SIDED:
        part, prio = _MMD_SIDED[rest]
        return NameMatch(side + part, prio, "mmd")
    m = _FINGER_RE.match(rest)
    if m:
        finger = _finger(_FINGER_JP[m.group(1)], int(m.group(2)), mmd=True)
        return NameMatch(side + finger, 2, "mmd") if finger else None
    return None


_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_FILLER = {"mixamorig", "mixamo", "j", "bip", "bip01", "bip001", "joint", "jnt", "skeleton", "def", "org",
           "bone", "bn", "c", "armature", "rig", "ctrl", "sk", "b"}
_SIDE = {"l": "left", "left": "left", "r": "right", "right": "right"}
# word(s) joined → (part, priority); parts starting with a capital take a side
_GENERIC = {
    "hips": ("hips", 2), "hip": ("hips", 1), "pelvis": ("hips", 2),
    "spine": ("torso", 2), "lowerback": ("torso", 2), "chest": ("torso", 2), "upperchest": ("torso", 2),
    "neck": ("neck", 2), "head": ("head", 2), "jaw": ("jaw", 2), "eye": ("Eye", 2),
    "shoulder": ("Shoulder", 2), "clavicle": ("Shoulder", 2), "collar": ("Shoulder", 2),
    "upperarm": ("UpperArm", 2), "uparm": ("UpperArm", 2), "arm": ("UpperArm", 1),
    "lowerarm": ("LowerArm", 2), "forearm": ("LowerArm", 2), "elbow": ("LowerArm", 1),
    "hand": ("Hand", 2), "wrist": ("Hand", 1), "palm": ("Hand", 0),
    "upperleg": ("UpperLeg", 2), "upleg": ("UpperLeg", 2), "thigh": ("UpperLeg", 2),
    "lowerleg": ("LowerLeg", 2), "calf": ("LowerLeg", 2), "shin": ("LowerLeg", 2), "knee": ("LowerLeg", 1),
    "leg": ("LowerLeg", 1),
    "foot": ("Foot", 2), "ankle": ("Foot", 1), "toes": ("Toes", 2), "toe": ("Toes", 2), "toebase": ("Toes", 2),
    "ball": ("Toes", 2),
}
_GENERIC_FINGER = {"thumb": "Thumb", "index": "Index", "indexfinger": "Index", "pointer": "Index",
                   "middle": "Middle", "middlefinger": "Middle", "ring": "Ring", "ringfinger": "Ring",
                   "little": "Little", "pinky": "Little", "littlefinger": "Little", "pinkey": "Little"}
_NUMBERED_OK = {"torso", "neck"}  # parts whose trailing number orders a chain rather than naming a joint


def words(name: str) -> list[str]:
    """'mixamorig:LeftHandThumb1' → ['left', 'hand', 'thumb', '1'] (camelCase and separators split,
    lower case, prefix words such as 'mixamorig' / 'J' 'Bip' 'C' dropped)."""
    out = []
    for part in re.split(r"[_.\-\s:|/]+", unicodedata.normalize("NFKC", name)):
        out += [w.lower() for w in _WORD_RE.findall(part)]
    return [w for w in out if w not in _FILLER]


def _side_of(ws: list[str]) -> tuple[str | None, list[str]]:
    """Take one side word off (first or last); a glued 'l'/'r' prefix on the first word (CMU 'LThumb',
    'lhipjoint') counts when the remainder is a known word."""
    sides = [i for i, w in enumerate(ws) if w in _SIDE]
    if sides:
        i = sides[0] if sides[0] == 0 else sides[-1]
        return _SIDE[ws[i]], ws[:i] + ws[i + 1:]
    if ws and ws[0][:1] in ("l", "r") and (ws[0][1:] in _GENERIC or ws[0][1:] in _GENERIC_FINGER):
        return _SIDE[ws[0][0]], [ws[0][1:]] + ws[1:]
    return None, ws


def _generic(name: str) -> NameMatch | None:
    side, ws = _side_of(words(name))
    number = 0
    while ws and ws[-1].isdigit():
        last = int(ws.pop()[:6])
        number = number or last
    if ws[:1] == ["hand"] and len(ws) > 1:  # Mixamo 'LeftHandIndex1'
        ws = ws[1:]
    if ws[-1:] == ["finger"] and len(ws) > 1:
        ws = ws[:-1]
    key = "".join(ws)
    if key in _GENERIC_FINGER:
        if side is None:
            return None
        finger = _finger(_GENERIC_FINGER[key], number or 1, mmd=False)
        return NameMatch(side + finger, 2, "generic") if finger else None
    if key not in _GENERIC:
        return None
    part, prio = _GENERIC[key]
    if number and part not in _NUMBERED_OK and not (part == "Hand" and prio == 0):
        return None  # 'leg_joint_L_2', 'Head_3': numbered pieces of a chain, not the named joint
    if part[0].isupper():
        return NameMatch(side + part, prio, "generic") if side else None
    if side:
        return None
    order = {"lowerback": 0, "spine": 1, "chest": 5, "upperchest": 6}.get(key, 1) * 100 + number
    return NameMatch(part, prio, "generic", order)


def label_name(name: str) -> NameMatch | None:
    """The humanoid label one bone name gives (MMD's names first, then the generic schemes)."""
    return _mmd(name) or _generic(name)


def label_names(names) -> list[NameMatch | None]:
    """``label_name`` of each name, in order."""
    return [label_name(n) for n in names]
