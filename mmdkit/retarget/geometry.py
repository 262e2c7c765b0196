"""Humanoid labels from the skeleton's shape alone: chains, symmetry and heights at rest.

In: a ``Model`` (bone_position (B, 3) rest, model space; bone_parent; flags; vertex weights) and
``seed`` {humanoid name: bone} already known from the file or names (used as anchors). Out:
``geometry_labels(model, seed)`` → {humanoid name: bone index} for hips, spine, chest,
upperChest, neck, head and per side UpperLeg, LowerLeg, Foot, Toes, Shoulder, UpperArm, LowerArm,
Hand — whatever the shape shows; the caller keeps only what names did not give.

Rules (model space: +y up; the character's left is +x — MMD files and the importers' MMD space
alike, checked on Gene, CesiumMan, RobotExpressive and the CMU BVH):
- joints: bones that rotate, are not IK, fixed-axis (twist) or append followers (D bones, 腕捩連),
  and deform something (a weighted vertex in their subtree, a weighted follower counting for the
  bone it follows; without a mesh, a leaf in their subtree that is not an IK bone or below one) —
  helper bones such as 足IK親 drop out;
- legs: the lowest joint on each side; hips = their lowest common ancestor; each path down is
  upperLeg (first joint off the hips), foot (last joint above 3% of the height), toes (the next),
  lowerLeg (the joint between nearest mid-height);
- arms: the joint farthest out on each side; their common ancestor is the upper spine; hand = the
  deepest joint of the path with two or more joint children (fingers), else its end; before it
  shoulder (when 3+ joints), then upperArm/lowerArm (the split whose two segments are most equal);
- torso: the joints between the hips (or the bone both hips and the upper spine hang from) and the
  upper spine: spine, chest, upperChest in order; head: the path from the upper spine to the
  highest joint outside the arms: neck, then head (only head when one joint).
Joints closer than 1% of the height to the previous one on a path count once (the deeper one).
"""

from __future__ import annotations

import numpy as np

from mmdkit.model.model import BONE_APPEND_ROTATION, BONE_FIXED_AXIS, BONE_IK, BONE_ROTATABLE


def joint_bones(model, tree=None) -> np.ndarray:
    """(B,) bool: bones that can be humanoid joints (see module)."""
    flags = np.asarray(model.bone_flags, np.int64)
    parent = np.asarray(model.bone_parent)
    B = len(parent)
    append = np.asarray(model.bone_append_parent)
    ratio = np.asarray(model.bone_append_ratio, np.float64)
    follower = (append >= 0) & ((flags & BONE_APPEND_ROTATION) != 0) & (ratio != 0)
    ok = ((flags & BONE_ROTATABLE) != 0) & ((flags & (BONE_IK | BONE_FIXED_AXIS)) == 0) & ~follower
    tree = tree or _Tree(parent)
    if model.num_vertices:
        w = np.asarray(model.vertex_bone_weight) > 0
        idx = np.asarray(model.vertex_bone_index)[w]
        weighted = np.bincount(idx[(idx >= 0) & (idx < B)], minlength=B)[:B] > 0
        lead = append[follower & weighted]
        weighted[lead[lead >= 0]] = True
    else:  # no mesh: the leaves that are not IK bones or below one stand for weighted bones
        in_ik = (flags & BONE_IK) != 0
        for b in tree.order:
            if parent[b] >= 0 and in_ik[parent[b]]:
                in_ik[b] = True
        leaf = np.ones(B, bool)
        leaf[parent[parent >= 0]] = False
        weighted = leaf & ~in_ik
    for b in reversed(tree.order):  # children before parents
        p = parent[b]
        if weighted[b] and p >= 0:
            weighted[p] = True
    ok &= weighted
    return ok


def ancestors(parent: np.ndarray, b: int) -> list[int]:
    """Bone ``b`` and its ancestors in bone_parent (B,), root last (stops after B bones on a cycle)."""
    out = []
    while b >= 0 and len(out) <= len(parent):
        out.append(b)
        b = int(parent[b])
    return out


