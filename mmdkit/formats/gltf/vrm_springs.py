"""VRM spring bones as read: VRMC_springBone (1.0) or VRM 0.x ``secondaryAnimation`` → ``SpringJoints``.

In: the extension's JSON (dict), the glTF root (for node children) and the node count. Out:
``SpringJoints`` in the file's terms — glTF space, metres, node indices — or None when the file
declares no joint. J joints, C chains (1.0 ``springs[i]``; 0.x ``boneGroups[i]``), K colliders:

  joint_node (J,) int32        the node the joint rotates
  joint_tail_node (J,) int32   the node its tail follows (1.0: the next joint of the spring; 0.x: the
                               first child), -1: none (0.x leaf: a tail 7 cm along the bone)
  joint_chain (J,) int32       its chain; joint_stiffness, joint_drag, joint_gravity_power,
  joint_hit_radius (J,) float64; joint_gravity_dir (J, 3) float64 glTF space (0.x's Unity z negated)
  chain_center (C,) int32      the node of the chain's center space, -1: world
  chain_collider_start (C+1,) int32, chain_collider (E,) int32: colliders of chain c
  collider_node (K,) int32; collider_capsule (K,) bool; collider_offset, collider_tail (K, 3)
  float64 node-local glTF space (tail = offset for a sphere); collider_radius (K,) float64

Defaults are the 1.0 schema's (stiffness 1, dragForce 0.5, gravityPower 0, gravityDir −Y,
hitRadius 0). A joint already in an earlier chain, a node outside the file or a collider without a
shape is skipped with a line in ``warnings``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VIRTUAL_TAIL_METRES = 0.07
"""A VRM 0.x chain's leaf bone gets a tail this far along its bone (UniVRM's and three-vrm's 7 cm)."""


@dataclass(frozen=True, eq=False)
class SpringJoints:
    joint_node: np.ndarray
    joint_tail_node: np.ndarray
    joint_chain: np.ndarray
    joint_stiffness: np.ndarray
    joint_drag: np.ndarray
    joint_gravity_power: np.ndarray
    joint_hit_radius: np.ndarray
    joint_gravity_dir: np.ndarray
    chain_center: np.ndarray
    chain_collider_start: np.ndarray
    chain_collider: np.ndarray
    collider_node: np.ndarray
    collider_capsule: np.ndarray
    collider_offset: np.ndarray
    collider_tail: np.ndarray
    collider_radius: np.ndarray

    @property
    def num_joints(self) -> int:
        return len(self.joint_node)


def _num(x, default: float) -> float:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else default


def _node(x, n: int) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n else -1


def items(d, key: str) -> list:
    """``d[key]`` when ``d`` is an object and that is a list, else [] (a malformed entry is skipped)."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, list) else []


def _vec(x, default, flip_z: bool = False) -> tuple:
    if isinstance(x, dict):  # 0.x {x, y, z}
        v = [_num(x.get(k), d) for k, d in zip("xyz", default)]
    elif isinstance(x, list) and len(x) == 3:
        v = [_num(a, d) for a, d in zip(x, default)]
    else:
        v = list(default)
    if flip_z:
        v[2] = -v[2]
    return tuple(v)


class _Builder:
    """Rows collected chain by chain, frozen into ``SpringJoints``."""

    def __init__(self, n_nodes: int):
        self.n = n_nodes
        self.joints: list[tuple] = []
        self.seen: set[int] = set()
        self.centers: list[int] = []
        self.chain_colliders: list[list[int]] = []
        self.colliders: list[tuple] = []
        self.skipped = 0

    def joint(self, node: int, tail: int, params: tuple) -> None:
        if node < 0 or node in self.seen:
            self.skipped += 1
            return
        self.seen.add(node)
        self.joints.append((node, tail, len(self.centers) - 1) + params)

    def freeze(self) -> SpringJoints | None:
        if not self.joints:
            return None
        j, col = self.joints, self.colliders
        num = lambda rows, k: np.array([r[k] for r in rows], np.float64).reshape(len(rows))
        vec = lambda rows, k: np.array([r[k] for r in rows], np.float64).reshape(len(rows), 3)
        start = np.cumsum([0] + [len(c) for c in self.chain_colliders]).astype(np.int32)
        out = SpringJoints(
            joint_node=np.array([r[0] for r in j], np.int32), joint_tail_node=np.array([r[1] for r in j], np.int32),
            joint_chain=np.array([r[2] for r in j], np.int32), joint_stiffness=num(j, 3), joint_drag=num(j, 4),
            joint_gravity_power=num(j, 5), joint_hit_radius=num(j, 6), joint_gravity_dir=vec(j, 7),
            chain_center=np.array(self.centers, np.int32), chain_collider_start=start,
            chain_collider=np.array([k for c in self.chain_colliders for k in c], np.int32),
            collider_node=np.array([c[0] for c in col], np.int32).reshape(len(col)),
            collider_capsule=np.array([c[1] for c in col], bool).reshape(len(col)),
            collider_offset=vec(col, 2), collider_tail=vec(col, 3), collider_radius=num(col, 4))
        for a in vars(out).values():
            a.flags.writeable = False
        return out


def _params_1x(j: dict) -> tuple:
    return (max(0.0, _num(j.get("stiffness"), 1.0)), min(1.0, max(0.0, _num(j.get("dragForce"), 0.5))),
            _num(j.get("gravityPower"), 0.0), max(0.0, _num(j.get("hitRadius"), 0.0)),
            _vec(j.get("gravityDir"), (0.0, -1.0, 0.0)))


def _colliders_1x(ext: dict, b: _Builder) -> list[list[int]]:
    """The file's colliders into ``b``; returns per collider group its rows in ``b.colliders``."""
    rows = []
    for c in items(ext, "colliders"):
        shape = c.get("shape") if isinstance(c, dict) and isinstance(c.get("shape"), dict) else {}
        node = _node(c.get("node"), b.n) if isinstance(c, dict) else -1
        s, cap = shape.get("sphere"), shape.get("capsule")
        if node >= 0 and isinstance(s, dict):
            off = _vec(s.get("offset"), (0.0, 0.0, 0.0))
            rows.append(len(b.colliders))
            b.colliders.append((node, False, off, off, max(0.0, _num(s.get("radius"), 0.0))))
        elif node >= 0 and isinstance(cap, dict):
            rows.append(len(b.colliders))
            b.colliders.append((node, True, _vec(cap.get("offset"), (0.0, 0.0, 0.0)),
                                _vec(cap.get("tail"), (0.0, 0.0, 0.0)), max(0.0, _num(cap.get("radius"), 0.0))))
        else:
            rows.append(-1)
            b.skipped += 1
    groups = []
    for g in items(ext, "colliderGroups"):
        ids = g.get("colliders") if isinstance(g, dict) and isinstance(g.get("colliders"), list) else []
        groups.append([rows[k] for k in ids if _node(k, len(rows)) >= 0 and rows[k] >= 0])
    return groups


