"""The immutable ``Motion`` (VMD content) and ``Pose`` (VPD content) as key arrays.

In: arrays validated by ``mmdkit.animation.build.build_motion`` (from the VMD reader or
``MotionBuilder``) or the VPD reader. Out: frozen dataclasses with read-only numpy arrays. Keys
are kept in file order (files are not sorted and may repeat a frame); binding builds sorted views.
Coordinates are MMD's (left-handed, MMD units); quaternions (x, y, z, w); angles radians;
frames are MMD frame numbers (30 per second).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmdkit.model.model import count_of, freeze  # noqa: F401  (freeze: re-exported for the readers)


@dataclass(frozen=True, eq=False)
class Motion:
    """Keyframe tracks of one VMD file.

    Track names are decoded strings; ``*_track_name_bytes`` keep the raw (cp932, possibly
    truncated at 15/15 bytes) names so binding can match by byte prefix.
    """

    model_name: str = ""
    model_name_bytes: bytes = b""

    # bone keys (Kb)
    bone_track_name: tuple[str, ...] = ()  # (Tb,) unique names in first-seen order
    bone_track_name_bytes: tuple[bytes, ...] = ()  # (Tb,) raw 15-byte fields, padding stripped
    bone_key_track: np.ndarray = None  # (Kb,) int32 index into bone_track_name
    bone_key_frame: np.ndarray = None  # (Kb,) uint32
    bone_key_translation: np.ndarray = None  # (Kb, 3) float32, offset from the rest position, parent space
    bone_key_rotation: np.ndarray = None  # (Kb, 4) float32 xyzw, rotation from rest, parent space
    bone_key_interpolation: np.ndarray = None  # (Kb, 64) uint8, raw block (see animation/curves.py)
    # (Kb,) bool, derived from row 0 bytes 2-3 of the block: False where the key turns the
    # bone's rigid body physics off (bytes == (99, 15)); the raw bytes stay in the block.
    bone_key_physics: np.ndarray = None

    # morph keys (Km)
    morph_track_name: tuple[str, ...] = ()  # (Tm,) unique names in first-seen order
    morph_track_name_bytes: tuple[bytes, ...] = ()  # (Tm,) raw 15-byte fields, padding stripped
    morph_key_track: np.ndarray = None  # (Km,) int32 index into morph_track_name
    morph_key_frame: np.ndarray = None  # (Km,) uint32
    morph_key_weight: np.ndarray = None  # (Km,) float32, usually 0..1

    # camera keys (Kc)
    camera_key_frame: np.ndarray = None  # (Kc,) uint32
    camera_key_distance: np.ndarray = None  # (Kc,) float32, MMD units from the target (negative = in front)
    camera_key_position: np.ndarray = None  # (Kc, 3) float32, the target point, world space
    camera_key_rotation: np.ndarray = None  # (Kc, 3) float32, Euler radians as stored (MMD's camera angles)
    camera_key_interpolation: np.ndarray = None  # (Kc, 24) uint8, 6 channels × (x1, x2, y1, y2)
    camera_key_fov: np.ndarray = None  # (Kc,) uint32, degrees
    camera_key_perspective: np.ndarray = None  # (Kc,) uint8, 0 = perspective on (as stored)

    # light keys (Kl)
    light_key_frame: np.ndarray = None  # (Kl,) uint32
    light_key_color: np.ndarray = None  # (Kl, 3) float32, RGB 0..1
    light_key_direction: np.ndarray = None  # (Kl, 3) float32, world space, as stored (MMD's light vector)

    # self-shadow keys (Ks)
    shadow_key_frame: np.ndarray = None  # (Ks,) uint32
    shadow_key_mode: np.ndarray = None  # (Ks,) uint8, 0 off, 1 and 2 MMD's two modes
    shadow_key_distance: np.ndarray = None  # (Ks,) float32, MMD's shadow range value as stored

    # property keys (Kp): visibility and IK on/off
    property_key_frame: np.ndarray = None  # (Kp,) uint32
    property_key_visible: np.ndarray = None  # (Kp,) uint8, 1 shown, 0 hidden
    property_ik_name: tuple[str, ...] = ()  # (Ti,) unique IK bone names
    property_ik_name_bytes: tuple[bytes, ...] = ()  # raw 20-byte fields, padding stripped
    property_ik_start: np.ndarray = None  # (Kp+1,) int32, range into property_ik_* rows
    property_ik_track: np.ndarray = None  # (Ri,) int32 index into property_ik_name
    property_ik_enabled: np.ndarray = None  # (Ri,) uint8, 1 on, 0 off

    source_path: str = ""
    # format details for byte-exact write-back (header variant, trailing bytes, ...)
    source_extras: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    num_bone_keys = count_of("bone_key_frame")
    num_morph_keys = count_of("morph_key_frame")
    num_camera_keys = count_of("camera_key_frame")
    num_light_keys = count_of("light_key_frame")
    num_shadow_keys = count_of("shadow_key_frame")
    num_property_keys = count_of("property_key_frame")

    @property
    def has_camera(self) -> bool:
        """True when the motion holds camera keys (a dance motion usually has none)."""
        return self.num_camera_keys > 0

    @property
    def last_frame(self) -> int:
        """Largest key frame over all tracks (0 for an empty motion)."""
        frames = [a for a in (self.bone_key_frame, self.morph_key_frame, self.camera_key_frame,
                              self.light_key_frame, self.shadow_key_frame,
                              self.property_key_frame) if a is not None and len(a)]
        return int(max(int(a.max()) for a in frames)) if frames else 0


@dataclass(frozen=True, eq=False)
class Pose:
    """A static pose (VPD): per-bone local translation and rotation, optional morphs."""

    model_name: str = ""
    bone_name: tuple[str, ...] = ()
    bone_translation: np.ndarray = None  # (P, 3) float32, offset from the rest position, parent space
    bone_rotation: np.ndarray = None  # (P, 4) float32 xyzw, rotation from rest, parent space
    morph_name: tuple[str, ...] = ()
    morph_weight: np.ndarray = None  # (Q,) float32, usually 0..1
    source_path: str = ""
    source_extras: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    num_bones = count_of("bone_name")
