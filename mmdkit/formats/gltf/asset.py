"""The frozen result of reading a glTF 2.0 file: ``GltfAsset`` and its parts.

In: filled by ``mmdkit.formats.gltf.reader``. Out: plain numpy arrays (read-only) in glTF's own
space — right-handed, metres, +Y up, counter-clockwise front faces, quaternions (x, y, z, w),
matrices row-major with column vectors (``p' = M @ [x, y, z, 1]``; glTF stores them column-major,
they are transposed on reading). Nothing is converted to MMD here; that happens at import.
All arrays are read-only; vertex attributes may be strided views into the file's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.errors import OptionError


@dataclass(frozen=True)
class GltfPrimitive:
    """One drawable part of a mesh, triangulated. V vertices, F triangles, K morph targets.

    vertex_position (V, 3) float32, mesh space. vertex_normal (V, 3) float32 or None.
    vertex_uv (V, 2) float32 or None (TEXCOORD_0, origin top-left as glTF stores it).
    vertex_color (V, 4) float32 or None (COLOR_0; RGB gets alpha 1).
    vertex_joint (V, 4·S) uint16 or None: JOINTS_0..JOINTS_{S-1} side by side, indices into the
    joints of the skin of the node that draws the mesh (checked < J where the weight is > 0;
    slots of weight 0 are left as stored). vertex_weight (V, 4·S) float32 or None, as stored
    (not renormalised, more than 4 per vertex possible: the importer keeps the 4 largest).
    face_vertex (F, 3) uint32: triangles, counter-clockwise front faces (strips and fans are
    triangulated; generated 0..V-1 when the primitive has no indices).
    target_position (K, V, 3) float32: morph target POSITION deltas (zeros where a target has none).
    target_normal (K, V, 3) float32 or None (None when no target has NORMAL).
    material: index into ``GltfAsset.materials`` or -1. mode: the stored glTF mode (4, 5 or 6).
    """

    vertex_position: np.ndarray
    vertex_normal: np.ndarray | None
    vertex_uv: np.ndarray | None
    vertex_color: np.ndarray | None
    vertex_joint: np.ndarray | None
    vertex_weight: np.ndarray | None
    face_vertex: np.ndarray
    target_position: np.ndarray
    target_normal: np.ndarray | None
    material: int
    mode: int


@dataclass(frozen=True)
class GltfMesh:
    """name; primitives; target_weight (K,) float32 default morph weights; target_name (K names,
    from ``extras.targetNames`` or 'target<k>')."""

    name: str
    primitives: tuple[GltfPrimitive, ...]
    target_weight: np.ndarray
    target_name: tuple[str, ...]


@dataclass(frozen=True)
class GltfSkin:
    """joint_node (J,) int32: node index of each joint (vertex_joint indexes this list).
    joint_inverse_bind (J, 4, 4) float32: model space → joint space at bind (identity if absent).
    skeleton: the common root node or -1. Skinning: vertex' = Σ w·(node_world[joint] @ IBM) @ v."""

    name: str
    joint_node: np.ndarray
    joint_inverse_bind: np.ndarray
    skeleton: int


@dataclass(frozen=True)
class GltfMaterial:
    """base_color (4,) float32 linear RGBA factor; base_color_image: index into ``images`` or -1;
    base_color_uv: which TEXCOORD set the texture uses; alpha_mode 'OPAQUE' | 'MASK' | 'BLEND';
    alpha_cutoff (MASK); double_sided."""

    name: str
    base_color: np.ndarray
    base_color_image: int
    base_color_uv: int
    alpha_mode: str
    alpha_cutoff: float
    double_sided: bool


@dataclass(frozen=True)
class GltfImage:
    """name; mime ('image/png', 'image/jpeg', ... or '' when unknown); data: the encoded file bytes
    (b'' when an external image is missing — see warnings); uri: the external name or ''."""

    name: str
    mime: str
    data: bytes
    uri: str


@dataclass(frozen=True)
class GltfChannel:
    """One animated property of one node, K keys of n values.

    node: target node; path: 'translation' (n=3) | 'rotation' (n=4, x y z w) | 'scale' (n=3) |
    'weights' (n = the mesh's morph target count). interpolation: 'STEP' | 'LINEAR' | 'CUBICSPLINE'.
    key_time (K,) float32 seconds, increasing. key_value (K, n) float32.
    key_in_tangent, key_out_tangent (K, n) float32 (CUBICSPLINE only, else None), per second.
    """

    node: int
    path: str
    interpolation: str
    key_time: np.ndarray
    key_value: np.ndarray
    key_in_tangent: np.ndarray | None
    key_out_tangent: np.ndarray | None


@dataclass(frozen=True)
class GltfAnimation:
    """A clip: name ('' if unnamed), channels, duration (last key time, seconds)."""

    name: str
    channels: tuple[GltfChannel, ...]
    duration: float


@dataclass(frozen=True)
class GltfAsset:
    """A whole glTF file. N nodes.

    node_name tuple of N str ('' if unnamed). node_parent (N,) int32, -1 for roots.
    node_order (N,) int32: every parent before its children (for hierarchy passes).
    node_translation (N, 3), node_rotation (N, 4) x y z w, node_scale (N, 3) float32: rest local
    TRS (decomposed from ``matrix`` where a node gives one). node_has_matrix (N,) bool.
    node_local (N, 4, 4) float32: rest local matrix (the stored ``matrix``, else T·R·S).
    node_world (N, 4, 4) float32: rest world matrix, scene space.
    node_mesh, node_skin (N,) int32, -1 when none. node_target_weight: per node its own morph
    weights (K,) float32 or None (then the mesh's apply).
    scene_root: per scene the (R,) int32 root nodes; scene: the default scene or -1.
    source_bytes: size of the file plus its buffers' (bounds what importing may expand to).
    humanoid: (VRM version '0.x'/'1.0' or '', {humanoid bone name: node}) from the VRM extension
    (``formats.gltf.vrm``); its nodes become bones on import, for ``mmdkit.retarget``.
    vrm: ``formats.gltf.vrm_extras.VrmExtras`` (expressions, spring bones, first person / look-at,
    MToon) of a VRM file, else None.
    """

    path: str
    node_name: tuple[str, ...]
    node_parent: np.ndarray
    node_order: np.ndarray
    node_translation: np.ndarray
    node_rotation: np.ndarray
    node_scale: np.ndarray
    node_has_matrix: np.ndarray
    node_local: np.ndarray
    node_world: np.ndarray
    node_mesh: np.ndarray
    node_skin: np.ndarray
    node_target_weight: tuple[np.ndarray | None, ...]
    scene_root: tuple[np.ndarray, ...]
    scene: int
    meshes: tuple[GltfMesh, ...]
    skins: tuple[GltfSkin, ...]
    materials: tuple[GltfMaterial, ...]
    images: tuple[GltfImage, ...]
    animations: tuple[GltfAnimation, ...]
    warnings: tuple[str, ...] = ()
    source_bytes: int = 0
    humanoid: tuple = ("", {})
    vrm: object = None

    @property
    def num_nodes(self) -> int:
        return len(self.node_parent)

    def animation(self, clip: str | int) -> GltfAnimation:
        """A clip by index or name; ``OptionError('clip', ...)`` listing the clips when none fits."""
        if isinstance(clip, int) and -len(self.animations) <= clip < len(self.animations):
            return self.animations[clip]
        for a in self.animations:
            if a.name == clip:
                return a
        names = ", ".join(repr(a.name) for a in self.animations) or "none"
        raise OptionError("clip", f"{clip!r} is not a clip of {self.path or 'the file'} (clips: {names})")
