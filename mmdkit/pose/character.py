"""A character: one (shared, read-only) Model + its own motion binding and mutable pose state.

In: ``Model``, optional ``Motion`` (or VPD ``Pose``), optional physics object (see
docs/ARCHITECTURE.md). ``update(frame)`` runs the stages in MMD's order — sample → morphs →
bones before physics → physics → bones after physics — into preallocated arrays:
bone_world / bone_skin (B,4,4) float32, morph_weight (N,) float32, vertex_offset (V,3),
uv_offset (V,4), additional_uv_offset (V,A,4), material_* (M,...) after material morphs.
Nothing is allocated per frame. ``pose(model, motion, frames)`` is the batch form.
"""

from __future__ import annotations

import time

import numpy as np

from mmdkit.animation.binding import BoundMotion, bind_motion
from mmdkit.animation.motion import Pose
from mmdkit.animation.sampling import sample_bone_physics, sample_bones, sample_scalars, sample_steps
from mmdkit.animation.vpd import motion_from_pose
from mmdkit.model import model as M
from mmdkit.pose import bones as K
from mmdkit.pose import morph as MK
from mmdkit.pose.frame import frame_before_physics
from mmdkit.pose.rig import Rig, build_rig

FPS = 30.0
STAGES = ("sample", "morph", "bones_before_physics", "physics", "bones_after_physics", "skinning")

_rig_cache: dict[int, tuple[object, Rig]] = {}


def rig_for(model) -> Rig:
    """The Rig of a Model, built once and shared by all its characters."""
    hit = _rig_cache.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    rig = build_rig(model)
    _rig_cache[id(model)] = (model, rig)
    return rig


def _material_values(model):
    """(E, 28) float32 packed material-morph values and (M, 16) base values."""
    def col(a, n, E):
        return np.zeros((E, n), np.float32) if a is None else np.asarray(a, np.float32).reshape(E, n)

    E = 0 if model.material_morph_material is None else len(model.material_morph_material)
    vals = np.concatenate([
        col(model.material_morph_diffuse, 4, E), col(model.material_morph_specular, 3, E),
        col(model.material_morph_specular_power, 1, E), col(model.material_morph_ambient, 3, E),
        col(model.material_morph_edge_color, 4, E), col(model.material_morph_edge_size, 1, E),
        col(model.material_morph_texture_tint, 4, E), col(model.material_morph_sphere_tint, 4, E),
        col(model.material_morph_toon_tint, 4, E)], axis=1)
    Mn = model.num_materials
    base = np.concatenate([
        col(model.material_diffuse, 4, Mn), col(model.material_specular, 3, Mn),
        col(model.material_specular_power, 1, Mn), col(model.material_ambient, 3, Mn),
        col(model.material_edge_color, 4, Mn), col(model.material_edge_size, 1, Mn)], axis=1)
    return np.ascontiguousarray(vals, np.float64), base


