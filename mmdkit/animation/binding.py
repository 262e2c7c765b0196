"""Bind a Motion's tracks to a Model's bones, morphs and IK solvers by name.

In: ``Model``, ``Motion``. Out: ``BoundMotion`` — per model bone/morph/IK solver a contiguous
range of keys sorted by frame (CSR arrays, float64 frames), ready for the sampling kernels,
plus the names of tracks that matched nothing (``BoundMotion.report()`` → ``BindingReport``).
Names match exactly, else when a track's raw cp932 bytes (VMD truncates at 15 bytes) are a
prefix of the model name's cp932 encoding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmdkit.animation.curves import interpolation_curves
from mmdkit.animation.motion import Motion
from mmdkit.model.model import Model
from mmdkit.text import encode_cp932


def match_tracks(model_names, track_names, track_bytes, limit: int,
                 other_names=()) -> tuple[np.ndarray, list[str]]:
    """track -> model index (-1 unbound) and the list of unbound track names. A track binds to the
    model name it equals, else (a name cut to the file's ``limit`` bytes) to the one it begins,
    else to an entity whose ``other_names`` entry (e.g. the English name) it equals."""
    exact = {}
    for i, n in enumerate(model_names):
        exact.setdefault(n, i)
    other = {}
    for i, n in enumerate(other_names):
        if n and n not in exact:
            other.setdefault(n, i)
    encoded = [(encode_cp932(n), i) for i, n in enumerate(model_names)]
    out = np.full(len(track_names), -1, np.int32)
    unbound = []
    for t, name in enumerate(track_names):
        idx = exact.get(name, -1)
        if idx < 0:
            raw = track_bytes[t] if t < len(track_bytes) else encode_cp932(name)
            if len(raw) >= limit - 1:  # only truncated names may match by prefix
                for enc, i in encoded:
                    if len(enc) > len(raw) and enc.startswith(raw):
                        idx = i
                        break
        if idx < 0:
            idx = other.get(name, -1)
        out[t] = idx
        if idx < 0:
            unbound.append(name)
    return out, unbound


def _csr(owner: np.ndarray, frame: np.ndarray, count: int):
    """Sort keys by (owner, frame, file order) keeping the LAST key of duplicate frames.

    Returns (start (count+1,) int32, order (K',) int64 into the original key arrays).
    """
    keep = owner >= 0
    idx = np.nonzero(keep)[0]
    if len(idx) == 0:
        return np.zeros(count + 1, np.int32), idx
    o = owner[idx].astype(np.int64)
    f = frame[idx].astype(np.int64)
    order = np.lexsort((idx, f, o))  # by owner, then frame, then file order
    idx = idx[order]
    o = o[order]
    f = f[order]
    # drop all but the last of equal (owner, frame)
    last = np.ones(len(idx), bool)
    last[:-1] = (o[1:] != o[:-1]) | (f[1:] != f[:-1])
    idx = idx[last]
    o = o[last]
    start = np.zeros(count + 1, np.int32)
    np.add.at(start, o + 1, 1)
    return np.cumsum(start).astype(np.int32), idx


_SHOWN_NAMES = 8  # unbound names a report lists before "(+n more)"


@dataclass(frozen=True)
class BindingReport:
    """How a motion's bone and morph tracks bound to a model; ``str()`` is one line for the CLI:
    "bound 180/190 bone tracks, 40/45 morph tracks; unbound bones: a, b; unbound morphs: c"."""

    bone_tracks: int  # bone tracks in the motion
    morph_tracks: int  # morph tracks in the motion
    unbound_bones: tuple[str, ...] = ()  # bone track names the model does not have
    unbound_morphs: tuple[str, ...] = ()  # morph track names the model does not have

    @property
    def bound_bones(self) -> int:
        return self.bone_tracks - len(self.unbound_bones)

    @property
    def bound_morphs(self) -> int:
        return self.morph_tracks - len(self.unbound_morphs)

    @property
    def complete(self) -> bool:
        """True when every bone and morph track found its bone or morph."""
        return not (self.unbound_bones or self.unbound_morphs)

    def _counts(self) -> str:
        """'bound 28/222 bone tracks, 6/111 morph tracks'."""
        return (f"bound {self.bound_bones}/{self.bone_tracks} bone tracks, "
                f"{self.bound_morphs}/{self.morph_tracks} morph tracks")

    def __str__(self) -> str:
        text = self._counts()
        for what, names in (("bones", self.unbound_bones), ("morphs", self.unbound_morphs)):
            if names:
                more = len(names) - _SHOWN_NAMES
                text += f"; unbound {what}: " + ", ".join(names[:_SHOWN_NAMES])
                text += f" (+{more} more)" if more > 0 else ""
        return text

    def short(self) -> str:
        """How many tracks did not bind, in a few words: '194 motion bones and 105 motion morphs not
        in the model'."""
        parts = [f"{len(names)} motion {what if len(names) != 1 else what[:-1]}"
                 for what, names in (("bones", self.unbound_bones), ("morphs", self.unbound_morphs)) if names]
        return " and ".join(parts) + " not in the model"

    def full(self) -> str:
        """The counts and every unbound name: 'bound 28/222 bone tracks, 6/111 morph tracks; not in
        the model: bones a, b, …; morphs c, …'."""
        lists = [f"{what} " + ", ".join(names)
                 for what, names in (("bones", self.unbound_bones), ("morphs", self.unbound_morphs)) if names]
        return self._counts() + ("; not in the model: " + "; ".join(lists) if lists else "")


@dataclass(frozen=True, eq=False)
class BoundMotion:
    """A Motion's keys regrouped per model entity: the keys of entity e are rows
    [start[e], start[e+1]) of the key arrays, sorted by frame (the last key of a repeated frame
    kept). Frames are float64 MMD frame numbers; values float64 as the sampling kernels read them.
    """

    bone_key_start: np.ndarray  # (B+1,) int32, per model bone
    bone_key_frame: np.ndarray  # (K,) float64
    bone_key_translation: np.ndarray  # (K, 3) float64, offset from rest, parent space
    bone_key_rotation: np.ndarray  # (K, 4) float64 xyzw, rotation from rest, parent space
    bone_key_curve: np.ndarray  # (K, 4, 4) float64, channel (X, Y, Z, rotation) × (x1, y1, x2, y2) in 0..1
    bone_key_physics: np.ndarray  # (K,) bool, False: the key turns the bone's rigid bodies off
    morph_key_start: np.ndarray  # (N+1,) int32, per model morph
    morph_key_frame: np.ndarray  # (Km,) float64
    morph_key_weight: np.ndarray  # (Km,) float64
    ik_key_start: np.ndarray  # (Kik+1,) int32, per IK solver of the model
    ik_key_frame: np.ndarray  # (Ki,) float64
    ik_key_enabled: np.ndarray  # (Ki,) uint8, 1 on, 0 off
    # the model's show/hide property keys (one track)
    visible_key_start: np.ndarray = field(default_factory=lambda: np.zeros(2, np.int32))  # (2,) int32
    visible_key_frame: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (Kv,) float64
    visible_key_value: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))  # (Kv,) uint8
    last_frame: int = 0  # the motion's largest key frame
    unbound_bones: tuple[str, ...] = ()  # bone track names the model does not have
    unbound_morphs: tuple[str, ...] = ()  # morph track names the model does not have
    num_bone_tracks: int = 0  # bone tracks in the motion, bound or not
    num_morph_tracks: int = 0  # morph tracks in the motion, bound or not

    def report(self) -> BindingReport:
        """How many bone/morph tracks bound, and the names of those that did not."""
        return BindingReport(self.num_bone_tracks, self.num_morph_tracks, self.unbound_bones,
                             self.unbound_morphs)


def bind_motion(model: Model, motion: Motion | None) -> BoundMotion:
    """Regroup ``motion``'s keys per bone/morph/IK solver of ``model`` (None → empty)."""
    K = len(model.ik_bone if model.ik_bone is not None else ())
    if motion is None:
        motion = Motion()

    def arr(a, shape, dtype):
        return np.zeros(shape, dtype) if a is None else a

    def bind(model_names, track_names, track_bytes, key_track, key_frame, other_names=()):
        """Key rows per model entity (start, order) and the unbound track names."""
        key_track = arr(key_track, (0,), np.int32)
        key_frame = arr(key_frame, (0,), np.uint32)
        track_owner, unbound = match_tracks(model_names, track_names, track_bytes, 15, other_names)
        owner = track_owner[key_track] if len(key_track) else np.zeros(0, np.int32)
        return (*_csr(owner, key_frame, len(model_names)), key_frame, unbound)

    nb = motion.num_bone_keys
    b_start, b_idx, b_frame, unbound_b = bind(model.bone_name, motion.bone_track_name, motion.bone_track_name_bytes,
                                              motion.bone_key_track, motion.bone_key_frame)
    interp = arr(motion.bone_key_interpolation, (0, 64), np.uint8)
    phys = np.ones(nb, bool) if motion.bone_key_physics is None else np.asarray(motion.bone_key_physics, bool)
    # a morph track may also name a morph by its English name (a VRM Animation's 'aa' drives あ)
    m_start, m_idx, m_frame, unbound_m = bind(model.morph_name, motion.morph_track_name,
                                              motion.morph_track_name_bytes, motion.morph_key_track,
                                              motion.morph_key_frame, model.morph_name_en)

    # IK switches: one row per (property key, IK name) bound to the model's IK solvers.
    ik_owner = np.zeros(0, np.int32)
    ik_frame = np.zeros(0, np.uint32)
    ik_en = np.zeros(0, np.uint8)
    if motion.num_property_keys and motion.property_ik_track is not None and len(motion.property_ik_track):
        ik_names = [model.bone_name[b] for b in model.ik_bone]
        name_to_solver, _ = match_tracks(ik_names, motion.property_ik_name,
                                          motion.property_ik_name_bytes, 20)
        counts = np.diff(motion.property_ik_start)
        row_key = np.repeat(np.arange(motion.num_property_keys), counts)
        ik_owner = name_to_solver[motion.property_ik_track]
        ik_frame = motion.property_key_frame[row_key]
        ik_en = motion.property_ik_enabled
    ik_start, ik_idx = _csr(ik_owner, ik_frame, K)
    Kp = motion.num_property_keys
    p_frame = arr(motion.property_key_frame, (0,), np.uint32)
    vis_start, vis_idx = _csr(np.zeros(Kp, np.int32), p_frame, 1)

    return BoundMotion(
        bone_key_start=b_start,
        bone_key_frame=b_frame[b_idx].astype(np.float64),
        bone_key_translation=arr(motion.bone_key_translation, (0, 3), np.float32)[b_idx].astype(np.float64),
        bone_key_rotation=arr(motion.bone_key_rotation, (0, 4), np.float32)[b_idx].astype(np.float64),
        bone_key_curve=np.ascontiguousarray(interpolation_curves(interp[b_idx])),
        bone_key_physics=phys[b_idx] if nb else np.zeros(0, bool),
        morph_key_start=m_start,
        morph_key_frame=m_frame[m_idx].astype(np.float64),
        morph_key_weight=arr(motion.morph_key_weight, (0,), np.float32)[m_idx].astype(np.float64),
        ik_key_start=ik_start,
        ik_key_frame=ik_frame[ik_idx].astype(np.float64),
        ik_key_enabled=np.asarray(ik_en)[ik_idx].astype(np.uint8),
        visible_key_start=vis_start,
        visible_key_frame=p_frame[vis_idx].astype(np.float64),
        visible_key_value=arr(motion.property_key_visible, (0,), np.uint8)[vis_idx].astype(np.uint8),
        last_frame=motion.last_frame,
        unbound_bones=tuple(unbound_b),
        unbound_morphs=tuple(unbound_m),
        num_bone_tracks=len(motion.bone_track_name),
        num_morph_tracks=len(motion.morph_track_name),
    )
