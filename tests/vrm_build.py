"""A small VRM 1.0 file built in code (the VRM 1.0 files in assets/rigs have no spring bones).

``vrm1_bytes(collide=True, **joint)`` → GLB bytes: hips (1 m up) → head (+0.5 m) → hair1 (0.1 m behind the
head) → hair2 → hair3 (each 0.1 m below), a mesh skinned one vertex pair per joint with one morph
target 'mouth_a' moving vertices 0 and 1 up 1 cm, VRMC_vrm (humanoid hips/head, expressions aa
and blink bound to it, firstPerson, lookAt) and VRMC_springBone (a spring hair1-hair2-hair3, a
sphere on the head and a capsule on the hips, which the spring collides with unless ``collide`` is
False; ``center``: the spring's center node). ``joint`` updates the spring joints' settings (stiffness, gravityPower, gravityDir, ...).
"""

from __future__ import annotations

import json
import struct

import numpy as np

NODE_T = [(0, 1, 0), (0, 0.5, 0), (0, 0, -0.1), (0, -0.1, 0), (0, -0.1, 0)]
NODE_PARENT = [-1, 0, 1, 2, 3]
HEAD_SPHERE = (1, (0.0, 0.0, 0.0), 0.05)  # node, offset, radius (metres)


def _world() -> np.ndarray:
    w = np.zeros((5, 3))
    for i, (t, p) in enumerate(zip(NODE_T, NODE_PARENT)):
        w[i] = np.asarray(t) + (w[p] if p >= 0 else 0)
    return w


def vrm1_bytes(collide: bool = True, center: int | None = None, **joint) -> bytes:
    world = _world()
    pos = np.repeat(world, 2, axis=0) + np.tile([[0.02, 0, 0], [-0.02, 0, 0]], (5, 1))
    pos = pos.astype(np.float32)
    face = np.array([[2 * i, 2 * i + 1, 2 * i + 2] for i in range(4)] + [[2 * i + 1, 2 * i + 3, 2 * i + 2]
                                                                        for i in range(4)], np.uint16)
    jnt = np.zeros((10, 4), np.uint16)
    jnt[:, 0] = np.repeat(np.arange(5), 2)
    wgt = np.zeros((10, 4), np.float32)
    wgt[:, 0] = 1
    target = np.zeros((10, 3), np.float32)
    target[:2, 1] = 0.01
    ibm = np.tile(np.eye(4, dtype=np.float32), (5, 1, 1))
    ibm[:, :3, 3] = -world
    blobs = [pos, face, jnt, wgt, target, ibm.transpose(0, 2, 1).copy()]  # matrices column-major
    views, data = [], b""
    for b in blobs:
        raw = b.tobytes()
        views.append({"buffer": 0, "byteOffset": len(data), "byteLength": len(raw)})
        data += raw + b"\0" * (-len(raw) % 4)
    acc = [dict(bufferView=0, componentType=5126, count=10, type="VEC3", min=pos.min(0).tolist(),
                max=pos.max(0).tolist()),
           dict(bufferView=1, componentType=5123, count=face.size, type="SCALAR"),
           dict(bufferView=2, componentType=5123, count=10, type="VEC4"),
           dict(bufferView=3, componentType=5126, count=10, type="VEC4"),
           dict(bufferView=4, componentType=5126, count=10, type="VEC3", min=target.min(0).tolist(),
                max=target.max(0).tolist()),
           dict(bufferView=5, componentType=5126, count=5, type="MAT4")]
    names = ["hips", "head", "hair1", "hair2", "hair3"]
    nodes = [dict(name=n, translation=list(t), **({"children": [i + 1]} if i < 4 else {}))
             for i, (n, t) in enumerate(zip(names, NODE_T))]
    nodes.append(dict(name="body", mesh=0, skin=0))
    settings = dict(stiffness=1.0, gravityPower=0.5, dragForce=0.4, hitRadius=0.02, gravityDir=[0, -1, 0])
    settings.update(joint)
    root = {
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0, 5]}], "nodes": nodes,
        "meshes": [{"name": "body", "primitives": [{"attributes": {"POSITION": 0, "JOINTS_0": 2, "WEIGHTS_0": 3},
                                                    "indices": 1, "targets": [{"POSITION": 4}]}],
                    "extras": {"targetNames": ["mouth_a"]}}],
        "skins": [{"joints": [0, 1, 2, 3, 4], "inverseBindMatrices": 5}],
        "accessors": acc, "bufferViews": views, "buffers": [{"byteLength": len(data)}],
        "extensionsUsed": ["VRMC_vrm", "VRMC_springBone"],
        "extensions": {
            "VRMC_vrm": {"specVersion": "1.0", "meta": {"name": "test", "authors": ["mmdkit tests"]},
                         "humanoid": {"humanBones": {"hips": {"node": 0}, "head": {"node": 1}}},
                         "expressions": {"preset": {
                             "aa": {"morphTargetBinds": [{"node": 5, "index": 0, "weight": 1.0}]},
                             "blink": {"morphTargetBinds": [{"node": 5, "index": 0, "weight": 0.5}],
                                       "isBinary": True, "overrideMouth": "block"}},
                             "custom": {"smug": {"morphTargetBinds": [{"node": 5, "index": 0, "weight": 0.25}]}}},
                         "firstPerson": {"meshAnnotations": [{"node": 5, "type": "auto"}]},
                         "lookAt": {"type": "bone", "offsetFromHeadBone": [0, 0.06, 0]}},
            "VRMC_springBone": {
                "specVersion": "1.0",
                "colliders": [{"node": HEAD_SPHERE[0], "shape": {"sphere": {"offset": list(HEAD_SPHERE[1]),
                                                                            "radius": HEAD_SPHERE[2]}}},
                              {"node": 0, "shape": {"capsule": {"offset": [0, 0, 0], "radius": 0.05,
                                                                "tail": [0, 0.3, 0]}}}],
                "colliderGroups": [{"name": "body", "colliders": [0, 1]}],
                "springs": [{"name": "hair", "joints": [dict(node=2, **settings), dict(node=3, **settings),
                                                        {"node": 4}], "colliderGroups": [0] if collide else [],
                             **({} if center is None else {"center": center})}]}},
    }
    text = json.dumps(root).encode()
    text += b" " * (-len(text) % 4)
    return (struct.pack("<III", 0x46546C67, 2, 12 + 8 + len(text) + 8 + len(data))
            + struct.pack("<II", len(text), 0x4E4F534A) + text + struct.pack("<II", len(data), 0x004E4942) + data)
