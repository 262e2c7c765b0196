"""BVH: a skeleton and its baked per-frame rotations (FK only: IK, append and physics applied).

In: a ``BakedMotion``, a joint set ('all' or 'humanoid'), a scale (BVH units per MMD unit,
default 1). Out: a .bvh text file (UTF-8, written atomically). Coordinates are converted once,
here, from MMD's left-handed Y-up to BVH's right-handed Y-up by negating Z (positions (x, y, −z),
rotations (−x, −y, z, w)). Rest pose = MMD's rest pose (no bind rotations), so OFFSETs are rest
position differences. Rotations are Euler angles in degrees, channel order Zrotation Xrotation
Yrotation (R = Rz·Rx·Ry).

Position channels are written so that every reader places every joint the same. Readers
disagree on what a position channel means when the OFFSET is not zero: three.js's BVHLoader
adds the OFFSET to it, Blender and Assimp replace the OFFSET by it. So a joint with position
channels always has OFFSET 0 0 0:
- the ROOT (as in the CMU files): OFFSET 0, channels Xposition Yposition Zposition Zrotation
  Xrotation Yrotation, the positions absolute (model space);
- a non-root joint whose position relative to its parent moves (translated bones such as IK
  targets, folded-in bones, physics stretch) gets a translation joint ``<name>_translation``
  between it and its parent: OFFSET 0, the same six channels, the positions holding the move
  away from the rest offset (in the parent's frame), the rotations 0 (Assimp reads positions
  only from joints with six channels); the joint itself keeps its rest OFFSET and rotation
  channels, so the rest skeleton stays MMD's;
- every other joint: rest OFFSET, rotation channels only. A joint counts as moving when leaving
  its translation out would put some joint more than POSITION_TOLERANCE off (the moves left out
  along a root-to-leaf path add up to at most that).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

from mmdkit.export.humanoid import JointSet, joint_pose, joint_set
from mmdkit.export.npz import check_scale
from mmdkit.fileutil import atomic_path
from mmdkit.model.space import Space

OPTIONS = ("joints", "scale")
POSITION_TOLERANCE = 5e-4
"""MMD units: the translations left out (joints without position channels) move no joint more
than this, summed along any root-to-leaf path."""
ROOT_NAME = "mmd_root"
"""The joint added above the model's roots when it has several (BVH has one ROOT)."""
TRANSLATION_SUFFIX = "_translation"
"""Name suffix of the joint that carries a non-root joint's translation."""
_RESERVED = str.maketrans({c: "_" for c in "[].:/\\"})
"""Characters three.js's PropertyBinding cannot have in a node name (its track names would not bind)."""
_ROT = "Zrotation Xrotation Yrotation"
_POS = "Xposition Yposition Zposition"


def _quat_to_zxy_degrees(q: np.ndarray) -> np.ndarray:
    """(..., 4) unit quaternions (x, y, z, w) → (..., 3) degrees (z, x, y) with R = Rz·Rx·Ry."""
    x, y, z, w = np.moveaxis(q, -1, 0)
    r01 = 2 * (x * y - z * w)
    r11 = 1 - 2 * (x * x + z * z)
    r21 = 2 * (y * z + x * w)
    r20 = 2 * (x * z - y * w)
    r22 = 1 - 2 * (x * x + y * y)
    a = np.arctan2(-r01, r11)
    b = np.arcsin(np.clip(r21, -1.0, 1.0))
    c = np.arctan2(-r20, r22)
    angles = np.stack([a, b, c], -1)
    return np.degrees(np.unwrap(angles, axis=0))  # no 360° jumps between frames


def _unique(names) -> list[str]:
    """Names without whitespace or three.js-reserved characters, unique (repeats get _2, _3, ...)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        n = "_".join(str(n).split()).translate(_RESERVED) or "joint"
        k = seen.get(n, 0) + 1
        seen[n] = k
        out.append(n if k == 1 else f"{n}_{k}")
    return out


def bvh_names(js: JointSet) -> list[str]:
    """The joints' BVH names: whitespace and ``[ ] . : / \\`` → _, unique (a repeat gets _2, _3, ...)."""
    return _unique(js.joint_name)


def _end_offset(model, bone: int) -> np.ndarray:
    """(3,) MMD units from a leaf joint's bone to its tail (a short upward stub if none)."""
    pos = np.asarray(model.bone_position, np.float64)
    tail = np.zeros(3)
    ti = model.bone_tail_index
    if ti is not None and ti[bone] >= 0:
        tail = pos[ti[bone]] - pos[bone]
    elif model.bone_tail_offset is not None:
        tail = np.asarray(model.bone_tail_offset[bone], np.float64)
    return tail if np.linalg.norm(tail) > 1e-6 else np.array([0.0, 0.5, 0.0])


def parents_first(parent: np.ndarray) -> list[int]:
    """The joints reachable from a root, each after its parent (a bone's parent may come later
    in a model's bone list), children in index order."""
    children: list[list[int]] = [[] for _ in parent]
    order = []
    for j, p in enumerate(parent):
        (children[p] if p >= 0 else order).append(j)
    i = 0
    while i < len(order):
        order.extend(children[order[i]])
        i += 1
    return order


