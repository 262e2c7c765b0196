"""Scene animation clips → MMD ``Motion``s, baked per frame, on first use.

In: the scene, its ``Skeleton`` and ``Space`` (from ``import_scene``) and a clip name or index.
Out: a ``Motion`` with one linear key per frame f = 0 … ⌈30·duration⌉ (time min(f/30, duration)
s) — or only at the frames around those asked for (``Clips.get_clip(..., frames=)``) — for every
bone that moves — with W_i(t) = rigid(J_i(t))·R_i⁻¹ (``mmdkit.importers.skeleton``) and x its
translation, rotation q = rot(W_P)⁻¹·rot(W_i) and translation t = rot(W_P)⁻¹·(x_i − x_P) −
(p_i − p_P) under parent bone P — and morph keys named by target (weight − the default weight
baked into the mesh). Scale that differs from the bind is dropped with a warning.
Memory is bounded, not the clip's claimed length: frames are baked in chunks of at most
``CHUNK_BYTES`` of matrices, only over the nodes that lead to a bone, and a bake needing more than
``expand_budget`` bytes (256 MiB + 64 × the file's size) is refused naming the clip.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from mmdkit.animation.build import build_motion
from mmdkit.animation.curves import interpolation_block
from mmdkit.animation.frames import MOTION_FPS
from mmdkit.animation.motion import Motion
from mmdkit.errors import FormatError, OptionError
from mmdkit.formats.gltf.animation import clip_node_local, clip_target_weights
from mmdkit.formats.gltf.scene import MAX_VALUE, world_matrices
from mmdkit.importers.skeleton import Skeleton, expand_budget, polar_rotations
from mmdkit.model.space import Space, quaternions_from_rotations
from mmdkit.text import encode_cp932

_SCALE_TOLERANCE = 1e-3  # relative scale change from the bind that is reported as dropped
_STILL = 1e-7  # |t| (MMD units) and |q − identity| under which a bone counts as not moving
CHUNK_BYTES = 32 << 20
"""Matrices of one chunk of baked frames: frames × nodes leading to a bone × ~512 bytes."""
KEY_BYTES = 256
"""Bytes one baked key (a bone or morph at a frame) costs, while baking and in the Motion."""


def last_frame(duration: float) -> int:
    """⌈30·duration⌉: the clip's last frame (0 for a clip without keys or ending before 0 s)."""
    return max(0, int(math.ceil(duration * MOTION_FPS - 1e-6)))


def clip_times(duration: float, frames=None) -> tuple[np.ndarray, np.ndarray]:
    """(F,) int64 frames — 0 … ⌈30·duration⌉, or the whole frames on either side of each of
    ``frames`` (F',) within that range — and their (F,) float64 times min(f/30, duration)."""
    last = last_frame(duration)
    if frames is None:
        keys = np.arange(last + 1, dtype=np.int64)
    else:
        f = np.clip(np.asarray(frames, np.float64).ravel(), 0, last)
        keys = np.unique(np.concatenate([np.floor(f), np.ceil(f)])).astype(np.int64)
    return keys, np.minimum(keys / MOTION_FPS, max(duration, 0.0))


