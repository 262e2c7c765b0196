"""What the viewer page needs once: the GLB's joints and morph targets mapped to the model, and the
skeleton, rigid bodies and physics joints in glTF space.

In: a ``Model`` and the GLB bytes written for it (mmdkit's glTF exporter: one skin whose joints are
named after bones, morph targets named in ``extras.targetNames``), ``scale`` (glTF units per MMD
unit). Out: ``glb_json`` (the GLB's JSON chunk), ``skin_map`` (joint_bone (J,), target_morph (T,)
int arrays, −1 where no bone/morph has that name) and ``scene_info`` (a JSON-ready dict).
"""

from __future__ import annotations

import json
import struct
from collections import defaultdict

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.model.space import Space
from mmdkit.physics.setup import body_frames
from mmdkit.skinning.bounds import BoneBoxes
from mmdkit.viewer.frames import gltf_bones

GLB_MAGIC, JSON_CHUNK = 0x46546C67, 0x4E4F534A


def glb_json(glb: bytes) -> dict:
    """The JSON chunk of a GLB (FormatError if ``glb`` is not one)."""
    if len(glb) < 20:
        raise FormatError("viewer: the model's GLB is truncated")
    magic, _, _ = struct.unpack_from("<III", glb, 0)
    length, kind = struct.unpack_from("<II", glb, 12)
    if magic != GLB_MAGIC or kind != JSON_CHUNK or 20 + length > len(glb):
        raise FormatError("viewer: the model's GLB has no JSON chunk")
    return json.loads(glb[20:20 + length].decode("utf-8"))


def _by_name(wanted, names) -> np.ndarray:
    """(len(wanted),) int: index in ``names`` of each wanted name, the k-th repeat of a name taking
    its k-th occurrence; −1 where there is none."""
    where = defaultdict(list)
    for i, n in enumerate(names):
        where[n].append(i)
    seen = defaultdict(int)
    out = np.full(len(wanted), -1, np.int64)
    for k, n in enumerate(wanted):
        hits = where.get(n, [])
        if seen[n] < len(hits):
            out[k] = hits[seen[n]]
        seen[n] += 1
    return out


def skin_map(model, doc: dict) -> tuple[np.ndarray, np.ndarray]:
    """(joint_bone (J,), target_morph (T,)) of the GLB ``doc``: each skin joint's bone and each morph
    target's model morph (first mesh with targets); empty arrays where the GLB has none."""
    nodes = doc.get("nodes", [])
    skins = doc.get("skins", [])
    joints = [nodes[j].get("name", "") for j in skins[0]["joints"]] if skins else []
    targets = []
    for mesh in doc.get("meshes", []):
        targets = list((mesh.get("extras") or {}).get("targetNames", []))
        if targets:
            break
    return _by_name(joints, model.bone_name), _by_name(targets, model.morph_name)


def _frames_json(m: np.ndarray, space: Space) -> list:
    """(N, 4, 4) MMD frames → [[px, py, pz, qx, qy, qz, qw], …] in glTF space."""
    return np.round(gltf_bones(m, space), 6).tolist()


def scene_info(model, *, scale: float, joint_bone: np.ndarray, target_morph: np.ndarray) -> dict:
    """Skeleton (names, parents, rest positions), bone hit boxes (``mmdkit.skinning.bounds.BoneBoxes``:
    centre from the bone, size; none for a bone that moves no vertex), rigid bodies (bone, shape,
    size, rest frame) and physics joints (body A, rest frame), glTF space, for the page's overlays."""
    space = Space(scale=scale, flip_z=True)
    boxes = BoneBoxes(model) if model.num_vertices else None
    R, J = model.num_rigid_bodies, model.num_joints
    bodies = body_frames(model.rigid_body_position, model.rigid_body_rotation) if R else np.zeros((0, 4, 4))
    joints = body_frames(model.joint_position, model.joint_rotation) if J else np.zeros((0, 4, 4))
    return {
        "name": model.name,
        "bone_name": list(model.bone_name),
        "bone_parent": np.asarray(model.bone_parent, np.int64).tolist(),
        "bone_rest": np.round(space.points(model.bone_position), 6).tolist(),
        "joint_bone": joint_bone.tolist(),
        "hitbox_center": np.round(space.points(boxes.rest_center), 6).tolist() if boxes else [],
        "hitbox_size": np.round(2 * boxes.half_extent * scale * boxes.valid[:, None], 6).tolist() if boxes else [],
        "target_morph": target_morph.tolist(),
        "body_bone": np.asarray(model.rigid_body_bone if R else [], np.int64).tolist(),
        "body_shape": np.asarray(model.rigid_body_shape if R else [], np.int64).tolist(),
        "body_size": np.round(np.asarray(model.rigid_body_size if R else np.zeros((0, 3)), np.float64) * scale,
                              6).tolist(),
        "body_dynamic": np.asarray(model.rigid_body_mode if R else [], np.int64).tolist(),
        "body_rest": _frames_json(bodies, space),
        "joint_body": np.asarray(model.joint_body_a if J else [], np.int64).tolist(),
        "joint_rest": _frames_json(joints, space),
    }