class Character:
    """Model + motion + own pose state. Many characters may share one Model."""

    PHYSICS_MODES = ("playing", "always", "off")

    def __init__(self, model, motion=None, physics=None, *, fps: float = FPS, physics_mode: str = "playing"):
        if isinstance(motion, Pose):
            motion = motion_from_pose(motion)
        self.model = model
        self.motion = motion
        self.fps = float(fps)
        self.rig = rig_for(model)
        self.bound: BoundMotion = bind_motion(model, motion)
        self.physics = physics
        if physics_mode not in self.PHYSICS_MODES:
            raise ValueError(f"physics_mode must be one of {self.PHYSICS_MODES}, not {physics_mode!r}")
        # MMD's modes: 'playing' simulates as frames advance (a repeated frame holds the bodies),
        # 'always' keeps simulating on a repeated frame (paused playback), 'off' lets bones follow keys
        self.physics_mode = physics_mode
        B, N, V = model.num_bones, model.num_morphs, model.num_vertices
        A = 0 if model.vertex_additional_uv is None else model.vertex_additional_uv.shape[1]
        Kik = len(model.ik_bone)
        # float64 working state
        self._anim_t = np.zeros((B, 3))
        self._anim_q = np.zeros((B, 4))
        self._ik_q = np.zeros((B, 4))
        self._ik_q[:, 3] = 1
        self._app_t = np.zeros((B, 3))
        self._app_q = np.zeros((B, 4))
        self._app_q[:, 3] = 1
        self._local_t = np.zeros((B, 3))
        self._local_q = np.zeros((B, 4))
        self._local_q[:, 3] = 1
        self._world_p = np.zeros((B, 3))
        self._world_q = np.zeros((B, 4))
        self._world_q[:, 3] = 1
        self._raw_w = np.zeros(N)
        self._eff_w = np.zeros(N)
        self._prev_vw = np.zeros(N)
        self._prev_uw = np.zeros(N)
        self.ik_enabled = np.ones(Kik, np.uint8)
        self._visible = np.ones(1, np.uint8)
        self.bone_physics = np.ones(B, bool)
        self._has_physics_keys = bool(len(self.bound.bone_key_physics)) and not self.bound.bone_key_physics.all()
        # outputs
        self.bone_world = np.zeros((B, 4, 4), np.float32)
        self.bone_skin = np.zeros((B, 4, 4), np.float32)
        self.morph_weight = np.zeros(N, np.float32)
        self.vertex_offset = np.zeros((V, 3), np.float32)
        self.uv_offset = np.zeros((V, 4), np.float32)
        self.additional_uv_offset = np.zeros((V, A, 4), np.float32)
        self._mat_values, self._mat_base = _material_values(model)
        Mn = model.num_materials
        self._mat_mul = np.ones((Mn, 28))
        self._mat_add = np.zeros((Mn, 28))
        self._mat_out = np.zeros((Mn, 16), np.float32)
        self._m_kind = np.asarray(model.morph_kind, np.int64)
        self._refresh = np.zeros(0, np.int32)
        self._driven = np.zeros(B, bool)
        # IK solvers whose links are all driven by physics are skipped while physics runs (MMD)
        self._ik_off_none = np.zeros(Kik, np.uint8)
        self._ik_off_physics = self._ik_off_none
        if physics is not None:
            self._set_driven(physics.driven_bone_mask)
        self.frame: float | None = None
        self.stage_seconds = dict.fromkeys(STAGES, 0.0)
        self._skinner = None

    @property
    def visible(self) -> bool:
        """False on frames where the motion's property keys hide the model (MMD's 表示 off)."""
        return bool(self._visible[0])

    # --- material views (M, ...) after material morphs --------------------------------
    @property
    def material_diffuse(self):
        return self._mat_out[:, 0:4]

    @property
    def material_specular(self):
        return self._mat_out[:, 4:7]

    @property
    def material_specular_power(self):
        return self._mat_out[:, 7]

    @property
    def material_ambient(self):
        return self._mat_out[:, 8:11]

    @property
    def material_edge_color(self):
        return self._mat_out[:, 11:15]

    @property
    def material_edge_size(self):
        return self._mat_out[:, 15]

    def material_tint(self, which: str):
        """(mul (M,4), add (M,4)) for 'texture', 'sphere' or 'toon' after material morphs."""
        c = {"texture": 16, "sphere": 20, "toon": 24}[which]
        return self._mat_mul[:, c:c + 4], self._mat_add[:, c:c + 4]

    @property
    def unbound(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(bone track names, morph track names) of the motion that matched nothing."""
        return self.bound.unbound_bones, self.bound.unbound_morphs

    def _set_driven(self, driven):
        self._driven = np.asarray(driven, bool).copy()
        self._refresh = self._refresh_list(self._driven)
        r = self.rig
        off = np.zeros(len(r.ik_loop), np.uint8)
        for k in range(len(off)):
            links = r.ik_link_bone[r.ik_link_start[k]:r.ik_link_start[k + 1]]
            off[k] = len(links) > 0 and bool(self._driven[links].all())
        self._ik_off_physics = off

    def _refresh_list(self, driven):
        """Non-driven, before-physics descendants of driven bones, in evaluation order."""
        r = self.rig
        mask = driven.copy()
        out = []
        after = (r.flags & M.BONE_AFTER_PHYSICS) != 0
        for b in r.order:
            p = r.parent[b]
            if p >= 0 and mask[p] and not driven[b]:
                mask[b] = True
                if not after[b]:
                    out.append(b)
        return np.asarray(out, np.int32)

    # --- stages ------------------------------------------------------------------------
    def _solve(self, bones):
        r = self.rig
        K.solve_bones(bones, r.parent, r.position, r.flags, r.append_parent, r.append_ratio,
                      r.fixed_axis, r.bone_ik, r.ik_target, r.ik_loop, r.ik_limit, r.ik_link_start,
                      r.ik_link_bone, r.ik_link_mode, r.ik_link_lower, r.ik_link_upper,
                      r.ik_path_start, r.ik_path_bone, r.ik_after_start, r.ik_after_bone,
                      self.ik_enabled, self._anim_t, self._anim_q, self._ik_q, self._app_t,
                      self._app_q, self._local_t, self._local_q, self._world_p, self._world_q)

    def _stages_before_physics(self, frame, ik_off):
        """sample → morphs → bones pass 1, stage by stage (timed)."""
        m, b, r = self.model, self.bound, self.rig
        clock = time.perf_counter
        sample_bones(frame, b.bone_key_start, b.bone_key_frame, b.bone_key_translation,
                     b.bone_key_rotation, b.bone_key_curve, self._anim_t, self._anim_q)
        sample_scalars(frame, b.morph_key_start, b.morph_key_frame, b.morph_key_weight, self._raw_w)
        sample_steps(frame, b.ik_key_start, b.ik_key_frame, b.ik_key_enabled, self.ik_enabled)
        K.switch_off_ik(self.ik_enabled, ik_off)
        t1 = clock()
        MK.expand_weights(self._raw_w, r.morph_is_leaf, r.group_start, r.group_target,
                          r.group_weight, self._eff_w)
        w = self._eff_w
        if len(w):
            MK.apply_bone_morphs(w, m.bone_morph_start, m.bone_morph_bone, m.bone_morph_translation,
                                 m.bone_morph_rotation, self._anim_t, self._anim_q)
            MK.apply_offset_morphs(w, self._prev_vw, m.vertex_morph_start, m.vertex_morph_vertex,
                                   m.vertex_morph_offset, self.vertex_offset)
            MK.apply_uv_morphs(w, self._prev_uw, self._m_kind, m.uv_morph_start, m.uv_morph_vertex,
                               m.uv_morph_offset, self.uv_offset, self.additional_uv_offset)
            MK.apply_material_morphs(w, m.material_morph_start, m.material_morph_material,
                                     m.material_morph_op, self._mat_values, self._mat_mul, self._mat_add)
            self.morph_weight[:] = w
        self._mat_out[:] = self._mat_base * self._mat_mul[:, :16] + self._mat_add[:, :16]
        t2 = clock()
        self._solve(r.pass1)
        K.write_matrices(r.position, self._world_p, self._world_q, self.bone_world, self.bone_skin)
        self._t = (t1, t2, clock())

    def update(self, frame: float, *, timed: bool = False):
        """Pose this character at ``frame`` (fractional allowed). Seeking resets physics."""
        m, b, r = self.model, self.bound, self.rig
        clock = time.perf_counter
        t0 = clock()
        frame = float(frame)
        ik_off = self._ik_off_physics if self.physics is not None and self.physics_mode != "off" else self._ik_off_none
        if not timed:  # the same stage kernels, in one compiled call
            frame_before_physics(
                frame, b.bone_key_start, b.bone_key_frame, b.bone_key_translation, b.bone_key_rotation,
                b.bone_key_curve, b.morph_key_start, b.morph_key_frame, b.morph_key_weight, b.ik_key_start,
                b.ik_key_frame, b.ik_key_enabled, ik_off, r.morph_is_leaf, r.group_start, r.group_target,
                r.group_weight, m.bone_morph_start, m.bone_morph_bone, m.bone_morph_translation,
                m.bone_morph_rotation, m.vertex_morph_start, m.vertex_morph_vertex, m.vertex_morph_offset,
                self._m_kind, m.uv_morph_start, m.uv_morph_vertex, m.uv_morph_offset, m.material_morph_start,
                m.material_morph_material, m.material_morph_op, self._mat_values, self._mat_base,
                r.pass1, r.parent, r.position, r.flags, r.append_parent, r.append_ratio, r.fixed_axis,
                r.bone_ik, r.ik_target, r.ik_loop, r.ik_limit, r.ik_link_start, r.ik_link_bone,
                r.ik_link_mode, r.ik_link_lower, r.ik_link_upper, r.ik_path_start, r.ik_path_bone,
                r.ik_after_start, r.ik_after_bone, self.ik_enabled, self._raw_w, self._eff_w,
                self._prev_vw, self._prev_uw, self.morph_weight, self.vertex_offset, self.uv_offset,
                self.additional_uv_offset, self._mat_mul, self._mat_add, self._mat_out, self._anim_t,
                self._anim_q, self._ik_q, self._app_t, self._app_q, self._local_t, self._local_q,
                self._world_p, self._world_q, self.bone_world, self.bone_skin)
            t1 = t2 = t3 = clock()
        else:
            self._stages_before_physics(frame, ik_off)
            t1, t2, t3 = self._t
        if self.physics is not None and self.physics_mode != "off":
            delta = 0.0 if self.frame is None else frame - self.frame
            seek = self.frame is None or not (0.0 <= delta <= 2.0)
            if delta == 0.0 and self.physics_mode == "always":
                delta = 1.0  # paused: time goes on for the simulation
            if self._has_physics_keys:
                sample_bone_physics(frame, b.bone_key_start, b.bone_key_frame, b.bone_key_physics,
                                    self.bone_physics)
                self.physics.set_bone_physics(self.bone_physics)
                if not np.array_equal(self._driven, self.physics.driven_bone_mask):
                    self._set_driven(self.physics.driven_bone_mask)
            if seek:
                self.physics.reset(self.bone_world)
            else:
                self.physics.step(delta / self.fps, self.bone_world)
            K.read_driven(self._driven, self.bone_world, self._world_p, self._world_q)
            K.refresh_worlds(self._refresh, r.parent, r.position, self._local_t, self._local_q,
                             self._world_p, self._world_q)
        t4 = clock()
        if len(r.pass2) or self.physics is not None:
            self._solve(r.pass2)
            K.write_matrices(r.position, self._world_p, self._world_q, self.bone_world, self.bone_skin)
        t5 = clock()
        if len(b.visible_key_frame):
            sample_steps(frame, b.visible_key_start, b.visible_key_frame, b.visible_key_value, self._visible)
        self.frame = frame
        if timed:
            s = self.stage_seconds
            s["sample"] = t1 - t0
            s["morph"] = t2 - t1
            s["bones_before_physics"] = t3 - t2
            s["physics"] = t4 - t3
            s["bones_after_physics"] = t5 - t4
        return self

    def skin(self, out_position: np.ndarray, out_normal: np.ndarray):
        """CPU-skin the current pose into caller-owned (V,3) float32 arrays."""
        if self._skinner is None:
            self._skinner = skinner_for(self.model)
        self._skinner.skin(self.bone_skin, self.vertex_offset, out_position, out_normal)


_skinner_cache: dict[int, tuple[object, object]] = {}


def skinner_for(model):
    """The CpuSkinner of a Model, built once and shared by all its characters."""
    hit = _skinner_cache.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    from mmdkit.skinning.cpu import CpuSkinner

    sk = CpuSkinner(model)
    _skinner_cache[id(model)] = (model, sk)
    return sk


def pose(model, motion, frames, *, physics=None, vertices: bool = False, progress: bool = False) -> dict:
    """Pose ``frames`` (iterable of numbers) in order; returns arrays.

    Returns dict: frames (F,) float64, bone_world (F,B,4,4) float32, morph_weight (F,N) float32,
    and with ``vertices`` vertex_position (F,V,3) float32 (after morphs and skinning).
    """
    frames = np.asarray(list(frames), np.float64)
    if physics is None and not vertices:
        from mmdkit.pose.batch import pose_batch

        if isinstance(motion, Pose):
            motion = motion_from_pose(motion)
        world, morph = pose_batch(model, rig_for(model), bind_motion(model, motion), frames)
        return {"frames": frames, "bone_world": world, "morph_weight": morph}
    ch = Character(model, motion, physics)
    F, B, N, V = len(frames), model.num_bones, model.num_morphs, model.num_vertices
    out = {"frames": frames, "bone_world": np.empty((F, B, 4, 4), np.float32),
           "morph_weight": np.empty((F, N), np.float32)}
    if vertices:
        out["vertex_position"] = np.empty((F, V, 3), np.float32)
        normals = np.empty((V, 3), np.float32)
    it = range(F)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="posing", unit="frame")
    for i in it:
        ch.update(frames[i])
        out["bone_world"][i] = ch.bone_world
        out["morph_weight"][i] = ch.morph_weight
        if vertices:
            ch.skin(out["vertex_position"][i], normals)
    return out
