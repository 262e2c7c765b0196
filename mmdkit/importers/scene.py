"""A skinned scene (``GltfAsset`` or alike) → MMD ``Model`` + lazily baked clip ``Motion``s.

In: a scene with the ``GltfAsset`` fields (node hierarchy, meshes, skins, materials, images,
animations — see docs/import.md "Input contract"), in its own right-handed space. Out:
``import_scene(scene)`` → (``Model``, ``Clips``): MMD space (left-handed: z negated; ×
``unit_scale`` MMD units per scene unit, 12.5 for metres), whose rest pose is the bind mesh.

Bind rotations are baked into the motions, not stored on bones: each bone i has a bind world
B_i = C·IBM_i⁻¹ (C: see ``skin_bind_matrix``), polar-decomposed as T(p_i)·R_i·Σ_i. The MMD
bone rests at p_i with no rotation and the bind vertices are C·v, so an empty motion skins to the
bind mesh; a clip's MMD world is W_i(t) = rigid(J_i(t))·R_i⁻¹, hence W_i·T(−p_i) =
J_i·IBM_i·C⁻¹ — glTF's skinning — while scales stay as bound (MMD bones have no scale).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.gltf.accessor import budget_bytes
from mmdkit.model.build import build_model
from mmdkit.model.builder import ModelBuilder
from mmdkit.model.model import Model

MMD_UNITS_PER_METRE = 12.5
"""1 MMD unit = 8 cm."""

_BIND_TOLERANCE = 1e-4  # relative to the largest joint offset: matrices this close are one bind
_MAX_BIND = 1e12  # largest bind matrix entry (scene units) taken; beyond it the bone cannot be placed

_CLIPS: "weakref.WeakKeyDictionary[Model, object]" = weakref.WeakKeyDictionary()


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
class Space:
    """Scene → MMD space: points ``scale·S·p``, rotations ``S·R·S`` with S = diag(1, 1, −1)
    when ``flip_z`` (right-handed → MMD's left-handed), else S = I."""

    scale: float = MMD_UNITS_PER_METRE
    flip_z: bool = True

    @property
    def axis(self) -> np.ndarray:
        """(3,) float64 diagonal of S."""
        return np.array([1.0, 1.0, -1.0 if self.flip_z else 1.0])

    def points(self, p: np.ndarray) -> np.ndarray:
        """(…, 3) scene points or offsets → MMD units (float64)."""
        return np.asarray(p, np.float64) * (self.scale * self.axis)

    def directions(self, n: np.ndarray) -> np.ndarray:
        """(…, 3) scene directions (normals) → MMD space, not rescaled."""
        return np.asarray(n, np.float64) * self.axis

    def quaternions(self, q: np.ndarray) -> np.ndarray:
        """(…, 4) x y z w rotations → MMD space: S·R·S is (−x, −y, z, w) for the z flip."""
        return np.asarray(q, np.float64) * (np.r_[-1.0, -1.0, 1.0, 1.0] if self.flip_z else 1.0)


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


def quaternions_from_rotations(r: np.ndarray) -> np.ndarray:
    """(…, 3, 3) rotations → (…, 4) float64 unit quaternions x y z w (w ≥ 0), vectorised Shepperd."""
    r = np.asarray(r, np.float64)
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    cand = np.stack([
        np.stack([1 + m00 - m11 - m22, r[..., 0, 1] + r[..., 1, 0], r[..., 0, 2] + r[..., 2, 0],
                  r[..., 2, 1] - r[..., 1, 2]], -1),
        np.stack([r[..., 0, 1] + r[..., 1, 0], 1 - m00 + m11 - m22, r[..., 1, 2] + r[..., 2, 1],
                  r[..., 0, 2] - r[..., 2, 0]], -1),
        np.stack([r[..., 0, 2] + r[..., 2, 0], r[..., 1, 2] + r[..., 2, 1], 1 - m00 - m11 + m22,
                  r[..., 1, 0] - r[..., 0, 1]], -1),
        np.stack([r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1],
                  1 + m00 + m11 + m22], -1)], -2)  # (…, 4 candidates, 4)
    best = np.argmax(np.stack([m00 - m11 - m22, m11 - m00 - m22, m22 - m00 - m11, m00 + m11 + m22], -1), -1)
    q = np.take_along_axis(cand, best[..., None, None], -2)[..., 0, :]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:] < 0, -q, q)


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
    tolerance = _BIND_TOLERANCE * max(1.0, float(np.abs(m[:, :3, 3]).max()))
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
    is_bone[[n for n in _humanoid(scene)[1].values() if inside[n]]] = True  # VRM humanoid nodes: bones
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


