"""Make models in code: ``ModelBuilder`` → ``Model`` (motions: ``mmdkit.animation.builder``).

In: Python values (names, positions as sequences or numpy arrays). Out: the same frozen,
validated ``Model`` the readers give (``build()`` runs ``build_model``), ready for
``mmdkit.save``. Angles are radians, quaternions (x, y, z, w), MMD's left-handed coordinates.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import BuildError
from mmdkit.model import model as M
from mmdkit.model.build import build_model, check_index
from mmdkit.model.deform import effective_weights

_SHAPES = {"sphere": 0, "box": 1, "capsule": 2}


def float_vector(x, n: int, what: str = "value") -> np.ndarray:
    """``x`` (any sequence of ``n`` numbers) → (n,) float32; ``BuildError`` naming ``what`` otherwise."""
    a = np.asarray(x, np.float32).reshape(-1)
    if a.shape != (n,):
        raise BuildError(f"{what} needs {n} numbers, got {np.shape(x)}")
    return a


class ModelBuilder:
    """Collects bones, IK, materials, meshes, morphs and physics; ``build()`` → ``Model``."""

    def __init__(self, name: str = "", *, name_en: str = "", comment: str = "", comment_en: str = ""):
        self.name, self.name_en, self.comment, self.comment_en = name, name_en, comment, comment_en
        self._bones: list[dict] = []
        self._iks: list[tuple] = []
        self._materials: list[dict] = []
        self._textures: list[str] = []
        self._meshes: list[tuple] = []  # (material, vertex arrays dict, faces global)
        self._nv = 0
        self._morphs: list[tuple] = []  # (name, panel, kind, table, rows dict)
        self._bodies: list[dict] = []
        self._joints: list[dict] = []
        self.display_frames = None  # None: 'Root' (bone 0) and '表情' (all morphs) are made

    # --- bones ---------------------------------------------------------------------------
    def add_bone(self, name, position, parent=-1, *, tail_offset=(0, 0, 0), tail_bone=-1, rotatable=True,
                 translatable=False, visible=True, layer=0, after_physics=False, append_parent=-1,
                 append_ratio=0.0, append_rotation=False, append_translation=False, append_local=False,
                 fixed_axis=None, local_axis=None, name_en="") -> int:
        """Add a bone; returns its index. ``local_axis`` = (x_axis, z_axis)."""
        fl = M.BONE_ENABLED
        fl |= M.BONE_ROTATABLE if rotatable else 0
        fl |= M.BONE_TRANSLATABLE if translatable else 0
        fl |= M.BONE_VISIBLE if visible else 0
        fl |= M.BONE_TAIL_IS_BONE if tail_bone >= 0 else 0
        fl |= M.BONE_AFTER_PHYSICS if after_physics else 0
        if append_parent >= 0 and not (append_rotation or append_translation):
            append_rotation = True
        fl |= M.BONE_APPEND_ROTATION if append_rotation else 0
        fl |= M.BONE_APPEND_TRANSLATION if append_translation else 0
        fl |= M.BONE_APPEND_LOCAL if append_local else 0
        fl |= M.BONE_FIXED_AXIS if fixed_axis is not None else 0
        fl |= M.BONE_LOCAL_AXIS if local_axis is not None else 0
        lx, lz = (np.zeros(3, np.float32),) * 2
        if local_axis is not None:
            lx, lz = float_vector(local_axis[0], 3, "local_axis x"), float_vector(local_axis[1], 3, "local_axis z")
        self._bones.append(dict(
            name=name, name_en=name_en, position=float_vector(position, 3, "position"), parent=int(parent),
            layer=int(layer),
            flags=fl, tail_index=int(tail_bone), tail_offset=float_vector(tail_offset, 3, "tail_offset"),
            append_parent=int(append_parent), append_ratio=float(append_ratio),
            fixed_axis=np.zeros(3, np.float32) if fixed_axis is None else float_vector(fixed_axis, 3, "fixed_axis"),
            local_x=lx, local_z=lz))
        return len(self._bones) - 1

    def add_ik(self, ik_bone, target_bone, links, loop_count=40, limit_angle=2.0) -> int:
        """Make ``ik_bone`` an IK bone reaching for ``target_bone``. ``links``: bone index or
        (bone, lower_xyz_rad, upper_xyz_rad), nearest the target first. Returns the solver index."""
        rows = []
        for ln in links:
            if isinstance(ln, (tuple, list)):
                rows.append((int(ln[0]), True, float_vector(ln[1], 3, "IK lower"), float_vector(ln[2], 3, "IK upper")))
            else:
                rows.append((int(ln), False, np.zeros(3, np.float32), np.zeros(3, np.float32)))
        check_index(np.array([ik_bone]), 0, len(self._bones), "IK bone", section="add_ik")
        self._bones[ik_bone]["flags"] |= M.BONE_IK
        self._iks.append((int(ik_bone), int(target_bone), int(loop_count), float(limit_angle), rows))
        return len(self._iks) - 1

    # --- materials and meshes ---------------------------------------------------------------
    def _texture(self, path):
        if path is None:
            return -1
        if path not in self._textures:
            self._textures.append(path)
        return self._textures.index(path)

    def add_material(self, name, diffuse=(1, 1, 1, 1), specular=(0, 0, 0), specular_power=5,
                     ambient=(.5, .5, .5), double_sided=False, edge=True, edge_color=(0, 0, 0, 1),
                     edge_size=1.0, texture=None, sphere=None, sphere_mode=0, toon=None, *, name_en="",
                     ground_shadow=True, self_shadow=True, memo="") -> int:
        """Add a material; ``toon``: None, a shared toon number 0..9, or a texture path."""
        fl = (M.MATERIAL_DOUBLE_SIDED if double_sided else 0) | (M.MATERIAL_EDGE if edge else 0)
        fl |= (M.MATERIAL_GROUND_SHADOW if ground_shadow else 0)
        fl |= (M.MATERIAL_SELF_SHADOW_MAP | M.MATERIAL_SELF_SHADOW) if self_shadow else 0
        if toon is None:
            shared, ti = False, -1
        elif isinstance(toon, (int, np.integer)):
            shared, ti = True, int(toon)
        else:
            shared, ti = False, self._texture(str(toon))
        self._materials.append(dict(
            name=name, name_en=name_en, diffuse=float_vector(diffuse, 4, "diffuse"),
            specular=float_vector(specular, 3, "specular"),
            power=float(specular_power), ambient=float_vector(ambient, 3, "ambient"), flags=fl,
            edge_color=float_vector(edge_color, 4, "edge_color"), edge_size=float(edge_size),
            tex=self._texture(texture),
            sphere=self._texture(sphere), sphere_mode=int(sphere_mode) if sphere is not None else 0,
            toon_shared=shared, toon=ti, memo=memo))
        return len(self._materials) - 1

    def add_mesh(self, material, positions, normals, uvs, faces, bone_index, bone_weight=None, deform=None,
                 *, edge_scale=None) -> int:
        """Add vertices and triangles (``faces`` use local vertex ids) drawn with ``material``.
        ``bone_index`` (n,) → BDEF1, or (n, 4) with ``bone_weight`` (n, 4); ``deform`` (n,)
        DEFORM_* overrides the inferred type. Returns the index of the first vertex."""
        p = np.asarray(positions, np.float32).reshape(-1, 3)
        n = len(p)
        nrm = np.asarray(normals, np.float32).reshape(n, 3)
        uv = np.asarray(uvs, np.float32).reshape(n, 2)
        fc = np.asarray(faces, np.int64).reshape(-1, 3)
        check_index(fc, 0, n, "face vertex ids", section="add_mesh faces")
        bi = np.asarray(bone_index, np.int32)
        bi4 = np.zeros((n, 4), np.int32)
        bw4 = np.zeros((n, 4), np.float32)
        if bi.ndim == 1:
            bi4[:, 0] = bi.reshape(n)
            bw4[:, 0] = 1
            inferred = np.zeros(n, np.uint8)
        else:
            bi = bi.reshape(n, -1)
            k = bi.shape[1]
            bi4[:, :k] = bi
            if bone_weight is None:
                bw4[:, 0] = 1
            else:
                bw4[:, :k] = np.asarray(bone_weight, np.float32).reshape(n, k)
            only0 = (bw4[:, 1:] == 0).all(axis=1) & (bw4[:, 0] == 1)
            two = (bw4[:, 2:] == 0).all(axis=1) & np.isclose(bw4[:, 0] + bw4[:, 1], 1)
            inferred = np.where(only0, M.DEFORM_BDEF1, np.where(two, M.DEFORM_BDEF2, M.DEFORM_BDEF4)).astype(np.uint8)
        d = inferred if deform is None else np.broadcast_to(np.asarray(deform, np.uint8), (n,)).copy()
        bw4 = effective_weights(d, bw4)
        es = np.ones(n, np.float32) if edge_scale is None else np.broadcast_to(np.asarray(edge_scale, np.float32), (n,))
        v0 = self._nv
        self._meshes.append((int(material), dict(p=p, n=nrm, uv=uv, bi=bi4, bw=bw4, d=d, es=es), fc + v0))
        self._nv += n
        return v0

    # --- morphs -----------------------------------------------------------------------------
    def _morph(self, name, panel, kind, table, rows, name_en=""):
        self._morphs.append((name, name_en, int(panel), int(kind), table, rows))
        return len(self._morphs) - 1

    def add_vertex_morph(self, name, vertex_indices, offsets, panel=4, *, name_en="") -> int:
        vi = np.asarray(vertex_indices, np.int32).reshape(-1)
        return self._morph(name, panel, M.MORPH_VERTEX, "vertex",
                           dict(vertex=vi, offset=np.asarray(offsets, np.float32).reshape(len(vi), 3)), name_en)

    def add_uv_morph(self, name, vertex_indices, offsets4, channel=0, panel=4, *, name_en="") -> int:
        vi = np.asarray(vertex_indices, np.int32).reshape(-1)
        if not 0 <= channel <= 4:
            raise BuildError(f"UV morph channel {channel} not in 0..4", section="add_uv_morph")
        return self._morph(name, panel, M.MORPH_UV + channel, "uv",
                           dict(vertex=vi, offset=np.asarray(offsets4, np.float32).reshape(len(vi), 4)), name_en)

    def add_bone_morph(self, name, bones, translations, rotations_xyzw, panel=4, *, name_en="") -> int:
        b = np.asarray(bones, np.int32).reshape(-1)
        return self._morph(name, panel, M.MORPH_BONE, "bone", dict(
            bone=b, translation=np.asarray(translations, np.float32).reshape(len(b), 3),
            rotation=np.asarray(rotations_xyzw, np.float32).reshape(len(b), 4)), name_en)

    def add_material_morph(self, name, material, op, *, panel=4, name_en="", **values) -> int:
        """``values``: diffuse(4) specular(3) specular_power ambient(3) edge_color(4) edge_size
        texture_tint(4) sphere_tint(4) toon_tint(4); unspecified = identity (1 multiply, 0 add)."""
        ident = 1.0 if op == 0 else 0.0
        sizes = dict(diffuse=4, specular=3, specular_power=1, ambient=3, edge_color=4, edge_size=1,
                     texture_tint=4, sphere_tint=4, toon_tint=4)
        unknown = set(values) - set(sizes)
        if unknown:
            raise BuildError(f"unknown material morph values {sorted(unknown)}", section="add_material_morph")
        row = {k: (float_vector(values[k], n, k) if k in values else np.full(n, ident, np.float32))
               for k, n in sizes.items()}
        row = {k: v.reshape(1, -1) if sizes[k] > 1 else v.reshape(1) for k, v in row.items()}
        row.update(material=np.array([material], np.int32), op=np.array([op], np.uint8))
        return self._morph(name, panel, M.MORPH_MATERIAL, "material", row, name_en)

    def add_group_morph(self, name, morphs, weights, panel=4, *, flip=False, name_en="") -> int:
        t = np.asarray(morphs, np.int32).reshape(-1)
        return self._morph(name, panel, M.MORPH_FLIP if flip else M.MORPH_GROUP, "group",
                           dict(target=t, weight=np.asarray(weights, np.float32).reshape(len(t))), name_en)

    def add_impulse_morph(self, name, rigid_bodies, velocities, torques, local=False, panel=4, *, name_en="") -> int:
        r = np.asarray(rigid_bodies, np.int32).reshape(-1)
        return self._morph(name, panel, M.MORPH_IMPULSE, "impulse", dict(
            rigid_body=r, local=np.broadcast_to(np.asarray(local, bool), r.shape).copy(),
            velocity=np.asarray(velocities, np.float32).reshape(len(r), 3),
            torque=np.asarray(torques, np.float32).reshape(len(r), 3)), name_en)

    # --- physics ----------------------------------------------------------------------------
    def add_rigid_body(self, name, bone, shape, size, position, rotation=(0, 0, 0), mass=1.0, mode=0, group=0,
                       collide_mask=0xFFFF, linear_damping=0.5, angular_damping=0.5, restitution=0.0, friction=0.5,
                       *, name_en="") -> int:
        shape = _SHAPES.get(shape, shape) if isinstance(shape, str) else int(shape)
        if shape not in (0, 1, 2):
            raise BuildError(f"unknown rigid body shape {shape!r}", section="add_rigid_body")
        self._bodies.append(dict(name=name, name_en=name_en, bone=int(bone), shape=shape,
                                 size=float_vector(size, 3, "size"), position=float_vector(position, 3, "position"),
                                 rotation=float_vector(rotation, 3, "rotation"),
                                 mass=mass, mode=int(mode), group=int(group), mask=int(collide_mask) & 0xFFFF,
                                 lin=linear_damping, ang=angular_damping, rest=restitution, fric=friction))
        return len(self._bodies) - 1

    def add_joint(self, name, body_a, body_b, position, rotation=(0, 0, 0), translation_lower=(0, 0, 0),
                  translation_upper=(0, 0, 0), rotation_lower=(0, 0, 0), rotation_upper=(0, 0, 0),
                  spring_translation=(0, 0, 0), spring_rotation=(0, 0, 0), *, name_en="") -> int:
        vals = [position, rotation, translation_lower, translation_upper, rotation_lower, rotation_upper,
                spring_translation, spring_rotation]
        self._joints.append(dict(name=name, name_en=name_en, a=int(body_a), b=int(body_b),
                                 v=np.stack([float_vector(x, 3, "joint vector") for x in vals])))
        return len(self._joints) - 1

    # --- build ------------------------------------------------------------------------------
    def fields(self) -> dict:
        """The Model fields this builder describes (before validation)."""
        f: dict = dict(name=self.name, name_en=self.name_en, comment=self.comment, comment_en=self.comment_en,
                       source_format="built", source_path="")
        self._mesh_fields(f)
        self._material_fields(f)
        self._bone_fields(f)
        self._ik_fields(f)
        self._morph_fields(f)
        self._physics_fields(f)
        f["display_frames"] = self._display_frames()
        return f

    def _mesh_fields(self, f):
        """Vertices in insertion order; faces grouped by material (stable), with the ranges."""
        nm = len(self._materials)
        if self._meshes:
            cat = lambda k: np.concatenate([m[1][k] for m in self._meshes])  # noqa: E731
            f.update(vertex_position=cat("p"), vertex_normal=cat("n"), vertex_uv=cat("uv"),
                     vertex_bone_index=cat("bi"), vertex_bone_weight=cat("bw"), vertex_deform=cat("d"),
                     vertex_edge_scale=cat("es"))
        else:
            f["vertex_position"] = np.zeros((0, 3), np.float32)
        f["vertex_additional_uv"] = np.zeros((self._nv, 0, 4), np.float32)
        check_index(np.array([mi for mi, _, _ in self._meshes], np.int64), 0, nm, "mesh material",
                    section="add_mesh")
        faces = [np.zeros((0, 3), np.int64)]
        per = np.zeros(nm + 1, np.int64)
        for m in range(nm):
            fm = [fc for mi, _, fc in self._meshes if mi == m]
            per[m + 1] = sum(len(x) for x in fm)
            faces += fm
        f["face_vertex_index"] = np.concatenate(faces).astype(np.int32)
        f["material_face_start"] = np.cumsum(per).astype(np.int32)

    def _material_fields(self, f):
        mats = self._materials
        col = lambda k, dt=np.float32: np.array([m[k] for m in mats], dt)  # noqa: E731
        f.update(texture_path=tuple(self._textures), material_name=tuple(m["name"] for m in mats),
                 material_name_en=tuple(m["name_en"] for m in mats), material_memo=tuple(m["memo"] for m in mats))
        if mats:
            f.update(material_diffuse=col("diffuse"), material_specular=col("specular"),
                     material_specular_power=col("power"), material_ambient=col("ambient"),
                     material_flags=col("flags", np.uint8), material_edge_color=col("edge_color"),
                     material_edge_size=col("edge_size"), material_texture_index=col("tex", np.int32),
                     material_sphere_index=col("sphere", np.int32), material_sphere_mode=col("sphere_mode", np.uint8),
                     material_toon_shared=col("toon_shared", bool), material_toon_index=col("toon", np.int32))

    def _bone_fields(self, f):
        bones = self._bones
        bcol = lambda k, dt=np.float32: np.array([b[k] for b in bones], dt)  # noqa: E731
        f.update(bone_name=tuple(b["name"] for b in bones), bone_name_en=tuple(b["name_en"] for b in bones))
        if bones:
            bik = np.full(len(bones), -1, np.int32)
            for k, ik in enumerate(self._iks):
                if 0 <= ik[0] < len(bones) and bik[ik[0]] < 0:
                    bik[ik[0]] = k
            f.update(bone_position=bcol("position"), bone_parent=bcol("parent", np.int32),
                     bone_layer=bcol("layer", np.int32), bone_flags=bcol("flags", np.uint16),
                     bone_tail_index=bcol("tail_index", np.int32), bone_tail_offset=bcol("tail_offset"),
                     bone_append_parent=bcol("append_parent", np.int32), bone_append_ratio=bcol("append_ratio"),
                     bone_fixed_axis=bcol("fixed_axis"), bone_local_axis_x=bcol("local_x"),
                     bone_local_axis_z=bcol("local_z"), bone_ik=bik)

    def _ik_fields(self, f):
        iks = self._iks
        links = [ln for ik in iks for ln in ik[4]]
        f.update(ik_bone=np.array([ik[0] for ik in iks], np.int32),
                 ik_target=np.array([ik[1] for ik in iks], np.int32),
                 ik_loop_count=np.array([ik[2] for ik in iks], np.int32),
                 ik_limit_angle=np.array([ik[3] for ik in iks], np.float32),
                 ik_link_start=np.concatenate([[0], np.cumsum([len(ik[4]) for ik in iks])]).astype(np.int32),
                 ik_link_bone=np.array([ln[0] for ln in links], np.int32),
                 ik_link_has_limit=np.array([ln[1] for ln in links], bool),
                 ik_link_lower=np.array([ln[2] for ln in links], np.float32).reshape(-1, 3),
                 ik_link_upper=np.array([ln[3] for ln in links], np.float32).reshape(-1, 3))

    def _physics_fields(self, f):
        bodies = self._bodies
        rc = lambda k, dt=np.float32: np.array([b[k] for b in bodies], dt)  # noqa: E731
        f.update(rigid_body_name=tuple(b["name"] for b in bodies),
                 rigid_body_name_en=tuple(b["name_en"] for b in bodies))
        if bodies:
            f.update(rigid_body_bone=rc("bone", np.int32), rigid_body_group=rc("group", np.uint8),
                     rigid_body_collide_mask=rc("mask", np.uint16), rigid_body_shape=rc("shape", np.uint8),
                     rigid_body_size=rc("size"), rigid_body_position=rc("position"), rigid_body_rotation=rc("rotation"),
                     rigid_body_mass=rc("mass"), rigid_body_linear_damping=rc("lin"),
                     rigid_body_angular_damping=rc("ang"), rigid_body_restitution=rc("rest"),
                     rigid_body_friction=rc("fric"), rigid_body_mode=rc("mode", np.uint8))
        js = self._joints
        f.update(joint_name=tuple(j["name"] for j in js), joint_name_en=tuple(j["name_en"] for j in js))
        if js:
            v = np.stack([j["v"] for j in js])
            f.update(joint_body_a=np.array([j["a"] for j in js], np.int32),
                     joint_body_b=np.array([j["b"] for j in js], np.int32), joint_position=v[:, 0],
                     joint_rotation=v[:, 1], joint_translation_lower=v[:, 2], joint_translation_upper=v[:, 3],
                     joint_rotation_lower=v[:, 4], joint_rotation_upper=v[:, 5], joint_spring_translation=v[:, 6],
                     joint_spring_rotation=v[:, 7])

    def _display_frames(self) -> tuple:
        """``display_frames`` as set, else 'Root' (bone 0), '表情' (all morphs), 'ボーン' (other bones)."""
        if self.display_frames is not None:
            return tuple(self.display_frames)
        nb = len(self._bones)
        frames = [("Root", "Root", 1, ((False, 0),) if nb else ()),
                  ("表情", "Exp", 1, tuple((True, i) for i in range(len(self._morphs))))]
        if nb > 1:
            frames.append(("ボーン", "Bones", 0, tuple((False, i) for i in range(1, nb))))
        return tuple(frames)

    def _morph_fields(self, f):
        n = len(self._morphs)
        f.update(morph_name=tuple(m[0] for m in self._morphs), morph_name_en=tuple(m[1] for m in self._morphs),
                 morph_panel=np.array([m[2] for m in self._morphs], np.uint8),
                 morph_kind=np.array([m[3] for m in self._morphs], np.uint8))
        cols = {"vertex": ("vertex", "offset"), "uv": ("vertex", "offset"),
                "bone": ("bone", "translation", "rotation"),
                "material": ("material", "op", "diffuse", "specular", "specular_power", "ambient", "edge_color",
                             "edge_size", "texture_tint", "sphere_tint", "toon_tint"),
                "group": ("target", "weight"), "impulse": ("rigid_body", "local", "velocity", "torque")}
        for t, keys in cols.items():
            rows = [m[5] for m in self._morphs if m[4] == t]
            counts = np.array([len(m[5][keys[0]]) if m[4] == t else 0 for m in self._morphs], np.int64)
            f[f"{t}_morph_start"] = (np.concatenate([[0], np.cumsum(counts)]).astype(np.int32) if n
                                     else np.zeros(1, np.int32))
            for k in keys:
                if rows:
                    f[f"{t}_morph_{k}"] = np.concatenate([r[k] for r in rows])

    def build(self) -> M.Model:
        """Validate and return the frozen ``Model`` (``BuildError`` names the bad field/row)."""
        return build_model(self.fields())
