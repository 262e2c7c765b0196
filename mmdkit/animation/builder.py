"""Make motions in code: ``MotionBuilder`` → ``Motion``.

In: Python values (track names, frames, translations, quaternions (x, y, z, w), curves as
(x1, y1, x2, y2) in 0..127). Out: the same frozen ``Motion`` the VMD reader gives, validated by
``build_motion`` (tracks in first-seen order, keys in add order), ready for ``mmdkit.save``.
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.build import build_motion
from mmdkit.animation.curves import PHYSICS_OFF, camera_interpolation_block, interpolation_block
from mmdkit.animation.motion import Motion
from mmdkit.model.builder import float_vector
from mmdkit.text import encode_cp932


def _tracks(names) -> tuple[np.ndarray, tuple[str, ...], tuple[bytes, ...]]:
    """Per key its track index, the unique names in first-seen order and their cp932 bytes."""
    idx: dict = {}
    track = np.array([idx.setdefault(n, len(idx)) for n in names], np.int32)
    uniq = tuple(idx)
    return track, uniq, tuple(encode_cp932(n) for n in uniq)


def _column(rows, k, dtype, width=None):
    """Column ``k`` of the key tuples ``rows`` as an array (K,) or (K, width)."""
    a = np.array([r[k] for r in rows], dtype)
    return a if width is None else a.reshape(-1, width)


class MotionBuilder:
    """Collects keys; ``build()`` → ``Motion``."""

    def __init__(self, model_name: str = ""):
        self.model_name = model_name
        self._bone: list[tuple] = []
        self._morph: list[tuple] = []
        self._camera: list[tuple] = []
        self._light: list[tuple] = []
        self._shadow: list[tuple] = []
        self._prop: list[tuple] = []

    def add_bone_key(self, name, frame, translation=(0, 0, 0), rotation=(0, 0, 0, 1), interpolation=None,
                     *, physics=True):
        """``interpolation``: None (linear), raw (64,) uint8 block, or dict of curves (see
        ``interpolation_block``); ``physics=False`` turns the bone's body off from this key."""
        if interpolation is None or isinstance(interpolation, dict):
            ip = interpolation_block(interpolation, physics)
        else:
            ip = np.asarray(interpolation, np.uint8).reshape(64).copy()
            if not physics:
                ip[2:4] = PHYSICS_OFF
        self._bone.append((name, int(frame), float_vector(translation, 3, "translation"),
                           float_vector(rotation, 4, "rotation"), ip))

    def add_morph_key(self, name, frame, weight):
        self._morph.append((name, int(frame), float(weight)))

    def add_camera_key(self, frame, distance, position, rotation, fov=30, perspective=True, interpolation=None):
        """``rotation``: Euler radians; ``interpolation``: None (linear), dict of curves or a raw
        (24,) uint8 block (see ``camera_interpolation_block``)."""
        if interpolation is None or isinstance(interpolation, dict):
            ip = camera_interpolation_block(interpolation)
        else:
            ip = np.asarray(interpolation, np.uint8).reshape(24)
        self._camera.append((int(frame), float(distance), float_vector(position, 3, "position"),
                             float_vector(rotation, 3, "rotation"), ip, int(fov), 0 if perspective else 1))

    def add_light_key(self, frame, color, direction):
        self._light.append((int(frame), float_vector(color, 3, "color"), float_vector(direction, 3, "direction")))

    def add_shadow_key(self, frame, mode=1, distance=0.0):
        self._shadow.append((int(frame), int(mode), float(distance)))

    def add_property_key(self, frame, visible=True, ik=None):
        """``ik``: dict IK bone name → enabled."""
        self._prop.append((int(frame), 1 if visible else 0, dict(ik or {})))

    def _bone_fields(self) -> dict:
        b = self._bone
        track, names, raw = _tracks([k[0] for k in b])
        return dict(bone_track_name=names, bone_track_name_bytes=raw, bone_key_track=track,
                    bone_key_frame=_column(b, 1, np.int64), bone_key_translation=_column(b, 2, np.float32, 3),
                    bone_key_rotation=_column(b, 3, np.float32, 4),
                    bone_key_interpolation=_column(b, 4, np.uint8, 64))

    def _property_fields(self) -> dict:
        p = self._prop
        ik_idx: dict = {}
        ptrack, pon, start = [], [], [0]
        for _, _, ik in p:
            for name, on in ik.items():
                ptrack.append(ik_idx.setdefault(name, len(ik_idx)))
                pon.append(1 if on else 0)
            start.append(len(ptrack))
        return dict(property_key_frame=_column(p, 0, np.int64), property_key_visible=_column(p, 1, np.uint8),
                    property_ik_name=tuple(ik_idx), property_ik_name_bytes=tuple(encode_cp932(n) for n in ik_idx),
                    property_ik_start=np.array(start, np.int32), property_ik_track=np.array(ptrack, np.int32),
                    property_ik_enabled=np.array(pon, np.uint8))

    def build(self) -> Motion:
        """Validate and return the frozen ``Motion`` (``BuildError`` names the bad field/key)."""
        m, c, lt, s = self._morph, self._camera, self._light, self._shadow
        track, names, raw = _tracks([k[0] for k in m])
        f = dict(model_name=self.model_name, model_name_bytes=encode_cp932(self.model_name),
                 **self._bone_fields(), **self._property_fields(),
                 morph_track_name=names, morph_track_name_bytes=raw, morph_key_track=track,
                 morph_key_frame=_column(m, 1, np.int64), morph_key_weight=_column(m, 2, np.float32),
                 camera_key_frame=_column(c, 0, np.int64), camera_key_distance=_column(c, 1, np.float32),
                 camera_key_position=_column(c, 2, np.float32, 3), camera_key_rotation=_column(c, 3, np.float32, 3),
                 camera_key_interpolation=_column(c, 4, np.uint8, 24), camera_key_fov=_column(c, 5, np.int64),
                 camera_key_perspective=_column(c, 6, np.uint8),
                 light_key_frame=_column(lt, 0, np.int64), light_key_color=_column(lt, 1, np.float32, 3),
                 light_key_direction=_column(lt, 2, np.float32, 3),
                 shadow_key_frame=_column(s, 0, np.int64), shadow_key_mode=_column(s, 1, np.uint8),
                 shadow_key_distance=_column(s, 2, np.float32), source_extras={"format": "built"})
        return build_motion(f)
