"""The skinned mesh of a ``Model`` as glTF arrays: vertices, joints/weights, triangles, morphs.

In: a ``Model`` (MMD space), the bone → joint map, a ``Space`` (MMD → glTF: z flipped, scaled).
Out: ``MeshArrays`` in glTF space — float32 positions, unit normals, UVs, ≤ 4 joints per vertex
(uint16) with float32 weights summing to 1, triangles per material with reversed winding, and
the vertex morphs as position deltas (vertex index, delta) — plus ``add_mesh`` that writes them
into a ``GltfDocument``. SDEF and QDEF vertices become linear blends of the same bones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.model.deform import effective_weights
from mmdkit.model.model import DEFORM_QDEF, DEFORM_SDEF, MORPH_VERTEX
from mmdkit.export.gltf.container import ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER

TRIANGLES = 4


@dataclass(frozen=True)
class MeshArrays:
    """V vertices, M materials, N vertex morphs, all glTF space.

    vertex_position (V, 3) float32; vertex_normal (V, 3) float32 unit; vertex_uv (V, 2) float32;
    vertex_joint (V, 4) uint16 joint indices (unused slots 0); vertex_weight (V, 4) float32, sum 1;
    material_faces: per material its (T, 3) uint32 triangles, counter-clockwise front faces;
    morph_index (N,) int: model morph of each target; morph_name (N,) str;
    morph_vertex: per target (E,) uint32 increasing vertices; morph_delta: per target (E, 3) float32;
    linearised: how many SDEF / QDEF vertices became linear blends (sdef, qdef).
    """

    vertex_position: np.ndarray
    vertex_normal: np.ndarray
    vertex_uv: np.ndarray
    vertex_joint: np.ndarray
    vertex_weight: np.ndarray
    material_faces: tuple
    morph_index: np.ndarray
    morph_name: tuple
    morph_vertex: tuple
    morph_delta: tuple
    linearised: tuple


def skin_weights(model, bone_joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(V, 4) uint16 joints and (V, 4) float32 weights: the weights skinning applies
    (``effective_weights``), slots naming the same bone merged, normalised to sum 1, unused
    slots joint 0 weight 0. bone_joint (B,) int: joint of each bone (−1: not exported)."""
    w = effective_weights(model.vertex_deform, model.vertex_bone_weight).astype(np.float64)
    w[w < 0] = 0.0
    bone = np.asarray(model.vertex_bone_index, np.int64)
    for i in range(4):  # merge a later slot naming the same bone into the first one
        for k in range(i + 1, 4):
            same = (bone[:, k] == bone[:, i]) & (w[:, k] > 0)
            w[same, i] += w[same, k]
            w[same, k] = 0.0
    total = w.sum(axis=1, keepdims=True)
    lone = total[:, 0] <= 0  # no weight at all: the first bone, as BDEF1
    w[lone] = (1.0, 0.0, 0.0, 0.0)
    w /= w.sum(axis=1, keepdims=True)
    joint = np.where(w > 0, bone_joint[bone], 0)
    weight = w.astype(np.float32)
    weight[:, 0] += np.float32(1.0) - weight.sum(axis=1, dtype=np.float32)  # exact sum in float32
    return joint.astype(np.uint16), weight


def deforming_bones(model) -> np.ndarray:
    """(B,) bool: bones that move some vertex (the joints ``skin_weights`` refers to)."""
    w = effective_weights(model.vertex_deform, model.vertex_bone_weight)
    bone = np.asarray(model.vertex_bone_index)
    used = np.zeros(model.num_bones, bool)
    used[bone[w > 0]] = True
    used[bone[(w <= 0).all(axis=1), 0]] = True  # no weight: ``skin_weights`` gives slot 0 all
    return used


