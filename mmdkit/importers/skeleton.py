"""The bones of a skinned scene (``GltfAsset`` or alike) and their bind transforms, in its own space.

In: a scene with the ``GltfAsset`` fields (node hierarchy, meshes, skins; see docs/import.md
"Input contract"). Out: ``build_skeleton(scene)`` → ``Skeleton``: one bone per joint node, per
node drawing an unskinned mesh and per VRM humanoid node, parents first, with its bind world
(scene space, float64), and the checks every importer step shares (``expand_budget``,
``MAX_PRIMITIVES``, ``inverse`` naming the matrix that has none).

Bind rotations are baked into the motions, not stored on bones: each bone i has a bind world
B_i = C·IBM_i⁻¹ (C: see ``skin_bind_matrix``), polar-decomposed as T(p_i)·R_i·Σ_i. The MMD
bone rests at p_i with no rotation and the bind vertices are C·v, so an empty motion skins to the
bind mesh; a clip's MMD world is W_i(t) = rigid(J_i(t))·R_i⁻¹, hence W_i·T(−p_i) =
J_i·IBM_i·C⁻¹ — glTF's skinning — while scales stay as bound (MMD bones have no scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.gltf.accessor import budget_bytes

BIND_TOLERANCE = 1e-4
"""Bind matrices this close (relative to the largest joint offset) are one bind."""
_MAX_BIND = 1e12  # largest bind matrix entry (scene units) taken; beyond it the bone cannot be placed

MAX_PRIMITIVES = 2048
"""Most primitives drawn (each primitive of each node of the scene drawing a mesh; characters have
tens): each costs milliseconds to import, so a file instancing a mesh 10⁵ times is refused, not
slowly read."""


def check_primitives(scene, inside: np.ndarray) -> None:
    """FormatError when the nodes ``inside`` the scene draw more than MAX_PRIMITIVES primitives."""
    drawn = np.flatnonzero(inside & (scene.node_mesh >= 0))
    count = sum(len(scene.meshes[m].primitives) for m in scene.node_mesh[drawn].tolist())
    if count > MAX_PRIMITIVES:
        raise FormatError(f"{len(drawn):,} nodes draw {count:,} mesh primitives; at most {MAX_PRIMITIVES:,} are "
                          "imported", path=scene.path, section="nodes")


def expand_budget(scene) -> int:
    """Most bytes importing ``scene`` may make of its vertices, or baking one of its clips:
    ``budget_bytes`` (256 MiB + 64 × its file's size: ``scene.source_bytes``; 0 when the scene
    does not say), the budget the glTF reader's accessors share."""
    return budget_bytes(getattr(scene, "source_bytes", 0) or 0)


@dataclass(frozen=True)
class Skeleton:
    """One MMD bone per joint node and per node drawing an unskinned mesh. B bones.

    bone_node (B,) int32: scene node of each bone, parents first. node_bone (N,) int32: bone of
    each node or -1. bone_parent (B,) int32: nearest bone ancestor or -1. bone_bind (B, 4, 4)
    float64, scene space: bind world B_i. bone_rotation (B, 3, 3) float64: R_i, its rotation;
    bone_position (B, 3) float64: p_i, its translation (scene units). bone_name: unique names.
    """

    bone_node: np.ndarray
    node_bone: np.ndarray
    bone_parent: np.ndarray
    bone_bind: np.ndarray
    bone_rotation: np.ndarray
    bone_position: np.ndarray
    bone_name: tuple[str, ...]


def polar_rotations(m: np.ndarray) -> np.ndarray:
    """(…, 3, 3) linear maps → (…, 3, 3) float64 nearest rotations (polar factor, det +1)."""
    u, _, vt = np.linalg.svd(np.asarray(m, np.float64))
    d = np.sign(np.linalg.det(u @ vt))
    u[..., :, 2] *= np.where(d == 0, 1.0, d)[..., None]
    return u @ vt


def inverse(m: np.ndarray, path: str, what: str) -> np.ndarray:
    """Affine inverse of (…, 4, 4) matrices (the bottom row read as 0 0 0 1, as glTF requires) or
    inverse of (…, 3, 3) ones, float64; ``FormatError`` naming ``what`` (formatted with the first
    bad index) when one has a zero scale."""
    m = np.asarray(m, np.float64)
    lin = m[..., :3, :3]
    det = np.linalg.det(lin)
    size = np.abs(lin).max(axis=(-2, -1))
    bad = np.atleast_1d(~(np.abs(det) > 1e-12 * size ** 3))
    if bad.any():
        raise FormatError(f"{what.format(int(np.flatnonzero(bad)[0]))} has a zero scale (no inverse)", path=path)
    inv = np.linalg.inv(lin)
    if m.shape[-1] == 3:
        return inv
    out = np.zeros(m.shape)
    out[..., :3, :3] = inv
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", inv, m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def skin_joint_binds(scene, node: int) -> tuple[np.ndarray, np.ndarray]:
    """(C (4, 4), bind worlds C·IBM_j⁻¹ (J, 4, 4)) float64 of skinned mesh ``node``'s joints."""
    s = int(scene.node_skin[node])
    c = skin_bind_matrix(scene, node)
    return c, c @ inverse(scene.skins[s].joint_inverse_bind, scene.path, f"skins[{s}].inverseBindMatrices[{{}}]")


