"""PMD record layouts (one numpy dtype per fixed-size record, used by the reader and the
writer) and the PMD constants both directions need.

Bone types (the ``type`` byte): 0 rotate, 1 rotate+move, 2 IK, 3 unknown, 4 IK-affected,
5 rotation-affected (回転影響下), 6 IK target, 7 invisible, 8 twist, 9 rotation-linked (回転連動).
"""

from __future__ import annotations

import math

import numpy as np

from mmdkit.formats.binary import record

VERTEX = record([("p", "f", 3), ("n", "f", 3), ("uv", "f", 2), ("b", "H", 2), ("w", "B", 1), ("edge", "B", 1)])
MATERIAL = record([("diffuse", "f", 3), ("alpha", "f", 1), ("power", "f", 1), ("specular", "f", 3),
                   ("ambient", "f", 3), ("toon", "B", 1), ("edge", "B", 1), ("count", "I", 1), ("tex", "B", 20)])
BONE = record([("name", "B", 20), ("parent", "H", 1), ("tail", "H", 1), ("type", "B", 1), ("ik", "H", 1),
               ("p", "f", 3)])
IK_HEAD = record([("bone", "H", 1), ("target", "H", 1), ("links", "B", 1), ("loops", "H", 1), ("limit", "f", 1)])
MORPH_HEAD = record([("name", "B", 20), ("count", "I", 1), ("kind", "B", 1)])
MORPH_ROW = record([("i", "I", 1), ("o", "f", 3)])
BONE_DISPLAY = record([("b", "H", 1), ("g", "B", 1)])
RIGID = record([("name", "B", 20), ("bone", "H", 1), ("group", "B", 1), ("mask", "H", 1), ("shape", "B", 1),
                ("size", "f", 3), ("p", "f", 3), ("r", "f", 3), ("mass", "f", 1), ("lin", "f", 1), ("ang", "f", 1),
                ("rest", "f", 1), ("fric", "f", 1), ("mode", "B", 1)])
JOINT = record([("name", "B", 20), ("a", "I", 1), ("b", "I", 1), ("v", "f", (8, 3))])

NAME_SIZE, COMMENT_SIZE, GROUP_NAME_SIZE, TOON_NAME_SIZE = 20, 256, 50, 100
DEFAULT_TOONS = tuple(f"toon{i:02d}.bmp" for i in range(1, 11))
BONE_ROTATE, BONE_MOVE, BONE_IK, BONE_IK_LINK, BONE_ROTATION_AFFECTED = 0, 1, 2, 4, 5
BONE_IK_TARGET, BONE_INVISIBLE, BONE_TWIST, BONE_ROTATION_LINKED = 6, 7, 8, 9
KNEE = "ひざ"
KNEE_LOWER = (-math.pi, 0.0, 0.0)
KNEE_UPPER = (-math.radians(0.5), 0.0, 0.0)
NO_BONE = 0xFFFF  # a bone index of 0xFFFF: none
NO_BODY = 2**31  # a joint's body index of 2**31 or more (0xFFFFFFFF in practice): none


def to_index(raw: np.ndarray, none: int) -> np.ndarray:
    """Unsigned indices, ``none`` and above meaning "no item" → int32 with -1."""
    out = raw.astype(np.int64)
    out[raw >= none] = -1
    return out.astype(np.int32)
