"""The target written in its own terms: twist bones, append sources, IK keys (MMD targets).

In: the target ``Model`` and its ``HumanoidMap``; per frame the target's local rotations
local_q (F,B,4) and translations local_t (F,B,3) (parent-local, MMD units) as the retarget made
them, and world positions world_p (F,B,3) model space of that pose. Out (in place / returned):
- ``split_twist``: the twist a forearm (ひじ) has about the 腕捩 axis, relative to the upper arm,
  moves onto 腕捩, and the hand's twist about the 手捩 axis onto 手捩 — the twist between two
  humanoid bones happens along the twist bone between them, as the model's author rigged it (its
  followers 腕捩1..3 deform the sleeve); ひじ and 手首 keep the swing. Every humanoid bone's world
  rotation stays the source's (腕 keeps its own roll), so an MMD → VRM → MMD trip comes back exact;
- ``to_append_sources``: a keyed bone that takes its rotation by append (付与) from an unkeyed bone
  has its rotation written to that source instead (scaled by 1 / ratio);
- ``ik_keys``: each IK solver whose chain holds a keyed bone gets its IK bone keyed at the world
  position its target bone has in the pose (足ＩＫ at the ankle, つま先ＩＫ at the toe), so the
  result plays with IK on; solvers that cannot be keyed so (an IK bone under a rotated bone) are
  listed to be switched off.
"""

from __future__ import annotations

import numpy as np

from mmdkit.model import model as M
from mmdkit.retarget.geometry import ancestors
from mmdkit.retarget.quat import qconj, qmul, qpow, twist_swing


def _axis(model, b: int) -> np.ndarray | None:
    ax = np.asarray(model.bone_fixed_axis[b], np.float64)
    n = np.linalg.norm(ax)
    return ax / n if (int(model.bone_flags[b]) & M.BONE_FIXED_AXIS) and n > 1e-9 else None


def split_twist(model, hmap, local_q: np.ndarray) -> list[int]:
    """Move twist onto 腕捩/手捩 (see module); returns the twist bones now keyed."""
    parent = np.asarray(model.bone_parent)
    keyed = []
    for side in ("left", "right"):
        upper, lower, hand = hmap[f"{side}UpperArm"], hmap[f"{side}LowerArm"], hmap[f"{side}Hand"]
        for twist_name, top, below in ((f"{side}UpperArmTwist", upper, lower), (f"{side}LowerArmTwist", lower, hand)):
            t = hmap.extra.get(twist_name, -1)
            if t < 0 or top < 0 or below < 0:
                continue
            axis = _axis(model, t)
            chain = ancestors(parent, below)
            if axis is None or t not in chain or top not in chain[chain.index(t):]:
                continue
            tw, swing = twist_swing(local_q[:, below], axis)  # below = twist · swing, both in t's frame
            local_q[:, below] = swing
            local_q[:, t] = qmul(local_q[:, t], tw)
            keyed.append(t)
    return keyed


def to_append_sources(model, keyed: set, local_q: np.ndarray) -> None:
    """Rotations of keyed append followers written to their unkeyed sources; a keyed follower whose
    source is keyed too (another follower wrote it: both eyes of 両目) keeps only what the append
    does not give it (see module)."""
    flags = np.asarray(model.bone_flags)

    def follows(b: int) -> tuple[int, float]:
        s, r = int(model.bone_append_parent[b]), float(model.bone_append_ratio[b])
        ok = s >= 0 and (int(flags[b]) & M.BONE_APPEND_ROTATION) and abs(r) >= 1e-6
        return (s, r) if ok else (-1, 0.0)

    for b in sorted(keyed):
        s, r = follows(b)
        if s < 0 or s in keyed:
            continue
        local_q[:, s] = qpow(local_q[:, b], 1.0 / r)
        local_q[:, b] = (0.0, 0.0, 0.0, 1.0)
        keyed.discard(b)
        keyed.add(s)
    for b in sorted(keyed):  # local = append ⊗ animated (pose.fk): animated = append⁻¹ ⊗ wanted
        s, r = follows(b)
        if s >= 0 and s in keyed:
            local_q[:, b] = qmul(qconj(qpow(local_q[:, s], r)), local_q[:, b])


def ik_keys(model, keyed: set, translated: set, local_t: np.ndarray, world_p: np.ndarray) -> tuple[list, list]:
    """Key the IK bones of solvers over keyed bones (see module); (IK bones keyed, IK bone names to
    switch off). ``translated``: bones keyed with a translation only (センター)."""
    parent = np.asarray(model.bone_parent)
    position = np.asarray(model.bone_position, np.float64)
    start = np.asarray(model.ik_link_start)
    solvers = [k for k in range(len(model.ik_bone))
               if any(int(b) in keyed for b in model.ik_link_bone[start[k]:start[k + 1]])]
    solvers.sort(key=lambda k: len(ancestors(parent, int(model.ik_bone[k]))))
    done, off = [], []
    for k in solvers:
        ik, tgt = int(model.ik_bone[k]), int(model.ik_target[k])
        above = ancestors(parent, ik)[1:]
        if any(a in keyed for a in above) or not 0 <= tgt < len(parent):
            off.append(model.bone_name[ik])
            continue
        moved = [a for a in above if a in translated or a in done]
        local_t[:, ik] = world_p[:, tgt] - position[ik] - sum((local_t[:, a] for a in moved), np.zeros(3))
        done.append(ik)
    return done, off