def scene_nodes(scene) -> np.ndarray:
    """(N,) bool: nodes of the default scene (every node when the file names no scene)."""
    n = scene.num_nodes
    if scene.scene < 0:
        return np.ones(n, bool)
    inside = np.zeros(n, bool)
    inside[scene.scene_root[scene.scene]] = True
    for i in scene.node_order:
        if scene.node_parent[i] >= 0:
            inside[i] = inside[scene.node_parent[i]]
    return inside


def _unique_names(names) -> tuple[str, ...]:
    """Names made unique by ' (2)', ' (3)' … suffixes, in order."""
    seen: set[str] = set()
    out = []
    for n in names:
        name, k = n, 2
        while name in seen:
            name, k = f"{n} ({k})", k + 1
        seen.add(name)
        out.append(name)
    return tuple(out)


def skin_bind_matrix(scene, node: int) -> np.ndarray:
    """C (4, 4) float64 of skinned mesh ``node``: rest joint world · IBM when that is one matrix
    for every joint its vertices use (the rest pose is the bind pose: C·v is the mesh as a viewer
    shows the file), else the node's own world (RobotExpressive: its rest pose is not its bind)."""
    skin = scene.skins[scene.node_skin[node]]
    m = scene.node_world[skin.joint_node].astype(np.float64) @ skin.joint_inverse_bind
    used = np.unique(np.concatenate([p.vertex_joint[p.vertex_weight > 0] for p in
                                     scene.meshes[scene.node_mesh[node]].primitives
                                     if p.vertex_joint is not None] or [np.zeros(0, np.int64)]))
    c = m[used[0]] if len(used) else None
    tolerance = BIND_TOLERANCE * max(1.0, float(np.abs(m[:, :3, 3]).max()))
    if c is not None and np.abs(m[used] - c).max() <= tolerance:
        return c
    return scene.node_world[node].astype(np.float64)


def _joint_binds(scene, inside: np.ndarray) -> dict[int, np.ndarray]:
    """{joint node: bind world C·IBM⁻¹ (4, 4) float64} from the first skinned mesh node using it."""
    binds: dict[int, np.ndarray] = {}
    for node in np.flatnonzero(inside & (scene.node_mesh >= 0) & (scene.node_skin >= 0)):
        skin = scene.skins[scene.node_skin[node]]
        world = skin_joint_binds(scene, node)[1]
        for j, jn in enumerate(skin.joint_node.tolist()):
            binds.setdefault(jn, world[j])
    return binds


def build_skeleton(scene) -> Skeleton:
    """The bones of ``scene``: joints and unskinned mesh nodes, with their bind worlds (see module)."""
    inside = scene_nodes(scene)
    check_primitives(scene, inside)
    binds = _joint_binds(scene, inside)
    is_bone = inside & (scene.node_mesh >= 0) & (scene.node_skin < 0)
    is_bone[list(binds)] = True
    is_bone[[n for n in vrm_humanoid(scene)[1].values() if inside[n]]] = True  # VRM humanoid nodes: bones
    bone_node = np.array([i for i in scene.node_order if is_bone[i]], np.int32)
    node_bone = np.full(scene.num_nodes, -1, np.int32)
    node_bone[bone_node] = np.arange(len(bone_node), dtype=np.int32)
    parent = np.full(len(bone_node), -1, np.int32)
    bind = np.zeros((len(bone_node), 4, 4))
    rest = scene.node_world.astype(np.float64)
    for b, node in enumerate(bone_node.tolist()):
        a = scene.node_parent[node]
        while a >= 0 and node_bone[a] < 0:
            a = scene.node_parent[a]
        parent[b] = node_bone[a] if a >= 0 else -1
        if node in binds:
            bind[b] = binds[node]
        elif parent[b] >= 0:  # placed on its bone ancestor's bind as it sits at rest
            bind[b] = bind[parent[b]] @ inverse(rest[a], scene.path, f"nodes[{a}] (world at rest)") @ rest[node]
        else:
            bind[b] = rest[node]
    big = np.flatnonzero(~(np.abs(bind) <= _MAX_BIND).all(axis=(1, 2)))
    if len(big):
        raise FormatError(f"the bind transform of node {int(bone_node[big[0]])} is beyond ±{_MAX_BIND:g} (inverse bind "
                          "matrices of a scale near 0?)", path=scene.path, section="skins")
    names = _unique_names(scene.node_name[i] or f"node{i}" for i in bone_node.tolist())
    return Skeleton(bone_node=bone_node, node_bone=node_bone, bone_parent=parent, bone_bind=bind,
                    bone_rotation=polar_rotations(bind[:, :3, :3]), bone_position=bind[:, :3, 3].copy(),
                    bone_name=names)


def vrm_humanoid(scene) -> tuple[str, dict[str, int]]:
    """(VRM version, {humanoid bone: node}) of a scene read from a VRM file, else ('', {})."""
    h = getattr(scene, "humanoid", None)
    return h if isinstance(h, tuple) and len(h) == 2 else ("", {})
