"""Baked VMD: a motion that replays a pipeline run (IK, append, morphs, physics) with IK and physics off.

In: a ``BakedMotion`` (whole motion frames), the source ``Motion`` (its morph keys and property
keys are copied), an optional reduction tolerance. Out: a .vmd (atomically) whose bone keys give
every bone the baked local transform: IK links keyed with their solved rotations and every IK
solver switched off by property keys; physics-driven bones keyed with the per-key physics-off
flag; append (付与) bones keyed with their own part only (playback re-applies the append, which
is computed here exactly as the pose kernels will); bone-morph parts taken out of the keys
(the morph keys are copied, so playback adds them back). Unreduced keys are linear; ``reduce`` TOL
drops keys that interpolation between the kept neighbours — a straight line, else a Bézier curve
per channel fitted to the frames between (``curvefit``) — reproduces so closely that, re-posed, no
bone moves more than TOL units: each bone gets a share of TOL (``error_budget``: TOL / the most moving bones on
a parent/append chain through it) and a dropped key may err by translation + angle × reach
(``bone_reach``) up to that share, so the errors a bone inherits add up to at most TOL (to first
order in the angle). ``reduce_physics`` TOL2 gives the bones physics drives and every bone below
them (parent or append links) the bound TOL2 instead, the other bones keeping TOL
(``error_budget``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import njit, prange

from mmdkit.animation.binding import match_tracks
from mmdkit.animation.build import build_motion
from mmdkit.animation.builder import MotionBuilder
from mmdkit.animation.curves import LINEAR_CURVE, interpolation_blocks
from mmdkit.animation.motion import Motion, Pose
from mmdkit.errors import OptionError, check_number
from mmdkit.export.curvefit import fit_span
from mmdkit.fileutil import atomic_path
from mmdkit.model import model as M
from mmdkit.mathutil import qmul_scalar
from mmdkit.pose.fk import update_local
from mmdkit.pose.morph import apply_bone_morphs
from mmdkit.pose.rig import build_rig
from mmdkit.formats.vmd import TRACK_NAME_SIZE
from mmdkit.text import decode_field, encode_cp932, encode_field, strip_field

OPTIONS = ("reduce", "reduce_physics")
MAX_SPAN = 600
"""Longest gap (frames) between two kept keys when reducing (bounds the fitting time)."""
STILL = (1e-5, 1e-6)
"""A bone whose keys never exceed these (translation units, rotation quaternion x/y/z) gets no
track: float32 noise of the bake, not motion."""
_MORPH_FIELDS = ("morph_track_name", "morph_track_name_bytes", "morph_key_track", "morph_key_frame",
                 "morph_key_weight")


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def own_part(order, flags, append_parent, append_ratio, fixed_axis, ik_identity, local_t, local_q, world_q, morph_t,
             morph_q, anim_t_inout, anim_q_inout, app_t_out, app_q_out, key_t_out, key_q_out):
    """Per frame, the VMD key that gives each bone its baked local transform with IK off.

    Model inputs: order (P,) int32 evaluation order; flags (B,) int32; append_parent (B,) int32;
    append_ratio (B,) float64; fixed_axis (B,3) float64; ik_identity (B,4) float64 identity rows.
    Baked (F frames, parent-local / model space, float64): local_t (F,B,3), local_q (F,B,4),
    world_q (F,B,4); bone-morph parts morph_t (F,B,3), morph_q (F,B,4). State (F,B,·) float64:
    anim_* (key + morphs, start at rest), app_* (the append playback computes: the pose kernels'
    own ``fk.update_local`` from the other bones' anim); out key_t (F,B,3) = anim_t − morph_t,
    key_q (F,B,4) = anim_q ⊗ morph_q⁻¹, from local = append ⊗ anim (IK off)."""
    for f in prange(local_t.shape[0]):
        anim_t, anim_q, app_t, app_q = anim_t_inout[f], anim_q_inout[f], app_t_out[f], app_q_out[f]
        key_t, key_q, wq = key_t_out[f], key_q_out[f], world_q[f]
        for i in range(order.shape[0]):
            b = order[i]
            # key_t/key_q take update_local's local transform of b as scratch (overwritten below)
            update_local(b, flags, append_parent, append_ratio, fixed_axis, anim_t, anim_q, ik_identity,
                         app_t, app_q, key_t, key_q, wq)
            q = qmul_scalar(-app_q[b, 0], -app_q[b, 1], -app_q[b, 2], app_q[b, 3],
                            local_q[f, b, 0], local_q[f, b, 1], local_q[f, b, 2], local_q[f, b, 3])
            k = qmul_scalar(q[0], q[1], q[2], q[3], -morph_q[f, b, 0], -morph_q[f, b, 1], -morph_q[f, b, 2],
                            morph_q[f, b, 3])
            if k[3] < 0.0:
                k = (-k[0], -k[1], -k[2], -k[3])
            for c in range(4):
                anim_q[b, c] = q[c]
                key_q[b, c] = k[c]
            for c in range(3):
                anim_t[b, c] = local_t[f, b, c] - app_t[b, c]
                key_t[b, c] = anim_t[b, c] - morph_t[f, b, c]


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def reduce_keys(frame, key_t, key_q, bone_tol, bone_reach, max_span, keep_out, curve_out):
    """Greedy key reduction with fitted curves: keep_out (F,B) bool marks the keys kept per bone
    (first and last always); curve_out (F,B,4,4) uint8, linear on entry, gets the interpolation
    curve of each kept key (``curvefit.fit_span``); frame (F,) float64; key_t
    (F,B,3), key_q (F,B,4) float64; bone_tol (B,) units (each bone's share, ``error_budget``),
    bone_reach (B,) units (``bone_reach``). From each kept key the next one is the farthest that
    still fits, found by doubling then bisecting the span (at most max_span frames)."""
    F, B = key_t.shape[0], key_t.shape[1]
    for b in prange(B):
        curve = np.empty((4, 4), np.uint8)
        for f in range(F):
            keep_out[f, b] = False
        keep_out[0, b] = True
        tol, reach = bone_tol[b], bone_reach[b]
        a = 0
        while a < F - 1:
            lo, hi, n = a + 1, -1, 2
            while True:
                e = min(a + n, F - 1, a + max_span)
                if e <= lo:
                    break
                if not fit_span(frame, key_t, key_q, b, a, e, tol, reach, curve):
                    hi = e
                    break
                lo = e
                n *= 2
            if hi > 0:
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if fit_span(frame, key_t, key_q, b, a, mid, tol, reach, curve):
                        lo = mid
                    else:
                        hi = mid
            fit_span(frame, key_t, key_q, b, a, lo, tol, reach, curve)  # the curves of the span kept
            keep_out[lo, b] = True
            curve_out[lo, b] = curve
            a = lo


def _drivers(model) -> list[list[int]]:
    """Per bone, the bones whose keys move it directly: its parent and its append parent."""
    parent, app = np.asarray(model.bone_parent), np.asarray(model.bone_append_parent)
    flags = np.asarray(model.bone_flags)
    appends = (flags & (M.BONE_APPEND_ROTATION | M.BONE_APPEND_TRANSLATION)) != 0
    return [[int(x) for x in (parent[b], app[b] if appends[b] else -1) if x >= 0] for b in range(len(parent))]


def _topological(drivers) -> list[int]:
    """Bones ordered so that every bone's drivers come before it."""
    order, state = [], [0] * len(drivers)
    for root in range(len(drivers)):
        stack = [(root, 0)]
        while stack:
            b, i = stack.pop()
            if state[b] == 2 or (i == 0 and state[b] == 1):
                continue
            state[b] = 1
            if i < len(drivers[b]):
                stack += [(b, i + 1), (drivers[b][i], 0)]
            else:
                state[b] = 2
                order.append(b)
    return order


def bone_reach(model) -> np.ndarray:
    """(B,) float64 units, at least 1: how far from its head a bone's rotation can carry anything
    in any pose — the longest rest path to a descendant (a posed chain is never longer), and
    |ratio| × the reach of each append child — so a rotation error of e radians moves every bone
    it drives by at most e × reach units."""
    pos = np.asarray(model.bone_position, np.float64)
    drivers = _drivers(model)
    ratio = np.abs(np.asarray(model.bone_append_ratio, np.float64))
    parent = np.asarray(model.bone_parent)
    path = np.zeros(len(drivers))
    for b in reversed(_topological(drivers)):  # every bone is final before its drivers read it
        for k, a in enumerate(drivers[b]):
            far = float(np.linalg.norm(pos[b] - pos[a])) + path[b] if k == 0 and a == parent[b] else ratio[b] * max(1.0, path[b])
            path[a] = max(path[a], far)
    return np.maximum(path, 1.0)


def _chain_counts(drivers, order, moving: np.ndarray) -> np.ndarray:
    """(B,) float64: the most ``moving`` bones on any chain of drivers through each bone."""
    above = np.zeros(len(drivers))
    below = np.zeros(len(drivers))
    for b in order:
        above[b] = moving[b] + max((above[a] for a in drivers[b]), default=0.0)
    for b in reversed(order):
        for a in drivers[b]:
            below[a] = max(below[a], below[b] + moving[b])
    return np.maximum(above + below, 1.0)


def physics_region(model, driven: np.ndarray) -> np.ndarray:
    """(B,) bool: the bones ``driven`` by physics and every bone below one (its parent or append
    parent in the region) — the bones ``reduce_physics`` bounds."""
    drivers = _drivers(model)
    region = np.asarray(driven, bool).copy()
    for b in _topological(drivers):
        region[b] |= any(region[a] for a in drivers[b])
    return region


def error_budget(model, moving: np.ndarray, tol: float, *, driven=None, physics_tol=None) -> np.ndarray:
    """(B,) float64 units: each bone's share of tol — tol / the most moving bones on any chain of
    drivers (parent or append parent) through it — so the errors a bone inherits from every bone
    that moves it add up to at most tol (to first order).

    With ``driven`` (B,) bool and ``physics_tol``: the bones of ``physics_region`` (R) are bounded
    by physics_tol, the others (K, closed upwards) by tol. With n / n_K / n_R the most moving
    bones / K bones / R bones on a chain through a bone: a K bone gets min(tol / n_K,
    physics_tol / n), an R bone max(physics_tol / n, (physics_tol − tol) / n_R). A chain ending
    at a K bone holds K bones only: ≤ tol. A chain ending at an R bone, k K bones then r R bones:
    its K part sums to ≤ tol and to ≤ k·physics_tol/(k+r), so with either R share the sum is ≤
    physics_tol. physics_tol == tol gives the plain split."""
    drivers = _drivers(model)
    order = _topological(drivers)
    moving = np.asarray(moving, bool)
    n = _chain_counts(drivers, order, moving)
    if driven is None or physics_tol is None or physics_tol == tol or not np.any(driven):
        return tol / n
    region = physics_region(model, driven)
    n_k = _chain_counts(drivers, order, moving & ~region)
    n_r = _chain_counts(drivers, order, moving & region)
    return np.where(region, np.maximum(physics_tol / n, (physics_tol - tol) / n_r),
                    np.minimum(tol / n_k, physics_tol / n))


def _morph_parts(rig, morph_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bone-morph translation (F,B,3) / rotation (F,B,4) float64 per frame from morph_weight (F,N)
    (effective weights), as ``pose.morph.apply_bone_morphs`` composes them."""
    F, B = morph_weight.shape[0], len(rig.bone_parent)
    t = np.zeros((F, B, 3))
    q = np.zeros((F, B, 4))
    q[..., 3] = 1.0
    w = morph_weight.astype(np.float64)
    if len(rig.bone_morph_bone):
        for f in np.nonzero((w != 0).any(axis=1))[0]:
            apply_bone_morphs(w[f], rig.bone_morph_start, rig.bone_morph_bone, rig.bone_morph_translation,
                              rig.bone_morph_rotation, t[f], q[f])
    return t, q


def bake_keys(baked) -> tuple[np.ndarray, np.ndarray]:
    """The VMD keys (F,B,3) translation / (F,B,4) rotation float64 that replay ``baked`` with IK and
    physics off (see the module docstring)."""
    rig = build_rig(baked.model)
    F, B = baked.bone_local_translation.shape[:2]
    morph_t, morph_q = _morph_parts(rig, baked.morph_weight)
    identity = np.zeros((B, 4))
    identity[:, 3] = 1.0
    anim_t, anim_q = np.zeros((F, B, 3)), np.broadcast_to(identity, (F, B, 4)).copy()
    app_t, app_q = np.empty((F, B, 3)), np.empty((F, B, 4))
    key_t, key_q = np.empty((F, B, 3)), np.empty((F, B, 4))
    order = np.concatenate([rig.bone_pass_before, rig.bone_pass_after]).astype(np.int32)
    own_part(order, rig.bone_flags, rig.bone_append_parent, rig.bone_append_ratio, rig.bone_fixed_axis, identity,
             baked.bone_local_translation, baked.bone_local_rotation, baked.bone_world_rotation, morph_t, morph_q,
             anim_t, anim_q, app_t, app_q, key_t, key_q)
    return key_t, key_q


def _bindable(model, bones: np.ndarray) -> np.ndarray:
    """(B,) bool: bones whose VMD track (name cut to 15 cp932 bytes, as the file stores it) binds
    back to the same bone — a longer name whose cut form names another bone cannot be keyed."""
    raw = [strip_field(encode_field(model.bone_name[b], TRACK_NAME_SIZE)) for b in bones]
    owner, _ = match_tracks(model.bone_name, [decode_field(r)[0] for r in raw], raw, TRACK_NAME_SIZE)
    ok = np.zeros(model.num_bones, bool)
    ok[bones[owner == bones]] = True
    return ok


def check(model, frames, *, reduce=None, reduce_physics=None) -> None:
    """OptionError for frames a VMD cannot key or a bad tolerance (before baking)."""
    _key_frames(frames)
    check_tolerance(reduce, reduce_physics)


def _key_frames(frames) -> np.ndarray:
    frames = np.asarray(frames, np.float64)
    f = np.round(frames)
    if np.abs(frames - f).max() > 1e-6 or (len(f) > 1 and (np.diff(f) <= 0).any()):
        raise OptionError("frames", "a VMD keys whole, increasing motion frames; use --fps 30 or a divisor of 30 "
                                    "and a whole start frame")
    return f.astype(np.int64)


def check_tolerance(reduce, reduce_physics=None) -> tuple[float | None, float | None]:
    """(TOL, TOL2): TOL2 defaults to TOL; OptionError naming the option for a value that is not a
    finite number >= 0, or for reduce_physics without reduce."""
    tol = None if reduce is None else check_number(reduce, "reduce", zero_ok=True)
    if reduce_physics is None:
        return tol, tol
    tol2 = check_number(reduce_physics, "reduce_physics", zero_ok=True)
    if tol is None:
        raise OptionError("reduce_physics", "needs reduce (--reduce TOL), the tolerance of the bones physics does "
                                            "not move")
    return tol, tol2


def _base_motion(model, motion, first_frame: int) -> dict:
    """Motion fields with the source's morph keys and its property keys, every IK solver off."""
    mb = MotionBuilder(model_name=getattr(motion, "model_name", "") or model.name)
    ik_off = {model.bone_name[b]: False for b in np.asarray(model.ik_bone)}
    frames, visible = [], []
    if isinstance(motion, Motion) and motion.num_property_keys:
        frames, visible = list(motion.property_key_frame), list(motion.property_key_visible)
    if not frames or min(frames) > first_frame:
        frames.insert(0, 0)
        visible.insert(0, 1)
    for f, v in zip(frames, visible):
        mb.add_property_key(int(f), visible=bool(v), ik=ik_off)
    fields = {f.name: getattr(mb.build(), f.name) for f in dataclasses.fields(Motion)}
    if isinstance(motion, Motion):
        fields.update({k: getattr(motion, k) for k in _MORPH_FIELDS})
    fields["warnings"] = ()
    return fields


def baked_motion(baked, motion=None, *, reduce=None, reduce_physics=None, warn=print) -> tuple[Motion, dict]:
    """The baked VMD as a ``Motion`` (and counts: keys, full, bones keyed) — see module docstring."""
    tol, tol2 = check_tolerance(reduce, reduce_physics)
    model = baked.model
    frames = _key_frames(baked.frames)
    if isinstance(motion, Pose):
        from mmdkit.animation.vpd import motion_from_pose

        motion = motion_from_pose(motion)
    key_t, key_q = bake_keys(baked)
    F, B = key_t.shape[:2]
    moving = (np.abs(key_t).max(axis=(0, 2)) > STILL[0]) | (np.abs(key_q[..., :3]).max(axis=(0, 2)) > STILL[1])
    bindable = _bindable(model, np.nonzero(moving)[0])
    lost = moving & ~bindable
    if lost.any():
        warn(f"{int(lost.sum())} bones cannot be keyed in a VMD (their names, cut to {TRACK_NAME_SIZE} bytes, "
             f"name another bone): {', '.join(model.bone_name[b] for b in np.nonzero(lost)[0][:8])}")
    moving &= bindable
    keep = np.ones((F, B), bool)
    curve = np.empty((F, B, 4, 4), np.uint8)
    curve[:] = LINEAR_CURVE
    if tol is not None and F > 2:
        share = error_budget(model, moving, tol, driven=baked.bone_driven, physics_tol=tol2)
        reduce_keys(baked.frames, key_t, key_q, share, bone_reach(model), MAX_SPAN, keep, curve)
    keep &= moving[None]
    bi, fi = np.nonzero(keep.T)  # grouped by bone, frames ascending
    names = tuple(model.bone_name[b] for b in np.nonzero(moving)[0])
    track_of = np.full(B, -1, np.int32)
    track_of[moving] = np.arange(len(names))
    fields = _base_motion(model, motion, int(frames[0]))
    fields.update(bone_track_name=names, bone_track_name_bytes=tuple(encode_cp932(n) for n in names),
                  bone_key_track=track_of[bi], bone_key_frame=frames[fi],
                  bone_key_translation=key_t[fi, bi].astype(np.float32),
                  bone_key_rotation=key_q[fi, bi].astype(np.float32),
                  bone_key_interpolation=interpolation_blocks(curve[fi, bi], ~baked.bone_driven[bi]),
                  bone_key_physics=None)
    counts = {"bone_keys": int(len(fi)), "full_keys": int(F * B), "bones_keyed": len(names),
              "bones_not_keyable": int(lost.sum())}
    return build_motion(fields), counts


def write(baked, path, *, motion=None, warn=print, reduce=None, reduce_physics=None) -> dict:
    """``baked`` → ``path`` (.vmd); returns a summary dict (keys written, one-per-bone-per-frame count)."""
    from mmdkit.formats.io import serialize

    out, counts = baked_motion(baked, motion, reduce=reduce, reduce_physics=reduce_physics, warn=warn)
    data = serialize(out, ".vmd", str(path))
    with atomic_path(path, ".vmd.part") as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return {"path": str(path), "format": "vmd", "frames": baked.num_frames, **counts, "physics": baked.physics}
