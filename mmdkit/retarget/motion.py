"""``retarget(source_model, source_motion, target_model)``: a source's dance as a Motion of the target.

In: the source ``Model`` and a ``Motion`` keyed on its bones (a VMD, or a glTF/VRM/BVH/FBX/VRMA clip
of the source's own file), the target ``Model``, motion frames (F,) (default: every frame of the
motion), optional ``HumanoidMap``s. Out: a ``Motion`` keyed on the target's bones (its own names,
MMD units, linear keys at each frame), so every sink (render, export, dataset labels) plays it as
any other motion. MMD space throughout; nothing is converted here.

Steps (docs/retarget.md, "Retargeting"):
1. the source posed as its own engine poses it (``pose.batch.pose_batch``: IK, append, morphs;
   no physics) → each humanoid bone's world rotation W_s and position (or the caller's
   ``source_pose``, posed so already);
2. per humanoid bone both have (``align.Alignment``): the source's world delta D_s — W_s, with its
   direction corrected to the source's actual bone → humanoid-child direction (bones only one
   skeleton has between them count for nothing) — gives the target's world rotation
   W_t = F⁻¹·D_s·A·F; a local rotation = W_t(parent) ⁻¹ · W_t (the nearest humanoid ancestor in the
   target's tree; bones between keep rest) — one numba pass over frames × humanoid bones each
   (``kernels.target_world``, ``kernels.target_local``);
3. root motion: the hips move by F⁻¹ times the source hips' offset from rest, scaled by the leg
   length ratio, keyed on センター (MMD targets) or the hips bone;
4. the contact pass (``contact``), when asked: planted source feet stay planted on the target,
   never below the floor, by two-bone IK on the target's legs;
5. the target in its own terms (``mmd``): twist to 腕捩/手捩, append sources, IK bones keyed at
   the solved ankle/toe positions (so the result plays with IK on).
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import OptionError
from mmdkit.pose.batch import pose_batch
from mmdkit.pose.rig import evaluation_order
from mmdkit.retarget import contact as C
from mmdkit.retarget.align import align
from mmdkit.retarget.fk import world_poses
from mmdkit.retarget.geometry import ancestors
from mmdkit.retarget.humanoid import humanoid_map
from mmdkit.retarget.keys import build_keys
from mmdkit.retarget.kernels import target_local, target_world
from mmdkit.retarget.mmd import ik_keys, split_twist, to_append_sources
from mmdkit.retarget.quat import qconj, qrot


def key_frames(motion, frames) -> np.ndarray:
    """(F,) int64 motion frames to key: ``frames`` (whole numbers, increasing) or every frame of ``motion``."""
    if frames is None:
        return np.arange(int(motion.last_frame) + 1, dtype=np.int64)
    f = np.asarray(frames, np.float64).reshape(-1)
    if len(f) == 0 or not np.all(np.isfinite(f)) or np.any(f < 0) or np.any(np.abs(f - np.rint(f)) > 1e-6) \
            or np.any(np.diff(f) <= 0):
        raise OptionError("frames", "a retarget keys whole motion frames >= 0 in increasing order")
    return np.rint(f).astype(np.int64)


def pose_source(model, motion, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(world_p (F,B,3), world_q (F,B,4)) float64 of ``model`` posed by ``motion`` (IK and append, no physics)."""
    F, B = len(frames), model.num_bones
    world_p, world_q = np.empty((F, B, 3)), np.empty((F, B, 4))
    pose_batch(model, motion, np.asarray(frames, np.float64), world_p_out=world_p, world_q_out=world_q)
    return world_p, world_q


def given_pose(source_pose, F: int, B: int) -> tuple[np.ndarray, np.ndarray]:
    """A caller's (world_p, world_q) as contiguous float64 (F,B,3)/(F,B,4); OptionError otherwise."""
    p, q = (np.ascontiguousarray(a, np.float64) for a in source_pose)
    if p.shape != (F, B, 3) or q.shape != (F, B, 4):
        raise OptionError("source_pose", f"shapes {p.shape} and {q.shape}, expected {(F, B, 3)} and {(F, B, 4)} "
                                         "(pose_source at the key frames)")
    return p, q


def source_deltas(al, source, src_p, src_q) -> np.ndarray:
    """(F,J,4) the source's world delta per shared humanoid bone, its direction set to the bone's
    actual direction to its humanoid child, turned into the target's world rotation
    F⁻¹·D_s·A·F (see module; ``kernels.target_world``)."""
    world = np.empty((src_q.shape[0], len(al.bones), 4))
    target_world(al.source_bone, al.source_child, np.ascontiguousarray(source.bone_position, np.float64),
                 al.align_q, al.facing_q, src_p, src_q, world)
    return world


def ancestor_rows(target, al) -> np.ndarray:
    """(J,) int64 the row of each shared humanoid bone's nearest shared ancestor in the target's tree (−1: none)."""
    parent = np.asarray(target.bone_parent)
    row = {int(b): j for j, b in enumerate(al.target_bone)}
    out = np.full(len(al.target_bone), -1, np.int64)
    for j, b in enumerate(al.target_bone):
        a = int(parent[b])
        while a >= 0 and a not in row:
            a = int(parent[a])
        out[j] = row[a] if a >= 0 else -1
    return out