def read_springs_1x(ext, root: dict, n_nodes: int, warnings: list[str]) -> SpringJoints | None:
    """VRMC_springBone → ``SpringJoints`` (see module)."""
    if not isinstance(ext, dict):
        return None
    b = _Builder(n_nodes)
    groups = _colliders_1x(ext, b)
    for s in items(ext, "springs"):
        joints = [j for j in items(s, "joints") if isinstance(j, dict)] if isinstance(s, dict) else []
        nodes = [_node(j.get("node"), n_nodes) for j in joints]
        if len(nodes) < 2:
            b.skipped += len(nodes)
            continue
        b.centers.append(_node(s.get("center"), n_nodes))
        b.chain_colliders.append(sorted({k for g in items(s, "colliderGroups") if _node(g, len(groups)) >= 0
                                         for k in groups[g]}))
        for i in range(len(nodes) - 1):  # the last joint is only a tail
            b.joint(nodes[i], nodes[i + 1], _params_1x(joints[i]))
    if b.skipped:
        warnings.append(f"VRMC_springBone: {b.skipped} joints or colliders without a valid node or shape skipped")
    return b.freeze()


def _children(root: dict, n_nodes: int) -> list[list[int]]:
    nodes = root.get("nodes") if isinstance(root.get("nodes"), list) else []
    return [[c for c in items(n, "children") if _node(c, n_nodes) >= 0] if isinstance(n, dict) else []
            for n in nodes[:n_nodes]]


def read_springs_0x(sec, root: dict, n_nodes: int, warnings: list[str]) -> SpringJoints | None:
    """VRM 0.x ``secondaryAnimation`` → ``SpringJoints`` (see module)."""
    if not isinstance(sec, dict):
        return None
    b = _Builder(n_nodes)
    groups = []
    for g in items(sec, "colliderGroups"):
        node = _node(g.get("node"), n_nodes) if isinstance(g, dict) else -1
        rows = []
        for c in items(g, "colliders") if node >= 0 else ():
            if isinstance(c, dict):
                off = _vec(c.get("offset"), (0.0, 0.0, 0.0), flip_z=True)  # Unity → glTF
                rows.append(len(b.colliders))
                b.colliders.append((node, False, off, off, max(0.0, _num(c.get("radius"), 0.0))))
        b.skipped += node < 0
        groups.append(rows)
    children = _children(root, n_nodes)
    for g in items(sec, "boneGroups"):
        if not isinstance(g, dict):
            continue
        params = (max(0.0, _num(g.get("stiffiness", g.get("stiffness")), 1.0)),
                  min(1.0, max(0.0, _num(g.get("dragForce"), 0.5))), _num(g.get("gravityPower"), 0.0),
                  max(0.0, _num(g.get("hitRadius"), 0.0)),
                  _vec(g.get("gravityDir"), (0.0, -1.0, 0.0), flip_z=True))
        b.centers.append(_node(g.get("center"), n_nodes))
        b.chain_colliders.append(sorted({k for i in items(g, "colliderGroups") if _node(i, len(groups)) >= 0
                                         for k in groups[i]}))
        for r in items(g, "bones"):
            stack = [_node(r, n_nodes)]
            while stack:
                node = stack.pop()
                if node < 0:
                    b.skipped += 1
                    continue
                kids = children[node] if node < len(children) else []
                b.joint(node, kids[0] if kids else -1, params)
                stack.extend(reversed(kids))
    if b.skipped:
        warnings.append(f"VRM 0.x secondaryAnimation: {b.skipped} bones or collider groups without a valid "
                        "node (or already in a chain) skipped")
    return b.freeze()