def _humanoid(scene) -> tuple[str, dict[str, int]]:
    """(VRM version, {humanoid bone: node}) of a scene read from a VRM file, else ('', {})."""
    h = getattr(scene, "humanoid", None)
    return h if isinstance(h, tuple) and len(h) == 2 else ("", {})


def _add_bones(mb: ModelBuilder, sk: Skeleton, space: Space) -> None:
    """One rotatable, translatable MMD bone per skeleton bone, tail at its first child bone."""
    pos = space.points(sk.bone_position)
    first_child = np.full(len(sk.bone_node), -1, np.int32)
    for b in range(len(sk.bone_node) - 1, -1, -1):
        if sk.bone_parent[b] >= 0:
            first_child[sk.bone_parent[b]] = b
    for b, name in enumerate(sk.bone_name):
        mb.add_bone(name, pos[b], int(sk.bone_parent[b]), tail_bone=int(first_child[b]), translatable=True)


def import_scene(scene, *, unit_scale: float = MMD_UNITS_PER_METRE, flip_z: bool = True, name: str = "",
                 source_format: str = "gltf") -> tuple[Model, "Clips"]:
    """``scene`` (GltfAsset-like) → (Model in MMD space, ``Clips``: {clip name: Motion}, baked on
    first access). ``unit_scale``: MMD units per scene unit; ``flip_z``: the scene is right-handed;
    ``source_format``: the Model's (what ``mmdkit info`` shows, e.g. 'gltf', 'fbx')."""
    from mmdkit.importers.clips import Clips, clip_names
    from mmdkit.importers.mesh import add_materials, add_meshes

    space = Space(float(unit_scale), bool(flip_z))
    warnings = list(getattr(scene, "warnings", ()))
    sk = build_skeleton(scene)
    mb = ModelBuilder(name or (scene.path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if scene.path else ""))
    _add_bones(mb, sk, space)
    textures = add_materials(mb, scene)
    losses = add_meshes(mb, scene, sk, space, warnings)
    f = mb.fields()
    names = clip_names(scene)
    joints = {int(j) for s in scene.skins for j in s.joint_node}
    extras = {"embedded_textures": textures, "clips": names,
              "skin_joints": sum(int(n) in joints for n in sk.bone_node), "import_losses": losses}
    version, humanoid = _humanoid(scene)
    if version:  # {humanoid bone as the file names it: model bone}, for mmdkit.retarget
        extras["vrm_humanoid"] = {"version": version, "bones": {k: int(sk.node_bone[n]) for k, n in humanoid.items()}}
    f.update(source_format=source_format, source_path=scene.path, warnings=tuple(warnings), source_extras=extras)
    model = build_model(f)
    clips = _CLIPS[model] = Clips(scene, sk, space, model.morph_name)
    return model, clips


def clips_of(model: Model):
    """The ``Clips`` of a model ``import_scene`` made; a copy of one (``Model.replace``) has its
    file read again through the format registry; other models have none (an empty ``Clips``)."""
    from mmdkit.importers.clips import Clips

    clips = _CLIPS.get(model)
    if clips is None and model.source_extras.get("clips") and model.source_path:
        from mmdkit.formats.io import load

        clips = _CLIPS.get(load(model.source_path))
    return clips if clips is not None else Clips.empty()
