"""Scene animation clips → MMD ``Motion``s, baked per frame, on first use.

In: the scene, its ``Skeleton`` and ``Space`` (from ``import_scene``) and a clip name or index.
Out: a ``Motion`` with one linear key per frame f = 0 … ⌈30·duration⌉ (time min(f/30, duration)
s) for every bone that moves — with W_i(t) = rigid(J_i(t))·R_i⁻¹ (``mmdkit.importers.scene``) and
x its translation, rotation q = rot(W_P)⁻¹·rot(W_i) and translation t = rot(W_P)⁻¹·(x_i − x_P) −
(p_i − p_P) under parent bone P — and morph keys named by target (weight − the default weight
baked into the mesh). Scale that differs from the bind is dropped with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from mmdkit.animation.build import build_motion
from mmdkit.animation.curves import interpolation_block
from mmdkit.animation.frames import MOTION_FPS
from mmdkit.animation.motion import Motion
from mmdkit.errors import OptionError
from mmdkit.formats.gltf.animation import clip_node_local, clip_target_weights
from mmdkit.formats.gltf.scene import world_matrices
from mmdkit.importers.scene import Skeleton, Space, polar_rotations, quaternions_from_rotations
from mmdkit.text import encode_cp932

_SCALE_TOLERANCE = 1e-3  # relative scale change from the bind that is reported as dropped
_STILL = 1e-7  # |t| (MMD units) and |q − identity| under which a bone counts as not moving


def clip_times(duration: float) -> tuple[np.ndarray, np.ndarray]:
    """(F,) int64 frames 0 … ⌈30·duration⌉ and their (F,) float64 times min(f/30, duration)."""
    frames = np.arange(int(math.ceil(duration * MOTION_FPS - 1e-6)) + 1, dtype=np.int64)
    return frames, np.minimum(frames / MOTION_FPS, duration)


def _bone_keys(scene, sk: Skeleton, space: Space, anim, times) -> tuple[np.ndarray, np.ndarray, int]:
    """(T, B, 3) MMD translation and (T, B, 4) rotation keys at ``times``; and how many bones'
    scale left their bind scale (dropped)."""
    world = world_matrices(scene.node_parent, scene.node_order, clip_node_local(scene, anim, times))
    world = world[:, sk.bone_node]  # (T, B, 4, 4) scene space
    rot = polar_rotations(world[..., :3, :3]) @ np.swapaxes(sk.bone_rotation, -1, -2)  # W_i rotation
    x = world[..., :3, 3]
    scale = np.linalg.norm(world[..., :3, :3], axis=-2)
    bind_scale = np.linalg.norm(sk.bone_bind[:, :3, :3], axis=-2)
    scaled = int((np.abs(scale / bind_scale - 1) > _SCALE_TOLERANCE).any(axis=(0, 2)).sum())
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


def clip_motion(scene, sk: Skeleton, space: Space, clip, morph_names=(), name: str = "") -> Motion:
    """The ``Motion`` of scene clip ``clip`` (index or name) for the imported model (see module)."""
    anim = scene.animation(clip)
    frames, times = clip_times(anim.duration)
    t, q, scaled = _bone_keys(scene, sk, space, anim, times)
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

    def get_clip(self, which, option: str = "clip") -> tuple[str, Motion]:
        """(name, Motion) of a clip by name or index (see ``resolve``)."""
        name = self.resolve(which, option)
        return name, self[name]
