"""The immutable, structure-of-arrays ``Model`` shared by PMX and PMD.

In: arrays built by ``mmdkit.model.build`` (from format records or the builder API).
Out: a frozen ``Model`` whose numpy arrays are read-only. Coordinates are MMD's own
(left-handed, file space, MMD units); quaternions are (x, y, z, w); angles are radians.

Counts: V vertices, F triangles, T textures, M materials, B bones, K IK solvers,
L IK links (all solvers), N morphs, R rigid bodies, J joints, A additional UV sets (0..4).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# --- enums (plain ints so numba kernels can use them) --------------------------------
DEFORM_BDEF1, DEFORM_BDEF2, DEFORM_BDEF4, DEFORM_SDEF, DEFORM_QDEF = 0, 1, 2, 3, 4

# bone_flags bits (PMX 2.0 numbering; PMD bones are converted to these on build)
BONE_TAIL_IS_BONE = 0x0001  # tail given by bone_tail_index, else bone_tail_offset
BONE_ROTATABLE = 0x0002
BONE_TRANSLATABLE = 0x0004
BONE_VISIBLE = 0x0008
BONE_ENABLED = 0x0010
BONE_IK = 0x0020
BONE_APPEND_LOCAL = 0x0080
BONE_APPEND_ROTATION = 0x0100
BONE_APPEND_TRANSLATION = 0x0200
BONE_FIXED_AXIS = 0x0400
BONE_LOCAL_AXIS = 0x0800
BONE_AFTER_PHYSICS = 0x1000
BONE_EXTERNAL_PARENT = 0x2000

# material_flags bits
MATERIAL_DOUBLE_SIDED = 0x01
MATERIAL_GROUND_SHADOW = 0x02
MATERIAL_SELF_SHADOW_MAP = 0x04
MATERIAL_SELF_SHADOW = 0x08
MATERIAL_EDGE = 0x10
MATERIAL_VERTEX_COLOR = 0x20  # PMX 2.1
MATERIAL_POINT = 0x40  # PMX 2.1
MATERIAL_LINE = 0x80  # PMX 2.1

SPHERE_NONE, SPHERE_MULTIPLY, SPHERE_ADD, SPHERE_SUBTEXTURE = 0, 1, 2, 3

# morph_kind values (PMX numbering)
MORPH_GROUP, MORPH_VERTEX, MORPH_BONE, MORPH_UV = 0, 1, 2, 3
MORPH_UV1, MORPH_UV2, MORPH_UV3, MORPH_UV4 = 4, 5, 6, 7
MORPH_MATERIAL, MORPH_FLIP, MORPH_IMPULSE = 8, 9, 10

SHAPE_SPHERE, SHAPE_BOX, SHAPE_CAPSULE = 0, 1, 2
BODY_STATIC, BODY_DYNAMIC, BODY_DYNAMIC_BONE = 0, 1, 2

SOFT_BODY_MAX_ITERATIONS = 64
"""Solver iterations per pass (velocity, position, drift, cluster) a soft body may ask for: the
PMX 2.1 fields are int32 and 2**31 - 1 would hang the first step. PMX Editor's defaults are
0/1/0/4; Bullet's demos use <= 20. The PMX reader and physics clamp larger values (with a warning)."""


def count_of(field_name: str) -> property:
    """A read-only property: how many rows the field ``field_name`` has (0 when it is None)."""

    def count(self) -> int:
        value = getattr(self, field_name)
        return 0 if value is None else len(value)

    return property(count, doc=f"Rows of ``{field_name}`` (0 when absent).")