def translated_joints(parent: np.ndarray, move: np.ndarray, tolerance: float) -> np.ndarray:
    """(J,) bool: joints whose translation is written. parent (J,) int (−1 roots); move (J,)
    float64: each joint's largest distance from its rest offset over the frames. A joint is
    written when leaving its move out would bring the moves left out on its path from the root
    (its own included) above ``tolerance``; the others' moves add up to at most that."""
    J = len(parent)
    keep = np.zeros(J, bool)
    left_out = np.zeros(J)  # moves left out from the root down to and including j
    for j in parents_first(parent):
        above = left_out[parent[j]] if parent[j] >= 0 else 0.0
        keep[j] = above + move[j] > tolerance
        left_out[j] = above + (0.0 if keep[j] else move[j])
    return keep


@dataclass
class _Node:
    """One BVH joint: name, OFFSET (3,) BVH units, channel names, values (F, n), children, end site."""

    name: str
    offset: np.ndarray
    channels: str
    values: np.ndarray
    children: list = field(default_factory=list)
    end: np.ndarray | None = None


def _nodes(baked, js: JointSet, s: float) -> _Node:
    """The BVH joint tree → its ROOT (ROOT_NAME above the model's roots when it has several)."""
    to_bvh = Space(scale=s, flip_z=True)  # MMD → BVH: z negated, × s
    jp = joint_pose(baked, js)
    F, J = jp.position.shape[:2]
    parent = js.joint_parent
    rest = jp.rest_position
    rest_offset = rest - np.where(parent[:, None] >= 0, rest[np.maximum(parent, 0)], 0.0)
    euler = _quat_to_zxy_degrees(to_bvh.quaternions(jp.local_rotation))  # (F,J,3)
    move = np.linalg.norm(jp.local_translation, axis=2).max(axis=0)
    roots = np.flatnonzero(parent < 0)
    synthetic = len(roots) > 1  # then the model's roots are inner joints like any other
    positioned = translated_joints(parent, move, POSITION_TOLERANCE)
    names = _unique(list(js.joint_name) + [f"{n}{TRANSLATION_SUFFIX}" for n in js.joint_name])
    has_child = np.zeros(J, bool)
    has_child[parent[parent >= 0]] = True
    nodes: list[_Node | None] = [None] * J
    tops: list[_Node] = []
    for j in parents_first(parent):
        if parent[j] < 0 and not synthetic:  # the ROOT: OFFSET 0, absolute positions
            node = top = _Node(names[j], np.zeros(3), f"{_POS} {_ROT}",
                               np.concatenate([to_bvh.points(jp.position[:, j]), euler[:, j]], axis=1))
        else:
            node = top = _Node(names[j], to_bvh.points(rest_offset[j]), _ROT, euler[:, j])
            if positioned[j]:  # a translation joint above: OFFSET 0, the move from the rest offset
                move_j = np.concatenate([to_bvh.points(jp.local_translation[:, j]), np.zeros((F, 3))], axis=1)
                top = _Node(names[J + j], np.zeros(3), f"{_POS} {_ROT}", move_j, [node])
        if not has_child[j]:
            node.end = to_bvh.points(_end_offset(baked.model, int(js.joint_bone[j])))
        nodes[j] = node
        (nodes[parent[j]].children if parent[j] >= 0 else tops).append(top)
    if synthetic:
        return _Node(ROOT_NAME, np.zeros(3), f"{_POS} {_ROT}", np.zeros((F, 6)), tops)
    return tops[0]


def _hierarchy(root: _Node) -> tuple[str, np.ndarray]:
    """The HIERARCHY text of the tree under ``root`` and its MOTION columns (F, channels) in order."""
    text = io.StringIO()
    text.write("HIERARCHY\n")
    columns: list[np.ndarray] = []
    stack: list[tuple[_Node | None, int]] = [(root, 0)]
    while stack:
        node, d = stack.pop()
        pad = "\t" * d
        if node is None:  # the closing brace of a joint
            text.write(f"{pad}}}\n")
            continue
        o = node.offset
        text.write(f"{pad}{'ROOT' if d == 0 else 'JOINT'} {node.name}\n{pad}{{\n"
                   f"{pad}\tOFFSET {o[0]:.6f} {o[1]:.6f} {o[2]:.6f}\n"
                   f"{pad}\tCHANNELS {len(node.channels.split())} {node.channels}\n")
        columns.append(node.values)
        if node.end is not None:
            e = node.end
            text.write(f"{pad}\tEnd Site\n{pad}\t{{\n{pad}\t\tOFFSET {e[0]:.6f} {e[1]:.6f} {e[2]:.6f}\n{pad}\t}}\n")
        stack.append((None, d))
        stack.extend((c, d + 1) for c in reversed(node.children))
    return text.getvalue(), np.concatenate(columns, axis=1)


def check(model, frames, *, joints=None, scale=None) -> None:
    """OptionError for a joint set the model cannot give or a bad scale (before baking)."""
    joint_set(model, joints)
    check_scale(scale)


def write(baked, path, *, motion=None, warn=print, joints=None, scale=None) -> dict:
    """``baked`` (a ``BakedMotion``) → ``path`` (.bvh); returns a summary dict."""
    js = joint_set(baked.model, joints)
    hierarchy, data = _hierarchy(_nodes(baked, js, check_scale(scale)))
    text = io.StringIO()
    text.write(hierarchy)
    text.write(f"MOTION\nFrames: {len(data)}\nFrame Time: {1.0 / baked.fps:.8f}\n")
    np.savetxt(text, data, fmt="%.6f", delimiter=" ")
    with atomic_path(path, ".bvh.part") as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text.getvalue())
    return {"path": str(path), "format": "bvh", "frames": len(data), "joints": len(js.joint_name),
            "channels": data.shape[1], "physics": baked.physics}
