"""Rest-pose alignment of two humanoid skeletons, from their geometry alone.

In: the source and target ``Model`` (rest bone_position (B,3) model space, MMD units) and their
``HumanoidMap``s. Out: ``Alignment`` — the humanoid bones both skeletons have (``bones``: names,
``source_bone``/``target_bone`` (J,) int model bones), per bone the common humanoid child its
direction is measured to (``source_child``/``target_child`` (J,) int, −1 for a leaf, which takes
its nearest humanoid ancestor's alignment; for the hips none: its direction is the body's up), ``align_q`` (J,4) the rotation taking the target's
rest direction (turned to face as the source does) onto the source's, ``facing_q`` (4,) the yaw
turning the target's rest facing onto the source's (VRM 0.x files face +z in MMD space, MMD models
−z), and ``leg_scale`` = target leg length / source leg length (hips → foot: upper + lower leg).

A target bone's world rotation at a frame is then  W_t = F⁻¹ · D_s · A · F  (F = facing_q, A =
align_q, D_s the source's world delta), so its direction to its child is F⁻¹ times the source's:
A-pose onto T-pose, different proportions and facings need no hand-entered offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.retarget.bones import HUMANOID_BONES
from mmdkit.retarget.quat import qarc, qrot, qyaw

_LIMB_CHILDREN = {"Shoulder": ("UpperArm", "LowerArm", "Hand"), "UpperArm": ("LowerArm", "Hand"),
                  "LowerArm": ("Hand",), "Hand": ("MiddleProximal", "IndexProximal", "RingProximal"),
                  "UpperLeg": ("LowerLeg", "Foot"), "LowerLeg": ("Foot", "Toes"), "Foot": ("Toes",)}
_TORSO_CHILDREN = {"spine": ("chest", "upperChest", "neck", "head"), "chest": ("upperChest", "neck", "head"),
                   "upperChest": ("neck", "head"), "neck": ("head",)}
NEEDED = ("hips", "spine", "head", "leftUpperLeg", "leftLowerLeg", "leftFoot", "rightUpperLeg", "rightLowerLeg",
          "rightFoot", "leftUpperArm", "leftLowerArm", "rightUpperArm", "rightLowerArm")
"""Humanoid bones both skeletons must have for a retarget."""


def child_candidates(name: str) -> tuple[str, ...]:
    """Humanoid bones (in preference order) whose position gives ``name``'s direction."""
    if name in _TORSO_CHILDREN:
        return _TORSO_CHILDREN[name]
    for side in ("left", "right"):
        if name.startswith(side):
            part = name[len(side):]
            if part in _LIMB_CHILDREN:
                return tuple(side + c for c in _LIMB_CHILDREN[part])
            for joints in (("Metacarpal", "Proximal", "Distal"), ("Proximal", "Intermediate", "Distal")):
                for j, nxt in zip(joints, joints[1:]):
                    if part.endswith(j) and not part.startswith("Thumb") ^ (joints[0] == "Metacarpal"):
                        return (side + part[:-len(j)] + nxt,)
    return ()


@dataclass(frozen=True)
class Alignment:
    """See the module docstring; J = the humanoid bones both skeletons have, humanoid order."""

    bones: tuple[str, ...]
    source_bone: np.ndarray
    target_bone: np.ndarray
    source_child: np.ndarray
    target_child: np.ndarray
    align_q: np.ndarray
    facing_q: np.ndarray
    leg_scale: float
    source_leg: float
    target_leg: float

    def index(self, name: str) -> int:
        """Row of humanoid bone ``name`` (−1 when the two skeletons do not share it)."""
        return self.bones.index(name) if name in self.bones else -1


def _yaw_of(v: np.ndarray) -> float:
    """Angle about +y of the horizontal direction v (0 for +x)."""
    return float(np.arctan2(-v[2], v[0]))