def _normals(n: np.ndarray) -> np.ndarray:
    """Unit float32 normals; zero or non-finite ones become +Y."""
    n = np.nan_to_num(np.asarray(n, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    length = np.linalg.norm(n, axis=1, keepdims=True)
    bad = length[:, 0] < 1e-12
    n = np.where(bad[:, None], (0.0, 1.0, 0.0), n / np.where(bad, 1.0, length[:, 0])[:, None])
    return n.astype(np.float32)


def _morph_deltas(model, space) -> tuple:
    """Vertex morphs → (morph index (N,), per morph (vertices increasing, glTF deltas))."""
    kinds = np.asarray(model.morph_kind)
    index = np.flatnonzero(kinds == MORPH_VERTEX)
    start = np.asarray(model.vertex_morph_start)
    vertices, deltas = [], []
    for n in index:
        v = np.asarray(model.vertex_morph_vertex[start[n]:start[n + 1]], np.int64)
        d = space.points(model.vertex_morph_offset[start[n]:start[n + 1]])
        uniq, inv = np.unique(v, return_inverse=True)  # a vertex listed twice: offsets add
        total = np.zeros((len(uniq), 3))
        np.add.at(total, inv, d)
        vertices.append(uniq.astype(np.uint32))
        deltas.append(total.astype(np.float32))
    return index, tuple(vertices), tuple(deltas)


def mesh_arrays(model, bone_joint: np.ndarray, space) -> MeshArrays:
    """The ``Model``'s mesh in glTF space (see ``MeshArrays``)."""
    joint, weight = skin_weights(model, bone_joint)
    faces = np.asarray(model.face_vertex_index, np.uint32)[:, ::-1]  # mirrored: winding reverses
    start = np.asarray(model.material_face_start)
    index, vertices, deltas = _morph_deltas(model, space)
    deform = np.asarray(model.vertex_deform)
    return MeshArrays(
        vertex_position=space.points(model.vertex_position).astype(np.float32),
        vertex_normal=_normals(space.directions(model.vertex_normal)),
        vertex_uv=np.ascontiguousarray(model.vertex_uv, np.float32),
        vertex_joint=joint, vertex_weight=weight,
        material_faces=tuple(np.ascontiguousarray(faces[start[m]:start[m + 1]]) for m in range(model.num_materials)),
        morph_index=index, morph_name=tuple(model.morph_name[n] for n in index),
        morph_vertex=vertices, morph_delta=deltas,
        linearised=(int((deform == DEFORM_SDEF).sum()), int((deform == DEFORM_QDEF).sum())))


def _primitive(doc, mesh: MeshArrays, tri: np.ndarray) -> dict:
    """A primitive of triangles ``tri`` (T, 3) over the vertices they use only (increasing model
    order: primitive vertex k is model vertex ``np.unique(tri)[k]``), with its morph targets."""
    used = np.unique(tri)
    local = np.searchsorted(used, tri).astype(np.uint16 if len(used) <= 65535 else np.uint32)
    attributes = {
        "POSITION": doc.accessor(mesh.vertex_position[used], target=ARRAY_BUFFER, minmax=True),
        "NORMAL": doc.accessor(mesh.vertex_normal[used], target=ARRAY_BUFFER),
        "TEXCOORD_0": doc.accessor(mesh.vertex_uv[used], target=ARRAY_BUFFER),
        "JOINTS_0": doc.accessor(mesh.vertex_joint[used], target=ARRAY_BUFFER),
        "WEIGHTS_0": doc.accessor(mesh.vertex_weight[used], target=ARRAY_BUFFER),
    }
    prim = {"attributes": attributes, "mode": TRIANGLES,
            "indices": doc.accessor(local.reshape(-1), target=ELEMENT_ARRAY_BUFFER, minmax=True)}
    targets = []
    for v, d in zip(mesh.morph_vertex, mesh.morph_delta):
        k = np.searchsorted(used, v)
        inside = (k < len(used)) & (used[np.minimum(k, len(used) - 1)] == v)
        targets.append({"POSITION": doc.sparse_accessor(len(used), k[inside], d[inside])})
    if targets:
        prim["targets"] = targets
    return prim


def add_mesh(doc, mesh: MeshArrays, material_index: list[int | None], name: str) -> int:
    """Write ``mesh`` into ``doc``: one primitive per material that has triangles, each with the
    vertices it uses (vertices shared by two materials are repeated) and sparse morph targets;
    returns the mesh index."""
    primitives = []
    for m, tri in enumerate(mesh.material_faces):
        if len(tri) == 0:
            continue
        prim = _primitive(doc, mesh, tri)
        if material_index[m] is not None:
            prim["material"] = material_index[m]
        primitives.append(prim)
    out = {"name": name, "primitives": primitives}
    if len(mesh.morph_index):
        out["weights"] = [0.0] * len(mesh.morph_index)
        out["extras"] = {"targetNames": list(mesh.morph_name)}
    return doc.add("meshes", out)