class _Tree:
    """Parents-first order, ancestor paths, subtrees (Euler tour) and common ancestors of bone_parent (B,)."""

    def __init__(self, parent: np.ndarray):
        B = len(parent)
        self.parent = parent
        kids: list[list[int]] = [[] for _ in range(B)]
        roots = []
        for b, p in enumerate(parent.tolist()):
            (kids[p] if 0 <= p < B and p != b else roots).append(b)
        self.tin = np.full(B, -1, np.int64)
        self.tout = np.zeros(B, np.int64)
        order, t = [], 0
        stack = [(r, False) for r in reversed(roots)]
        while stack:  # a cycle (never in loaded models) leaves its bones unvisited: they stay alone
            b, done = stack.pop()
            if done:
                self.tout[b] = t
                continue
            self.tin[b], t = t, t + 1
            order.append(b)
            stack.append((b, True))
            stack += [(k, False) for k in reversed(kids[b])]
        self.order = order

    def chain(self, b: int) -> list[int]:
        """b and its ancestors, root last."""
        return ancestors(self.parent, b)

    def lca(self, a: int, b: int) -> int:
        above = set(self.chain(a))
        return next((c for c in self.chain(b) if c in above), -1)

    def path(self, top: int, b: int) -> list[int]:
        """Bones from below ``top`` down to ``b`` (top excluded), or [] when top is not above b."""
        c = self.chain(b)
        return c[:c.index(top)][::-1] if top in c else []

    def below(self, top: int) -> np.ndarray:
        """(B,) bool: ``top`` and its descendants."""
        return (self.tin >= self.tin[top]) & (self.tin < self.tout[top]) & (self.tin >= 0)

    def nearest(self, mask: np.ndarray) -> np.ndarray:
        """(B,) int64: each bone's nearest proper ancestor inside ``mask`` (-1 none)."""
        out = np.full(len(self.parent), -1, np.int64)
        for b in self.order:
            p = int(self.parent[b])
            if p >= 0:
                out[b] = p if mask[p] else out[p]
        return out


def _points(path: list[int], joint: np.ndarray, pos: np.ndarray, near: float, start: np.ndarray) -> list[int]:
    """Joints of ``path``, a joint within ``near`` of the previous kept one (or of ``start``) replacing it."""
    out: list[int] = []
    for b in path:
        if not joint[b]:
            continue
        prev = pos[out[-1]] if out else start
        if np.linalg.norm(pos[b] - prev) < near:
            if out:
                out[-1] = b
            continue
        out.append(b)
    return out


def _legs(side, pts, pos, floor, height, out):
    if len(pts) < 2:
        return
    out[f"{side}UpperLeg"] = pts[0]
    above = [i for i, b in enumerate(pts) if pos[b, 1] - floor >= 0.03 * height]
    f = above[-1] if above else len(pts) - 1
    if f == 0:
        return
    out[f"{side}Foot"] = pts[f]
    if f + 1 < len(pts):
        out[f"{side}Toes"] = pts[f + 1]
    if f >= 2:
        mid = 0.5 * (pos[pts[0], 1] + pos[pts[f], 1])
        out[f"{side}LowerLeg"] = min(pts[1:f], key=lambda b: abs(pos[b, 1] - mid))


def _arm(side, pts, pos, nchild, out):
    if len(pts) < 2:
        return
    hands = [i for i, b in enumerate(pts) if i >= 2 and nchild[b] >= 2]
    h = hands[-1] if hands else len(pts) - 1
    out[f"{side}Hand"] = pts[h]
    before = pts[:h]
    if len(before) >= 3:
        out[f"{side}Shoulder"] = before[0]
        before = before[1:]
    if len(before) == 1:
        out[f"{side}UpperArm"] = before[0]
        return
    hand = pos[pts[h]]
    best = min(((u, e) for e in range(1, len(before)) for u in range(e)),
               key=lambda ue: abs(np.linalg.norm(pos[before[ue[1]]] - pos[before[ue[0]]])
                                  - np.linalg.norm(hand - pos[before[ue[1]]])) + 0.05 * ue[0])
    out[f"{side}UpperArm"], out[f"{side}LowerArm"] = before[best[0]], before[best[1]]


def _facing_plus_z(seed: dict[str, int], pos: np.ndarray) -> bool | None:
    """True when a seeded left bone lies at -x (the character faces +z, as VRM 0.x files do),
    False when at +x, None when no seed says."""
    for side in ("left", "right"):
        for part in ("UpperLeg", "UpperArm", "Shoulder", "Foot", "Hand"):
            b = seed.get(f"{side}{part}", -1)
            if b >= 0 and abs(pos[b, 0]) > 1e-6:
                return (pos[b, 0] < 0) == (side == "left")
    return None


