"""glTF 2.0 / GLB writer: a ``Model`` and its ``BakedMotion`` → one skinned, animated glTF scene.

In: the model, the baked motion (``mmdkit.export.bake``; None: the mesh and skeleton only), an
optional camera ``Motion``, ``scale`` (metres per MMD unit, default 1/12.5) and ``reduce``.
Out: a .glb (everything inside) or .gltf (+ .bin and images beside); a summary dict.
The only place MMD space becomes glTF space: z flipped (points z → −z, quaternions (x, y, z, w)
→ (−x, −y, z, w), triangle winding reversed) and units × scale. Joints = bones that move a
vertex and their ancestors; IK, append and physics come baked, so no helper bones, rigid bodies
or constraints are written. One clip, LINEAR keys at the baked frames (time = motion frame / 30 s),
reduced so every joint and skinned vertex stays within the tolerance of the baked pose.
"""

from __future__ import annotations

import os

import numpy as np

from mmdkit.animation.frames import MOTION_FPS
from mmdkit.errors import OptionError, check_number
from mmdkit.export.gltf.animation import (Channel, add_animation, camera_channels, camera_pose, joint_channels,
                                          skeleton, weight_channel)
from mmdkit.export.gltf.container import GltfDocument
from mmdkit.export.gltf.materials import add_materials
from mmdkit.export.gltf.mesh import add_mesh, deforming_bones, mesh_arrays
from mmdkit.export.gltf.reduce import subtree_reach
from mmdkit.model.space import MMD_UNITS_PER_METRE, Space

OPTIONS = ("camera", "scale", "reduce")
TOLERANCE = 1e-4
"""Default key-reduction tolerance, × the model's height (vertex extent along Y, MMD units)."""
CAMERA_NEAR, CAMERA_FAR = 0.5, 2000.0
"""Clip planes of the exported camera, MMD units (the renderer's defaults)."""

__all__ = ["write", "write_gltf", "check", "OPTIONS", "TOLERANCE", "tolerance_for"]


def tolerance_for(model, reduce) -> float | None:
    """Key-reduction tolerance in MMD units: ``reduce`` True → TOLERANCE × model height, a number
    → that many MMD units, False / 0 → None (a key on every frame)."""
    if reduce is None or reduce is True:
        pts = model.vertex_position if model.num_vertices else model.bone_position
        height = float(np.ptp(pts[:, 1])) if len(pts) else 0.0
        return TOLERANCE * (height if height > 0 else MMD_UNITS_PER_METRE)
    if reduce is False:
        return None
    return check_number(reduce, "reduce", zero_ok=True) or None


def _times(frames: np.ndarray) -> np.ndarray:
    """(F,) float64 seconds from the first baked frame; OptionError unless increasing in float32."""
    t = (np.asarray(frames, np.float64) - frames[0]) / MOTION_FPS
    if len(t) > 1 and not (np.diff(t.astype(np.float32)) > 0).all():
        raise OptionError("frames", "glTF animations need increasing frames, each later than the one before")
    return t


def _check_camera(camera) -> None:
    if not getattr(camera, "num_camera_keys", 0):
        raise OptionError("camera", f"{getattr(camera, 'source_path', '') or 'the camera motion'} has no camera keys")


def check(model, frames, *, camera=None, scale=None, reduce=True) -> None:
    """OptionError for a bad scale, tolerance or camera, or frames that do not increase — run by
    ``mmdkit.export.export`` before the (long) bake."""
    check_number(scale, "scale", default=1.0 / MMD_UNITS_PER_METRE)
    tolerance_for(model, reduce)
    _times(np.asarray(frames, np.float64).reshape(-1))
    if camera is not None:
        _check_camera(camera)


def _camera_node(doc, camera, frames, space, time, tolerance, warn) -> tuple[int, list[Channel]]:
    """A camera node following the camera ``Motion`` at ``frames``; (node, its channels)."""
    _check_camera(camera)
    eye, rotation, fov = camera_pose(camera, frames, space)
    if np.ptp(fov) > 0:
        warn(f"camera fov changes ({fov.min():g}° to {fov.max():g}°); glTF cannot animate it, "
             f"the exported camera keeps {fov[0]:g}°")
    cam = doc.add("cameras", {"type": "perspective", "name": "MMD camera", "perspective": {
        "yfov": float(np.radians(fov[0])), "znear": CAMERA_NEAR * space.scale, "zfar": CAMERA_FAR * space.scale}})
    node = doc.add("nodes", {"name": "MMD camera", "camera": cam, "translation": [float(v) for v in eye[0]],
                             "rotation": [float(v) for v in rotation[0]]})
    return node, camera_channels(eye, rotation, time, tolerance, node)


def _reach(model, mesh, skel, space) -> np.ndarray:
    """(J,) float64 glTF units: farthest skinned point (morphs at full weight) from each joint."""
    used = mesh.vertex_weight > 0
    vertex = np.nonzero(used)[0]
    extra = np.zeros(len(mesh.vertex_position))
    for v, d in zip(mesh.morph_vertex, mesh.morph_delta):
        extra[v] += np.linalg.norm(d, axis=1)
    joint_world = space.points(model.bone_position[skel.joint_bone])
    return subtree_reach(skel.joint_parent, joint_world, mesh.vertex_joint[used].astype(np.int64),
                         mesh.vertex_position[vertex].astype(np.float64), extra[vertex])


