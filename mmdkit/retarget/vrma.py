"""A model's humanoid in VRM's T-pose, and its motion as VRM normalized rotations (VRM Animation).

In: a ``Model`` (rest bone_position (B,3), MMD space and units), its ``HumanoidMap``, and bone
world rotations of a posed motion (F,B,4) float64 x y z w (MMD space, delta from rest, as the
engine poses them). Out: ``TPose`` — J humanoid bones the model has (VRM 1.0 names, parents
first), the humanoid parent row of each, ``tpose_q`` (J,4) the world rotation taking the rest
pose to the T-pose per bone and ``position`` (J,3) the T-pose joint positions (MMD space, turned
to face −z); ``normalized_local`` gives the VRM normalized rotations (world axes, identity in the
T-pose) relative to the humanoid parent, as a VRM Animation stores them (F,J,4).

The T-pose (VRM 1.0's: facing +z in glTF = −z here, the character's left +x, arms and fingers
straight out along ±x, legs straight down) per bone: ``T_b = S_b·F``; F = the yaw turning the
model's right → left (upper legs) onto +x (VRM 0.x files face +z in MMD space); S_b =
the shortest rotation taking the bone's turned rest direction (to its first humanoid child, the
rule ``align`` measures with) onto +x/−x (upper/lower arm, hand, non-thumb finger joints with a
child) or −y (upper/lower leg), else onto its parent's ``S`` applied to that direction (the bone
carried along rigidly); a leaf (no humanoid child: head, distal fingers, toes, eyes, jaw) takes
its parent's ``S``. A VRM model (its rest is VRM's T-pose already) has S = I. Positions: hips
at F·rest, a child at its parent's T-pose position + T_parent·(rest offset). So a bone's
T-pose direction is T_b · its rest direction and ``align`` of the model onto this skeleton
gives back A = S_b for every bone with a child (an exact round trip through a .vrma).

Normalized world rotation per frame: N_b = F·W_b·T_b⁻¹ (W_b the bone's world delta): the
rotation taking the T-pose bone to the posed one. Local: N_parent⁻¹·N_b (the T-pose nodes carry
no rest rotation, so this is the node's glTF rotation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from mmdkit.mathutil import qmul_scalar
from mmdkit.retarget.align import _left, _yaw_of, check_humanoid, child_candidates
from mmdkit.retarget.bones import HUMANOID_BONES, HUMANOID_PARENT
from mmdkit.retarget.quat import qarc, qmul, qrot, qyaw

_ARM = ("UpperArm", "LowerArm", "Hand")
_LEG = ("UpperLeg", "LowerLeg")


@dataclass(frozen=True)
class TPose:
    """See the module docstring; J humanoid bones, parents before children (row 0 = hips)."""

    bones: tuple[str, ...]
    bone: np.ndarray
    parent: np.ndarray
    tpose_q: np.ndarray
    position: np.ndarray
    facing_q: np.ndarray


def _straight(name: str) -> np.ndarray | None:
    """The T-pose direction (3,) of a bone that VRM's T-pose fixes (arms, fingers, legs), else None."""
    for side, x in (("left", 1.0), ("right", -1.0)):
        if name.startswith(side):
            part = name[len(side):]
            if part in _ARM or (not part.startswith("Thumb") and part.endswith(("Proximal", "Intermediate"))):
                return np.array([x, 0.0, 0.0])
            if part in _LEG:
                return np.array([0.0, -1.0, 0.0])
    return None


def is_vrm(model) -> bool:
    """True for a model whose rest is VRM's T-pose: a VRM file or a VRM Animation (its humanoid extension)."""
    return bool((getattr(model, "source_extras", None) or {}).get("vrm_humanoid"))