def geometry_labels(model, seed: dict[str, int] | None = None) -> dict[str, int]:
    """{humanoid name: bone} from the rest skeleton (see module); ``seed`` anchors hips, upper legs
    and upper arms/shoulders where the file or the names already gave them. Sides: the left is +x
    when the character faces -z (MMD's way), -x when it faces +z (VRM 0.x); the facing comes from
    the seeds, else from the toes (in front of the feet), else MMD's."""
    seed = seed or {}
    B = model.num_bones
    if B < 5:
        return {}
    pos = np.asarray(model.bone_position, np.float64)
    tree = _Tree(np.asarray(model.bone_parent, np.int64))
    joint = joint_bones(model, tree)
    if joint.sum() < 5:
        joint = np.ones(B, bool)
    ys = pos[joint, 1]
    floor, height = float(ys.min()), float(ys.max() - ys.min())
    if height <= 0:
        return {}
    flip = _facing_plus_z(seed, pos)
    names = {"pos": "right" if flip else "left", "neg": "left" if flip else "right"}
    inner = {f"{k}{n[len(v):]}": b for k, v in names.items() for n, b in seed.items() if n.startswith(v)}
    inner.update({n: b for n, b in seed.items() if not n.startswith(("left", "right"))})
    out: dict[str, int] = {}
    _body(tree, joint, pos, floor, height, inner, out)
    if flip is None:
        fwd = [pos[out[f"{s}Toes"], 2] - pos[out[f"{s}Foot"], 2] for s in ("pos", "neg")
               if f"{s}Toes" in out and f"{s}Foot" in out]
        flip = bool(fwd) and float(np.mean(fwd)) > 0
        names = {"pos": "right" if flip else "left", "neg": "left" if flip else "right"}
    return {(names[n[:3]] + n[3:] if n[:3] in names else n): b for n, b in out.items()}


def _body(tree, joint, pos, floor, height, seed, out):
    """Legs, then arms, torso and head, sides named 'pos' (+x) and 'neg' (-x)."""
    B = len(joint)
    near, side_x = 0.01 * height, 0.02 * height
    hips = seed.get("hips", -1)
    lows = {}
    for side, sign in (("pos", 1.0), ("neg", -1.0)):
        start = seed.get(f"{side}UpperLeg", -1)
        pool = joint & (sign * pos[:, 0] > side_x)
        if start >= 0:
            pool &= tree.below(start)
        elif hips >= 0:
            pool &= tree.below(hips)
        if pool.any():
            cand = np.flatnonzero(pool)
            lows[side] = int(cand[np.argmin(pos[cand, 1])])
    if len(lows) < 2:
        return
    if hips < 0:
        hips = tree.lca(lows["pos"], lows["neg"])
        if hips < 0:
            return
    out["hips"] = hips
    legs = np.zeros(B, bool)
    for side in ("pos", "neg"):
        start = seed.get(f"{side}UpperLeg", -1)
        path = ([start] + tree.path(start, lows[side])) if start >= 0 else tree.path(hips, lows[side])
        pts = _points(path, joint, pos, near, pos[hips])
        _legs(side, pts, pos, floor, height, out)
        if pts:
            legs |= tree.below(pts[0])
    _upper(tree, joint, pos, near, side_x, hips, legs, seed, out)


def _upper(tree, joint, pos, near, side_x, hips, legs, seed, out):
    """Arms, torso and head (see module)."""
    cand_parent = tree.nearest(joint)
    nchild = np.bincount(cand_parent[joint & (cand_parent >= 0)], minlength=len(joint))
    ends, starts = {}, {}
    for side, sign in (("pos", 1.0), ("neg", -1.0)):
        start = seed.get(f"{side}Shoulder", seed.get(f"{side}UpperArm", -1))
        pool = joint & ~legs & (sign * pos[:, 0] > side_x)
        if start >= 0:
            pool &= tree.below(start)
        if pool.any():
            cand = np.flatnonzero(pool)
            ends[side], starts[side] = int(cand[np.argmax(sign * pos[cand, 0])]), start
    if len(ends) < 2:
        return
    a, b = (starts[s] if starts[s] >= 0 else ends[s] for s in ("pos", "neg"))
    top = tree.lca(a, b)
    if top < 0:
        return
    if top in (starts["pos"], starts["neg"]):
        top = int(tree.parent[top])
    arms = np.zeros(len(joint), bool)
    for side in ("pos", "neg"):
        pts = _points(tree.path(top, ends[side]), joint, pos, near, pos[top])
        _arm(side, pts, pos, nchild, out)
        if pts:
            arms |= tree.below(pts[0])
    root = hips if hips in tree.chain(top) else tree.lca(hips, top)
    torso = _points(tree.path(root, top) + [top] if root != top else [], joint, pos, near, pos[root])
    torso = [t for t in torso if t != top] + ([top] if joint[top] else [])
    torso = list(dict.fromkeys(b for b in torso if b != hips))
    for name, b in zip(("spine", "chest"), torso):
        out[name] = b
    if len(torso) >= 3:
        out["upperChest"] = torso[-1]
    pool = joint & tree.below(top) & ~arms & ~legs
    pool[top] = False
    if pool.any():
        cand = np.flatnonzero(pool)
        head_top = int(cand[np.argmax(pos[cand, 1])])
        pts = _points(tree.path(top, head_top), joint, pos, near, pos[top])
        if len(pts) == 1:
            out["head"] = pts[0]
        elif len(pts) >= 2:
            out["neck"], out["head"] = pts[0], pts[1]