def _add_scene(doc, model, skel, mesh, space, warn) -> tuple[list[int], int | None]:
    """Joint nodes (indices 0..J−1, joint order), the skin and the skinned mesh node (none for a
    model without triangles); returns (the scene's root nodes, the mesh node or None)."""
    J = len(skel.joint_bone)
    for j in range(J):
        node = {"name": model.bone_name[skel.joint_bone[j]], "translation": [float(v) for v in skel.joint_rest[j]]}
        children = np.flatnonzero(skel.joint_parent == j)
        if len(children):
            node["children"] = [int(c) for c in children]
        doc.add("nodes", node)
    roots = [int(j) for j in np.flatnonzero(skel.joint_parent < 0)]
    if not any(len(f) for f in mesh.material_faces):
        return roots, None
    mesh_index = add_mesh(doc, mesh, add_materials(doc, model, warn), model.name or "mesh")
    ibm = np.tile(np.eye(4, dtype=np.float32), (J, 1, 1))
    ibm[:, :3, 3] = -space.points(model.bone_position[skel.joint_bone])
    skin = doc.add("skins", {"joints": list(range(J)), "inverseBindMatrices": doc.accessor(ibm)})
    mesh_node = doc.add("nodes", {"name": model.name or "mesh", "mesh": mesh_index, "skin": skin})
    return roots + [mesh_node], mesh_node


def _add_clip(doc, model, baked, skel, mesh, space, mesh_node, tol, camera, warn) -> tuple[dict, int | None]:
    """The one animation: joint channels, morph weights, camera; (key counts, camera node or None)."""
    time = _times(baked.frames)
    tol_out = None if tol is None else tol * space.scale
    half = None if tol is None else tol_out / 2  # joints TOL/2 + morph weights TOL/2: vertices within TOL
    channels = joint_channels(baked, skel, space, _reach(model, mesh, skel, space), time, half,
                              np.arange(len(skel.joint_bone)))
    weights = None
    if mesh_node is not None:
        delta = np.array([np.linalg.norm(d, axis=1).max(initial=0.0) for d in mesh.morph_delta])
        weights = weight_channel(baked.morph_weight[:, mesh.morph_index], delta, time, half, mesh_node)
    channels += [weights] if weights is not None else []
    cam_node = None
    if camera is not None:
        cam_node, cam_channels = _camera_node(doc, camera, baked.frames, space, time, tol_out, warn)
        channels += cam_channels
    add_animation(doc, "mmd", time, channels)
    per_frame = 2 * len(skel.joint_bone) + (weights is not None) + 2 * (camera is not None)
    return {"frames": int(len(time)), "keys": int(sum(c.keep.sum() for c in channels)),
            "full_keys": int(len(time) * per_frame)}, cam_node


def write_gltf(model, baked, path, *, camera=None, scale=None, binary: bool | None = None, reduce=True,
               warn=print) -> dict:
    """Write ``model`` with ``baked`` (a ``BakedMotion`` or None) to ``path``; ``binary``: GLB
    (None: from the extension, .glb). Returns a summary: path, files, frames, keys, full_keys
    (one per frame and channel), joints, bones, morph_targets, tolerance (MMD units or None),
    scale, linearised_vertices, bytes."""
    path = os.fspath(path)
    binary = path.lower().endswith(".glb") if binary is None else binary
    s = check_number(scale, "scale", default=1.0 / MMD_UNITS_PER_METRE)
    if camera is not None and baked is None:
        raise OptionError("camera", "a camera needs a motion to set its frames")
    tol = tolerance_for(model, reduce)
    space = Space(scale=s, flip_z=True)
    deforming = deforming_bones(model) if model.num_faces else np.ones(model.num_bones, bool)
    skel = skeleton(model, deforming, space)
    mesh = mesh_arrays(model, skel.bone_joint, space)
    if sum(mesh.linearised):
        warn(f"{model.source_path or model.name}: {mesh.linearised[0]} SDEF and {mesh.linearised[1]} "
             f"QDEF vertices exported as linear blends of the same bones (glTF skins linearly)")
    doc = GltfDocument("mmdkit")
    roots, mesh_node = _add_scene(doc, model, skel, mesh, space, warn)
    stats = {"frames": 0, "keys": 0, "full_keys": 0}
    if baked is not None:
        stats, cam_node = _add_clip(doc, model, baked, skel, mesh, space, mesh_node, tol, camera, warn)
        roots += [cam_node] if cam_node is not None else []
    doc.json["scenes"] = [{"name": model.name or "scene", "nodes": roots}]
    doc.json["scene"] = 0
    doc.json["asset"]["extras"] = {"mmdkit": {"source": os.path.basename(model.source_path), "scale": s,
                                              "tolerance_mmd_units": tol}}
    files = doc.save(path, binary)
    return {"path": path, "files": files, **stats, "joints": len(skel.joint_bone), "bones": model.num_bones,
            "morph_targets": len(mesh.morph_index) if mesh_node is not None else 0, "tolerance": tol, "scale": s,
            "linearised_vertices": sum(mesh.linearised), "bytes": sum(os.path.getsize(f) for f in files)}


def write(baked, path, *, motion=None, warn=print, camera=None, scale=None, reduce=True) -> dict:
    """``mmdkit.export.export``'s entry: ``baked`` (its model inside) → ``path`` (.glb / .gltf)."""
    return write_gltf(baked.model, baked, path, camera=camera, scale=scale, reduce=reduce, warn=warn)