def target_locals(target, al, world: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """(F,B,4) target local rotations from the world rotations ``world`` (F,J,4) of the shared
    humanoid bones: W(nearest shared ancestor)⁻¹·W; every other bone at rest (``kernels.target_local``)."""
    rows = ancestor_rows(target, al) if rows is None else rows
    local = np.empty((world.shape[0], target.num_bones, 4))
    target_local(al.target_bone, rows, np.ascontiguousarray(world, np.float64), local)
    return local


def read_order(target, tmap) -> np.ndarray:
    """(n,) int32 the target bones whose world positions the retarget reads (legs: the contact
    pass; IK solvers' target bones: ``mmd.ik_keys``) and their ancestors, parents first."""
    parent = np.asarray(target.bone_parent)
    want = {tmap[f"{s}{p}"] for s in ("left", "right") for p in ("UpperLeg", "LowerLeg", "Foot")}
    want.update(int(t) for t in np.asarray(target.ik_target) if 0 <= int(t) < len(parent))
    keep = np.zeros(len(parent), bool)
    for b in want:
        if b >= 0:
            keep[ancestors(parent, int(b))] = True
    order = evaluation_order(parent, np.zeros(len(parent), np.int64))
    return np.ascontiguousarray(order[keep[order]], np.int32)


def retarget(source_model, source_motion, target_model, *, frames=None, source_map=None, target_map=None,
             contact: bool = True, source_name: str = "", target_name: str = "", source_pose=None):
    """A ``Motion`` of ``target_model`` dancing ``source_motion`` of ``source_model`` (see module).
    ``source_map``/``target_map``: HumanoidMaps (default: found); ``contact``: run the contact pass;
    ``*_name``: how errors name the models; ``source_pose``: (world_p, world_q) of the source at
    the key frames when the caller has posed it already (``pose_source``). FormatError when a model
    lacks a needed humanoid bone."""
    sname = source_name or getattr(source_model, "source_path", "") or source_model.name or "source model"
    tname = target_name or getattr(target_model, "source_path", "") or target_model.name or "target model"
    smap = source_map or humanoid_map(source_model)
    tmap = target_map or humanoid_map(target_model)
    al = align(source_model, smap, target_model, tmap, sname, tname)
    keys = key_frames(source_motion, frames)
    src_p, src_q = pose_source(source_model, source_motion, keys) if source_pose is None else \
        given_pose(source_pose, len(keys), source_model.num_bones)
    world = source_deltas(al, source_model, src_p, src_q)
    rows = ancestor_rows(target_model, al)
    local_q = target_locals(target_model, al, world, rows)
    local_t = np.zeros(local_q.shape[:2] + (3,))
    rest_s = np.asarray(source_model.bone_position, np.float64)
    rest_t = np.asarray(target_model.bone_position, np.float64)
    hs, ht = smap["hips"], tmap["hips"]
    root = tmap.extra.get("center", ht)
    local_t[:, root] = qrot(qconj(al.facing_q), (src_p[:, hs] - rest_s[hs]) * al.leg_scale)
    order = read_order(target_model, tmap)
    world_p, _ = world_poses(target_model.bone_parent, order, rest_t, local_t, local_q)
    if contact:
        contact_pass(al, smap, tmap, rest_s, rest_t, src_p, keys, world, world_p, local_t[:, root])
        local_q = target_locals(target_model, al, world, rows)
        world_p, _ = world_poses(target_model.bone_parent, order, rest_t, local_t, local_q)
    keyed = {int(b) for b in al.target_bone}
    keyed.update(split_twist(target_model, tmap, local_q))
    to_append_sources(target_model, keyed, local_q)
    translated = {root} - keyed
    ik_done, ik_off = ik_keys(target_model, keyed, translated, local_t, world_p)
    bones = sorted(keyed | translated | set(ik_done))
    return build_keys(target_model, keys, bones, local_t, local_q, source_motion, ik_off)


def contact_pass(al, smap, tmap, rest_s, rest_t, src_p, keys, world, world_p, root_t) -> dict:
    """The contact pass (``contact``) on ``world`` (F,J,4) and the root's translation ``root_t``
    (F,3), in place; {side: (F,) bool source contacts}. A planted foot the leg cannot reach pulls
    the root towards it (``contact.reach_shift``)."""
    left = rest_t[tmap["leftUpperLeg"]] - rest_t[tmap["rightUpperLeg"]]
    left = left / max(np.linalg.norm(left), 1e-12)
    sides = {}
    for side in ("left", "right"):
        sf = smap[f"{side}Foot"]
        tu, tl, tf = (tmap[f"{side}{p}"] for p in ("UpperLeg", "LowerLeg", "Foot"))
        on = C.contacts(src_p[:, sf], rest_s[sf, 1], al.source_leg, keys)
        length = np.linalg.norm(rest_t[tl] - rest_t[tu]) + np.linalg.norm(rest_t[tf] - rest_t[tl])
        sides[side] = (on, C.foot_targets(world_p[:, tf], on, rest_t[tf, 1]), tu, tl, tf, length)
    shift = C.reach_shift([(world_p[:, s[2]], s[1], s[0], s[5]) for s in sides.values()])
    root_t += shift
    for side, (on, goal, tu, tl, tf, _) in sides.items():
        goal[~on] += shift[~on]
        goal[:, 1] = np.maximum(goal[:, 1], rest_t[tf, 1])
        ju, jl = al.index(f"{side}UpperLeg"), al.index(f"{side}LowerLeg")
        world[:, ju], world[:, jl] = C.two_bone(world_p[:, tu] + shift, world_p[:, tl] + shift,
                                                world_p[:, tf] + shift, goal, world[:, ju], world[:, jl], left)
    return {side: s[0] for side, s in sides.items()}