def _left(pos: np.ndarray, hmap) -> np.ndarray:
    """The character's right → left direction at rest, from its upper legs (else upper arms)."""
    for a, b in (("leftUpperLeg", "rightUpperLeg"), ("leftUpperArm", "rightUpperArm")):
        if hmap[a] >= 0 and hmap[b] >= 0:
            return pos[hmap[a]] - pos[hmap[b]]
    return np.array([1.0, 0.0, 0.0])


def leg_length(pos: np.ndarray, hmap) -> float:
    """Mean over both sides of |upper leg → lower leg| + |lower leg → foot| at rest (model units)."""
    out = []
    for s in ("left", "right"):
        u, lo, f = hmap[f"{s}UpperLeg"], hmap[f"{s}LowerLeg"], hmap[f"{s}Foot"]
        out.append(np.linalg.norm(pos[lo] - pos[u]) + np.linalg.norm(pos[f] - pos[lo]))
    return float(np.mean(out))


def check_humanoid(hmap, what: str) -> None:
    """FormatError naming ``what`` (the model as the user gave it) and the humanoid bones it lacks."""
    gone = [n for n in NEEDED if hmap[n] < 0]
    if gone:
        raise FormatError(f"no humanoid {', '.join(gone)} found (the retarget needs hips, spine, head, "
                          "arms and legs; name them in a map file: docs/retarget.md)", path=what)


def _leaves_follow_parents(target, tb: np.ndarray, has: np.ndarray, align_q: np.ndarray) -> None:
    """A humanoid bone with no common humanoid child (distal fingers, toes, eyes, a head without
    neck → head child) has no direction to align: it takes the alignment of its nearest humanoid
    ancestor, so it stays as its own rest pose sets it on its parent (a T-pose's fingertip stays
    straight on its finger). Bones are visited parents first (humanoid order)."""
    parent = np.asarray(target.bone_parent)
    row = {int(b): j for j, b in enumerate(tb)}
    for j in np.flatnonzero(~has):
        p = int(parent[tb[j]])
        while p >= 0 and p not in row:
            p = int(parent[p])
        if p >= 0 and row[p] != j:
            align_q[j] = align_q[row[p]]


def align(source, source_map, target, target_map, source_name: str = "source",
          target_name: str = "target") -> Alignment:
    """The ``Alignment`` of ``source`` onto ``target`` (see module); FormatError naming the model
    that lacks a needed humanoid bone."""
    check_humanoid(source_map, source_name)
    check_humanoid(target_map, target_name)
    ps = np.asarray(source.bone_position, np.float64)
    pt = np.asarray(target.bone_position, np.float64)
    bones = tuple(n for n in HUMANOID_BONES if source_map[n] >= 0 and target_map[n] >= 0)
    common = set(bones)
    facing = qyaw(_yaw_of(_left(ps, source_map)) - _yaw_of(_left(pt, target_map)))
    J = len(bones)
    sb = np.array([source_map[n] for n in bones], np.int64)
    tb = np.array([target_map[n] for n in bones], np.int64)
    sc, tc = np.full(J, -1, np.int64), np.full(J, -1, np.int64)
    for j, n in enumerate(bones):
        c = next((c for c in child_candidates(n) if c in common), None)
        if c is not None:
            sc[j], tc[j] = source_map[c], target_map[c]
    has = sc >= 0
    align_q = np.tile([0.0, 0.0, 0.0, 1.0], (J, 1))
    align_q[has] = qarc(qrot(facing, pt[tc[has]] - pt[tb[has]]), ps[sc[has]] - ps[sb[has]])
    _leaves_follow_parents(target, tb, has, align_q)
    ls, lt = leg_length(ps, source_map), leg_length(pt, target_map)
    if not (ls > 1e-6 and lt > 1e-6):
        raise FormatError("its legs have no length at rest", path=source_name if ls <= 1e-6 else target_name)
    return Alignment(bones, sb, tb, sc, tc, align_q, facing, lt / ls, ls, lt)