def tpose(model, hmap, name: str = "model", straighten: bool | None = None) -> TPose:
    """The ``TPose`` of ``model`` (see module); ``straighten`` None: unless ``is_vrm(model)``.
    FormatError naming ``name`` when the model lacks a humanoid bone a retarget needs."""
    check_humanoid(hmap, name)
    straighten = not is_vrm(model) if straighten is None else straighten
    pos = np.asarray(model.bone_position, np.float64)
    facing = qyaw(-_yaw_of(_left(pos, hmap)))
    bones = tuple(n for n in HUMANOID_BONES if hmap[n] >= 0)
    row = {n: j for j, n in enumerate(bones)}
    J = len(bones)
    parent = np.full(J, -1, np.int64)
    s = np.tile([0.0, 0.0, 0.0, 1.0], (J, 1))
    out = np.zeros((J, 3))
    for j, n in enumerate(bones):
        p = HUMANOID_PARENT[n]
        while p is not None and p not in row:
            p = HUMANOID_PARENT[p]
        parent[j] = row[p] if p is not None else -1
        if parent[j] >= 0:
            s[j] = s[parent[j]]
        child = next((c for c in child_candidates(n) if c in row), None) if n != "hips" else None
        if straighten and child is not None:
            d = qrot(facing, pos[hmap[child]] - pos[hmap[n]])
            goal = _straight(n)
            s[j] = qarc(d, qrot(s[j], d) if goal is None else goal)
    tq = qmul(s, facing)
    for j, n in enumerate(bones):
        a = parent[j]
        if a < 0:
            out[j] = qrot(facing, pos[hmap[n]])
        else:
            out[j] = out[a] + qrot(tq[a], pos[hmap[n]] - pos[hmap[bones[a]]])
    return TPose(bones, np.array([hmap[n] for n in bones], np.int64), parent, tq, out, facing)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def normalized_kernel(bone, parent, facing, tpose_q, world_q, local_out):
    """Per bone (in parallel) and frame: N = F·W·T⁻¹ (W = world_q[f, bone[j]] made unit), then
    local_out[f, j] = N_parent⁻¹·N made unit, on the side of frame f−1's (q ≡ −q: neighbours
    interpolate the short way). bone, parent (J,) int64 (parent row before its children, −1 for
    the root); facing (4,), tpose_q (J,4), world_q (F,B,4) float64 → local_out (F,J,4) float64."""
    fx, fy, fz, fw = facing[0], facing[1], facing[2], facing[3]
    for j in prange(bone.shape[0]):
        for f in range(world_q.shape[0]):
            q = _normalized(fx, fy, fz, fw, tpose_q, world_q, bone, f, j)
            if parent[j] >= 0:
                p = _normalized(fx, fy, fz, fw, tpose_q, world_q, bone, f, parent[j])
                q = qmul_scalar(-p[0], -p[1], -p[2], p[3], q[0], q[1], q[2], q[3])
            n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
            if f > 0 and (q[0] * local_out[f - 1, j, 0] + q[1] * local_out[f - 1, j, 1]
                          + q[2] * local_out[f - 1, j, 2] + q[3] * local_out[f - 1, j, 3]) < 0.0:
                n = -n
            for c in range(4):
                local_out[f, j, c] = q[c] / n


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _normalized(fx, fy, fz, fw, tpose_q, world_q, bone, f, j):
    """N = F·W·T⁻¹ of row j at frame f (W made unit), a 4-tuple."""
    b = bone[j]
    wx, wy, wz, ww = world_q[f, b, 0], world_q[f, b, 1], world_q[f, b, 2], world_q[f, b, 3]
    n = math.sqrt(wx * wx + wy * wy + wz * wz + ww * ww)
    q = qmul_scalar(fx, fy, fz, fw, wx / n, wy / n, wz / n, ww / n)
    return qmul_scalar(q[0], q[1], q[2], q[3], -tpose_q[j, 0], -tpose_q[j, 1], -tpose_q[j, 2], tpose_q[j, 3])


def normalized_local(tp: TPose, world_q: np.ndarray) -> np.ndarray:
    """(F,J,4) unit: each humanoid bone's normalized rotation relative to its humanoid parent,
    N_parent⁻¹·N (hips: N), N = F·W·T⁻¹ from the model's bone world rotations ``world_q``
    (F,B,4) (see module; the engine's worlds drift ~1e-5 off unit length: made unit first), signs
    continuous over the frames."""
    world_q = np.ascontiguousarray(world_q, np.float64)
    out = np.empty((world_q.shape[0], len(tp.bones), 4))
    normalized_kernel(tp.bone, tp.parent, tp.facing_q, np.ascontiguousarray(tp.tpose_q), world_q, out)
    return out