def _bone_chain(scene, sk: Skeleton) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nodes a bone's world depends on (bones and their ancestors), parents first: (M,) node
    indices, (M,) parents as positions in that list (-1 for roots), (B,) position of each bone."""
    need = np.zeros(scene.num_nodes, bool)
    for node in sk.bone_node.tolist():
        while node >= 0 and not need[node]:
            need[node] = True
            node = scene.node_parent[node]
    order = np.asarray(scene.node_order)
    nodes = order[need[order]]
    position = np.full(scene.num_nodes, -1, np.int64)
    position[nodes] = np.arange(len(nodes))
    parent = np.asarray(scene.node_parent)[nodes]
    return nodes, np.where(parent >= 0, position[np.maximum(parent, 0)], -1), position[sk.bone_node]


def _bone_keys(scene, sk: Skeleton, space: Space, anim, times, label: str = "") -> tuple[np.ndarray, np.ndarray, int]:
    """(T, B, 3) MMD translation and (T, B, 4) rotation keys at ``times``, baked in chunks of
    frames; and how many bones' scale left their bind scale (dropped)."""
    nodes, parent, bone_at = _bone_chain(scene, sk)
    step = max(1, CHUNK_BYTES // (512 * max(1, len(nodes))))
    t = np.empty((len(times), len(sk.bone_node), 3))
    q = np.empty((len(times), len(sk.bone_node), 4))
    scaled = np.zeros(len(sk.bone_node), bool)
    for a in range(0, len(times), step):
        local = clip_node_local(scene, anim, times[a:a + step], nodes)
        world = world_matrices(parent, np.arange(len(nodes)), local)[:, bone_at]  # (T, B, 4, 4) scene space
        if not (np.abs(world) <= MAX_VALUE).all():
            raise FormatError(f"clip {label or anim.name!r} moves a bone beyond ±{MAX_VALUE:g} (at {times[a]:.6g} s or "
                              "soon after)", path=scene.path, section="animations")
        t[a:a + step], q[a:a + step], moved = _chunk_keys(sk, space, world)
        scaled |= moved
    return t, q, int(scaled.sum())


def _chunk_keys(sk: Skeleton, space: Space, world: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bone worlds (T, B, 4, 4) → MMD translation (T, B, 3), rotation (T, B, 4) keys and (B,) bool:
    the bones whose scale left their bind scale."""
    rot = polar_rotations(world[..., :3, :3]) @ np.swapaxes(sk.bone_rotation, -1, -2)  # W_i rotation
    x = world[..., :3, 3]
    scale = np.linalg.norm(world[..., :3, :3], axis=-2)
    bind_scale = np.linalg.norm(sk.bone_bind[:, :3, :3], axis=-2)
    scaled = (np.abs(scale / np.where(bind_scale > 0, bind_scale, 1.0) - 1) > _SCALE_TOLERANCE).any(axis=(0, 2))
    par = sk.bone_parent
    root = par < 0
    prot = np.where(root[:, None, None], np.eye(3), rot[:, par])
    px = np.where(root[:, None], 0.0, x[:, par])
    pp = np.where(root[:, None], 0.0, sk.bone_position[par])
    prot_t = np.swapaxes(prot, -1, -2)
    local_rot = prot_t @ rot
    local_t = np.einsum("tbij,tbj->tbi", prot_t, x - px) - (sk.bone_position - pp)
    return space.points(local_t), space.quaternions(quaternions_from_rotations(local_rot)), scaled


def _morph_keys(scene, anim, times, morph_names) -> tuple[list[str], np.ndarray]:
    """Morph track names and (T, tracks) weights (minus the mesh's default weights)."""
    names, cols = [], []
    for node, w in clip_target_weights(scene, anim, times).items():
        mesh = scene.meshes[scene.node_mesh[node]]
        default = scene.node_target_weight[node]
        default = mesh.target_weight if default is None else default
        for k, tname in enumerate(mesh.target_name):
            if tname in morph_names and tname not in names:
                names.append(tname)
                cols.append(w[:, k] - float(default[k]))
    return names, np.stack(cols, 1) if cols else np.zeros((len(times), 0))


def _check_budget(scene, sk: Skeleton, anim, n_frames: int, name: str) -> None:
    """FormatError naming the clip when baking ``n_frames`` frames would take more than ``expand_budget``."""
    tracks = len(sk.bone_node) + sum(len(scene.meshes[scene.node_mesh[ch.node]].target_name)
                                     for ch in anim.channels if ch.path == "weights")
    need, budget = n_frames * max(1, tracks) * KEY_BYTES, expand_budget(scene)
    if need > budget:
        raise FormatError(f"clip {name or anim.name!r} lasts {anim.duration:.6g} s: baking {n_frames:,} frames × "
                          f"{tracks:,} bones and morphs would take ~{need / 2**20:,.0f} MiB, more than the "
                          f"{budget / 2**20:,.0f} MiB allowed for this file; pose fewer frames (mmdkit pose "
                          "--frames A:B bakes only those)", path=scene.path, section="animations")


def clip_motion(scene, sk: Skeleton, space: Space, clip, morph_names=(), name: str = "", frames=None) -> Motion:
    """The ``Motion`` of scene clip ``clip`` (index or name) for the imported model (see module):
    keys at every frame of the clip, or with ``frames`` (F,) only at the whole frames around them
    (posing those frames gives what the whole clip gives)."""
    anim = scene.animation(clip)
    if frames is None:  # checked before any array of the clip's length exists
        _check_budget(scene, sk, anim, last_frame(anim.duration) + 1, name)
        frames, times = clip_times(anim.duration)
    else:  # at most two frames per frame asked for
        frames, times = clip_times(anim.duration, frames)
        _check_budget(scene, sk, anim, len(frames), name)
    t, q, scaled = _bone_keys(scene, sk, space, anim, times, name)
    moving = ((np.abs(t) > _STILL).any(axis=(0, 2)) | (np.abs(q - [0, 0, 0, 1]) > _STILL).any(axis=(0, 2)))
    bones = np.flatnonzero(moving)
    track_names = [sk.bone_name[b] for b in bones]
    mnames, mw = _morph_keys(scene, anim, times, set(morph_names))
    nt, nb, nm = len(frames), len(bones), len(mnames)
    warnings = []
    if scaled:
        warnings.append(f"clip {name or clip!r}: {scaled} bones scale away from their bind scale; MMD bones have "
                        "no scale, so the scale keys are dropped")
    return build_motion(dict(
        model_name=name, model_name_bytes=encode_cp932(name),
        bone_track_name=tuple(track_names), bone_track_name_bytes=tuple(encode_cp932(n) for n in track_names),
        bone_key_track=np.tile(np.arange(nb, dtype=np.int32), nt), bone_key_frame=np.repeat(frames, nb),
        bone_key_translation=t[:, bones].reshape(-1, 3), bone_key_rotation=q[:, bones].reshape(-1, 4),
        bone_key_interpolation=np.broadcast_to(interpolation_block(None), (nt * nb, 64)),
        morph_track_name=tuple(mnames), morph_track_name_bytes=tuple(encode_cp932(n) for n in mnames),
        morph_key_track=np.tile(np.arange(nm, dtype=np.int32), nt), morph_key_frame=np.repeat(frames, nm),
        morph_key_weight=mw.reshape(-1), source_path=scene.path, warnings=warnings,
        source_extras={"format": "gltf", "clip": name}))


def clip_names(scene) -> tuple[str, ...]:
    """One unique name per scene clip: its own, else 'clip<k>' (unnamed or repeated)."""
    names: list[str] = []
    for k, a in enumerate(scene.animations):
        names.append(a.name if a.name and a.name not in names else f"clip{k}")
    return tuple(names)


class Clips(Mapping):
    """{clip name: Motion} of an imported scene, each baked on first access and kept.

    Unnamed clips are 'clip<k>'; ``get_clip(name | index | 'index')`` → (name, Motion) with an
    ``OptionError('clip', …)`` listing the clips when nothing matches.
    """

    def __init__(self, scene, skeleton: Skeleton, space: Space, morph_names=()):
        self._scene, self._skeleton, self._space = scene, skeleton, space
        self._morph_names = tuple(morph_names)
        self.names = clip_names(scene)
        self._cache: dict[str, Motion] = {}

    @classmethod
    def empty(cls) -> "Clips":
        """No clips (a model that carries none)."""
        clips = cls.__new__(cls)
        clips._scene, clips._skeleton, clips._space, clips._morph_names = None, None, None, ()
        clips.names, clips._cache = (), {}
        return clips

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __getitem__(self, name: str) -> Motion:
        if name not in self.names:
            raise KeyError(name)
        if name not in self._cache:
            self._cache[name] = clip_motion(self._scene, self._skeleton, self._space, self.names.index(name),
                                            self._morph_names, name)
        return self._cache[name]

    def last_frame(self, name: str) -> int:
        """⌈30·duration⌉ of clip ``name`` (its last frame), without baking it."""
        return last_frame(self._scene.animations[self.names.index(name)].duration)

    def resolve(self, which, option: str = "clip") -> str:
        """The clip name for a name, an index or an index typed as text (else an OptionError
        naming ``option``)."""
        if which in self.names:
            return which
        text = str(which).strip()
        if text.lstrip("-").isdigit() and -len(self.names) <= int(text) < len(self.names):
            return self.names[int(text)]
        known = ", ".join(repr(n) for n in self.names) or "none"
        where = (self._scene.path if self._scene is not None else "") or "the model"
        raise OptionError(option, f"{which!r} is not a clip of {where} (clips: {known})")

    def get_clip(self, which, option: str = "clip", frames=None) -> tuple[str, Motion]:
        """(name, Motion) of a clip by name or index (see ``resolve``); with ``frames`` (F,) the
        Motion holds keys only around those frames (a long clip costs what is posed, not its length)."""
        name = self.resolve(which, option)
        if frames is None or name in self._cache:
            return name, self[name]
        return name, clip_motion(self._scene, self._skeleton, self._space, self.names.index(name),
                                 self._morph_names, name, frames)
