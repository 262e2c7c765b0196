"""BVH: a skeleton and its baked per-frame rotations (FK only: IK, append and physics applied).

In: a ``BakedMotion``, a joint set ('all' or 'humanoid'), a scale (BVH units per MMD unit,
default 1). Out: a .bvh text file (UTF-8, written atomically). Coordinates are converted once,
here, from MMD's left-handed Y-up to BVH's right-handed Y-up by negating Z (positions (x, y, −z),
rotations (−x, −y, z, w)). Rest pose = MMD's rest pose (no bind rotations), so OFFSETs are rest
position differences. Rotations are Euler angles in degrees, channel order Zrotation Xrotation
Yrotation (R = Rz·Rx·Ry). The root, and every joint whose position relative to its parent
moves (translated bones, dropped bones in between, physics), also has Xposition Yposition
Zposition channels holding its whole parent-local position (OFFSET included, as Blender and
Assimp read them).
"""

from __future__ import annotations

import io

import numpy as np

from mmdkit.export.humanoid import JointSet, joint_pose, joint_set
from mmdkit.export.npz import check_scale
from mmdkit.fileutil import atomic_path

OPTIONS = ("joints", "scale")
POSITION_TOLERANCE = 1e-5
"""A non-root joint gets position channels when its parent-local position strays more than this
(MMD units) from its rest offset on some frame."""
ROOT_NAME = "mmd_root"
"""The joint added above the model's roots when it has several (BVH has one ROOT)."""
_FLIP = np.array([1.0, 1.0, -1.0])


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


def bvh_names(js: JointSet) -> list[str]:
    """Joint names without whitespace, unique (a repeated name gets _2, _3, ...)."""
    seen: dict[str, int] = {}
    out = []
    for n in js.joint_name:
        n = "_".join(str(n).split()) or "joint"
        k = seen.get(n, 0) + 1
        seen[n] = k
        out.append(n if k == 1 else f"{n}_{k}")
    return out


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


def _tree(parents: np.ndarray) -> tuple[list[list[int]], list[int]]:
    children: list[list[int]] = [[] for _ in parents]
    roots = []
    for j, p in enumerate(parents):
        (children[p] if p >= 0 else roots).append(j)
    return children, roots


def check(model, frames, *, joints=None, scale=None) -> None:
    """OptionError for a joint set the model cannot give or a bad scale (before baking)."""
    joint_set(model, joints)
    check_scale(scale)


def write(baked, path, *, motion=None, warn=print, joints=None, scale=None) -> dict:
    """``baked`` (a ``BakedMotion``) → ``path`` (.bvh); returns a summary dict."""
    js = joint_set(baked.model, joints)
    s = check_scale(scale)
    jp = joint_pose(baked, js)
    F, J = jp.position.shape[:2]
    rest = jp.rest_position
    rest_offset = rest - np.where(js.joint_parent[:, None] >= 0, rest[np.maximum(js.joint_parent, 0)], 0.0)
    local_pos = (rest_offset[None] + jp.local_translation) * _FLIP * s  # (F,J,3) BVH space
    q = jp.local_rotation * np.array([-1.0, -1.0, 1.0, 1.0])
    euler = _quat_to_zxy_degrees(q)  # (F,J,3)
    moves = (np.abs(jp.local_translation).max(axis=0) > POSITION_TOLERANCE).any(axis=1) | (js.joint_parent < 0)
    children, roots = _tree(js.joint_parent)
    names = bvh_names(js)
    text = io.StringIO()
    text.write("HIERARCHY\n")
    columns: list[np.ndarray] = []
    synthetic = len(roots) > 1
    depth = 0
    if synthetic:
        text.write(f"ROOT {ROOT_NAME}\n{{\n\tOFFSET 0.000000 0.000000 0.000000\n"
                   "\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n")
        columns.append(np.zeros((F, 6)))
        depth = 1
    stack = [(r, depth, False) for r in reversed(roots)]
    while stack:
        j, d, closing = stack.pop()
        pad = "\t" * d
        if closing:
            text.write(f"{pad}}}\n")
            continue
        kind = "ROOT" if d == 0 else "JOINT"
        off = rest_offset[j] * _FLIP * s
        text.write(f"{pad}{kind} {names[j]}\n{pad}{{\n{pad}\tOFFSET {off[0]:.6f} {off[1]:.6f} {off[2]:.6f}\n")
        if moves[j]:
            text.write(f"{pad}\tCHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n")
            columns.append(np.concatenate([local_pos[:, j], euler[:, j]], axis=1))
        else:
            text.write(f"{pad}\tCHANNELS 3 Zrotation Xrotation Yrotation\n")
            columns.append(euler[:, j])
        if not children[j]:
            end = _end_offset(baked.model, int(js.joint_bone[j])) * _FLIP * s
            text.write(f"{pad}\tEnd Site\n{pad}\t{{\n{pad}\t\tOFFSET {end[0]:.6f} {end[1]:.6f} {end[2]:.6f}\n"
                       f"{pad}\t}}\n")
        stack.append((j, d, True))
        stack.extend((c, d + 1, False) for c in reversed(children[j]))
    if synthetic:
        text.write("}\n")
    data = np.concatenate(columns, axis=1)
    text.write(f"MOTION\nFrames: {F}\nFrame Time: {1.0 / baked.fps:.8f}\n")
    np.savetxt(text, data, fmt="%.6f", delimiter=" ")
    with atomic_path(path, ".bvh.part") as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text.getvalue())
    return {"path": str(path), "format": "bvh", "frames": F, "joints": J, "channels": data.shape[1],
            "physics": baked.physics}