@dataclass(frozen=True, eq=False)
class Model:
    """One MMD character (PMX or PMD), immutable, structure of arrays.

    Every array is read-only numpy with the shape/dtype given in its comment.
    Per-kind morph element tables are sorted by their ``*_morph`` column (stable), so
    the rows of one morph are contiguous; ``*_start`` (N+1,) int32 gives each morph's
    row range in that table (empty for morphs of other kinds).
    """

    # --- header ---------------------------------------------------------------------
    name: str = ""
    name_en: str = ""
    comment: str = ""
    comment_en: str = ""

    # --- vertices -------------------------------------------------------------------
    vertex_position: np.ndarray = None  # (V, 3) float32, bind pose, model space
    vertex_normal: np.ndarray = None  # (V, 3) float32, model space, as stored (some are not unit length)
    vertex_uv: np.ndarray = None  # (V, 2) float32, texture space (u right, v down, 0..1 = the image)
    vertex_additional_uv: np.ndarray = None  # (V, A, 4) float32, PMX extra UV sets, meaning up to the shader
    vertex_deform: np.ndarray = None  # (V,) uint8, DEFORM_*
    vertex_bone_index: np.ndarray = None  # (V, 4) int32, unused slots 0
    vertex_bone_weight: np.ndarray = None  # (V, 4) float32, unused slots 0; BDEF2 = (w, 1-w, 0, 0)
    vertex_sdef_c: np.ndarray = None  # (V, 3) float32, model space, SDEF centre (zeros unless SDEF)
    vertex_sdef_r0: np.ndarray = None  # (V, 3) float32, model space, SDEF R0 (zeros unless SDEF)
    vertex_sdef_r1: np.ndarray = None  # (V, 3) float32, model space, SDEF R1 (zeros unless SDEF)
    vertex_edge_scale: np.ndarray = None  # (V,) float32, factor on the material's edge size

    # --- faces ----------------------------------------------------------------------
    face_vertex_index: np.ndarray = None  # (F, 3) int32, triangles in material order

    # --- textures / materials -------------------------------------------------------
    texture_path: tuple[str, ...] = ()  # (T,) relative paths as stored ('\\' kept)
    material_name: tuple[str, ...] = ()
    material_name_en: tuple[str, ...] = ()
    material_diffuse: np.ndarray = None  # (M, 4) float32, RGBA 0..1
    material_specular: np.ndarray = None  # (M, 3) float32, RGB 0..1
    material_specular_power: np.ndarray = None  # (M,) float32, Phong exponent
    material_ambient: np.ndarray = None  # (M, 3) float32, RGB 0..1
    material_flags: np.ndarray = None  # (M,) uint8, MATERIAL_*
    material_edge_color: np.ndarray = None  # (M, 4) float32, RGBA 0..1
    material_edge_size: np.ndarray = None  # (M,) float32, outline width (MMD's unit, × vertex_edge_scale)
    material_texture_index: np.ndarray = None  # (M,) int32, -1 none
    material_sphere_index: np.ndarray = None  # (M,) int32, -1 none
    material_sphere_mode: np.ndarray = None  # (M,) uint8, SPHERE_*
    material_toon_shared: np.ndarray = None  # (M,) bool, True: toon01..10 built in
    material_toon_index: np.ndarray = None  # (M,) int32: shared 0..9, else texture index / -1
    material_memo: tuple[str, ...] = ()
    material_face_start: np.ndarray = None  # (M+1,) int32, triangle range [start[m], start[m+1])

    # --- bones ----------------------------------------------------------------------
    bone_name: tuple[str, ...] = ()
    bone_name_en: tuple[str, ...] = ()
    bone_position: np.ndarray = None  # (B, 3) float32, rest position, model space
    bone_parent: np.ndarray = None  # (B,) int32, -1 root
    bone_layer: np.ndarray = None  # (B,) int32, deform layer
    bone_flags: np.ndarray = None  # (B,) uint16, BONE_*
    bone_tail_index: np.ndarray = None  # (B,) int32, -1 none (valid if BONE_TAIL_IS_BONE)
    bone_tail_offset: np.ndarray = None  # (B, 3) float32, model space, from bone_position (if not BONE_TAIL_IS_BONE)
    bone_append_parent: np.ndarray = None  # (B,) int32, -1 none
    bone_append_ratio: np.ndarray = None  # (B,) float32, share of the append parent's motion (may be < 0)
    bone_fixed_axis: np.ndarray = None  # (B, 3) float32, model space direction (zeros if none)
    bone_local_axis_x: np.ndarray = None  # (B, 3) float32, model space (zeros unless BONE_LOCAL_AXIS)
    bone_local_axis_z: np.ndarray = None  # (B, 3) float32, model space (zeros unless BONE_LOCAL_AXIS)
    bone_external_key: np.ndarray = None  # (B,) int32, PMX external parent key (0 unless BONE_EXTERNAL_PARENT)
    bone_ik: np.ndarray = None  # (B,) int32, IK solver index owned by this bone, -1 none

    # --- IK solvers (one per IK bone, in bone order) ----------------------------------
    ik_bone: np.ndarray = None  # (K,) int32, the IK (effector goal) bone
    ik_target: np.ndarray = None  # (K,) int32, the bone that must reach it
    ik_loop_count: np.ndarray = None  # (K,) int32, CCD iterations
    ik_limit_angle: np.ndarray = None  # (K,) float32, radians per step (PMD's ×4 applied)
    ik_link_start: np.ndarray = None  # (K+1,) int32, link rows [start[k], start[k+1]) of solver k
    ik_link_bone: np.ndarray = None  # (L,) int32, chain order: nearest to target first
    ik_link_has_limit: np.ndarray = None  # (L,) bool
    ik_link_lower: np.ndarray = None  # (L, 3) float32, Euler radians, bone local space, as stored
    ik_link_upper: np.ndarray = None  # (L, 3) float32, Euler radians, bone local space, as stored

    # --- morphs ---------------------------------------------------------------------
    morph_name: tuple[str, ...] = ()
    morph_name_en: tuple[str, ...] = ()
    morph_panel: np.ndarray = None  # (N,) uint8 (0 system,1 eyebrow,2 eye,3 mouth,4 other)
    morph_kind: np.ndarray = None  # (N,) uint8, MORPH_*
    # vertex morphs
    vertex_morph_start: np.ndarray = None  # (N+1,) int32, rows [start[n], start[n+1]) of morph n
    vertex_morph_vertex: np.ndarray = None  # (E,) int32, vertex index
    vertex_morph_offset: np.ndarray = None  # (E, 3) float32, model space, at weight 1
    # UV morphs (MORPH_UV .. MORPH_UV4); channel = kind - MORPH_UV (0 = base UV)
    uv_morph_start: np.ndarray = None  # (N+1,) int32
    uv_morph_vertex: np.ndarray = None  # (E,) int32, vertex index
    uv_morph_offset: np.ndarray = None  # (E, 4) float32, texture space (base UV uses the first 2)
    # bone morphs
    bone_morph_start: np.ndarray = None  # (N+1,) int32
    bone_morph_bone: np.ndarray = None  # (E,) int32, bone index
    bone_morph_translation: np.ndarray = None  # (E, 3) float32, parent space offset (like a VMD key)
    bone_morph_rotation: np.ndarray = None  # (E, 4) float32, xyzw, local rotation (like a VMD key)
    # material morphs
    material_morph_start: np.ndarray = None  # (N+1,) int32; the values below are factors (op 0) or addends (op 1)
    material_morph_material: np.ndarray = None  # (E,) int32, -1 = all materials
    material_morph_op: np.ndarray = None  # (E,) uint8, 0 multiply, 1 add
    material_morph_diffuse: np.ndarray = None  # (E, 4) float32, RGBA
    material_morph_specular: np.ndarray = None  # (E, 3) float32, RGB
    material_morph_specular_power: np.ndarray = None  # (E,) float32
    material_morph_ambient: np.ndarray = None  # (E, 3) float32, RGB
    material_morph_edge_color: np.ndarray = None  # (E, 4) float32, RGBA
    material_morph_edge_size: np.ndarray = None  # (E,) float32
    material_morph_texture_tint: np.ndarray = None  # (E, 4) float32, RGBA on the texture colour
    material_morph_sphere_tint: np.ndarray = None  # (E, 4) float32, RGBA on the sphere map colour
    material_morph_toon_tint: np.ndarray = None  # (E, 4) float32, RGBA on the toon colour
    # group and flip morphs (same layout)
    group_morph_start: np.ndarray = None  # (N+1,) int32, for MORPH_GROUP and MORPH_FLIP
    group_morph_target: np.ndarray = None  # (E,) int32, morph index
    group_morph_weight: np.ndarray = None  # (E,) float32, factor on the group morph's weight
    # impulse morphs
    impulse_morph_start: np.ndarray = None  # (N+1,) int32
    impulse_morph_rigid_body: np.ndarray = None  # (E,) int32, rigid body index
    impulse_morph_local: np.ndarray = None  # (E,) bool, True: the two vectors are in body space
    impulse_morph_velocity: np.ndarray = None  # (E, 3) float32, model space unless local
    impulse_morph_torque: np.ndarray = None  # (E, 3) float32, model space unless local

    # --- display frames (editor UI only) ---------------------------------------------
    # tuple of (name, name_en, special, ((target_is_morph: bool, index: int), ...))
    display_frames: tuple = ()

    # --- rigid bodies ---------------------------------------------------------------
    rigid_body_name: tuple[str, ...] = ()
    rigid_body_name_en: tuple[str, ...] = ()
    rigid_body_bone: np.ndarray = None  # (R,) int32, -1 none (follows the root)
    rigid_body_group: np.ndarray = None  # (R,) uint8, 0..15
    rigid_body_collide_mask: np.ndarray = None  # (R,) uint16, as stored: bit g set = collides with group g
    rigid_body_shape: np.ndarray = None  # (R,) uint8, SHAPE_*
    rigid_body_size: np.ndarray = None  # (R, 3) float32, MMD units: sphere (r,_,_), box half extents, capsule (r,h,_)
    rigid_body_position: np.ndarray = None  # (R, 3) float32, model space
    rigid_body_rotation: np.ndarray = None  # (R, 3) float32, Euler radians, model space, as stored
    rigid_body_mass: np.ndarray = None  # (R,) float32
    rigid_body_linear_damping: np.ndarray = None  # (R,) float32, 0..1
    rigid_body_angular_damping: np.ndarray = None  # (R,) float32, 0..1
    rigid_body_restitution: np.ndarray = None  # (R,) float32
    rigid_body_friction: np.ndarray = None  # (R,) float32
    rigid_body_mode: np.ndarray = None  # (R,) uint8, BODY_*

    # --- joints ---------------------------------------------------------------------
    joint_name: tuple[str, ...] = ()
    joint_name_en: tuple[str, ...] = ()
    joint_type: np.ndarray = None  # (J,) uint8, 0 = 6-DOF spring (2.1 adds others)
    joint_body_a: np.ndarray = None  # (J,) int32, rigid body index (-1 none)
    joint_body_b: np.ndarray = None  # (J,) int32, rigid body index (-1 none)
    joint_position: np.ndarray = None  # (J, 3) float32, model space
    joint_rotation: np.ndarray = None  # (J, 3) float32, Euler radians, model space
    joint_translation_lower: np.ndarray = None  # (J, 3) float32, joint space, MMD units
    joint_translation_upper: np.ndarray = None  # (J, 3) float32, joint space, MMD units
    joint_rotation_lower: np.ndarray = None  # (J, 3) float32, Euler radians, joint space
    joint_rotation_upper: np.ndarray = None  # (J, 3) float32, Euler radians, joint space
    joint_spring_translation: np.ndarray = None  # (J, 3) float32, stiffness per joint axis
    joint_spring_rotation: np.ndarray = None  # (J, 3) float32, stiffness per joint axis

    # --- soft bodies (PMX 2.1; rare, kept as records) -------------------------------
    soft_bodies: tuple = ()  # tuple of mmdkit.formats.pmx.SoftBodyRecord

    # --- provenance -----------------------------------------------------------------
    source_format: str = ""  # 'pmx' | 'pmd' | 'built'
    source_path: str = ""  # file the model was read from ('' if built in code)
    # format details needed to write the file back byte-for-byte (index sizes, encoding,
    # PMD bone types, toon file names, ...). Readers put what they need; others ignore it.
    source_extras: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # what was recovered while reading

    # --- counts ---------------------------------------------------------------------
    num_vertices = count_of("vertex_position")
    num_faces = count_of("face_vertex_index")
    num_materials = count_of("material_name")
    num_bones = count_of("bone_name")
    num_morphs = count_of("morph_name")
    num_rigid_bodies = count_of("rigid_body_name")
    num_joints = count_of("joint_name")
    num_soft_bodies = count_of("soft_bodies")

    def bone_index(self, name: str) -> int:
        """Index of the bone called ``name`` (first match), or -1."""
        try:
            return self.bone_name.index(name)
        except ValueError:
            return -1

    def morph_index(self, name: str) -> int:
        """Index of the morph called ``name`` (first match), or -1."""
        try:
            return self.morph_name.index(name)
        except ValueError:
            return -1

    def replace(self, **changes) -> "Model":
        """A copy with some fields replaced (arrays are made read-only again)."""
        return freeze(dataclasses.replace(self, **changes))


def freeze(obj):
    """Make every numpy array field of a dataclass read-only; returns obj."""
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return obj
