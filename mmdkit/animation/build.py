"""Key arrays → validated, frozen ``Motion`` (the motion twin of ``mmdkit.model.build``).

In: a dict keyed by ``Motion`` field names (from the VMD reader or ``MotionBuilder``); missing
arrays default to empty (``bone_key_physics`` is derived from the interpolation blocks). Out: a
``Motion`` whose arrays have the documented dtype/shape, are C-contiguous and read-only, whose
track indices and property-key ranges are checked and whose float values are finite and within
±1e6 (``MAX_COORDINATE``; ``BuildError`` naming the field, key, track and frame otherwise). Bone key
rotations of zero length become identity and those far from unit length are normalised, each
with a warning.
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.curves import bone_key_physics
from mmdkit.animation.motion import Motion, freeze
from mmdkit.errors import BuildError
from mmdkit.model.build import (MAX_COORDINATE, MAX_NUMBER, bound_detail, check_index, check_starts,
                                first_out_of_bounds)

# field -> (dtype, trailing shape, count field: the array whose length is the key count)
_SPEC: dict[str, tuple] = {
    "bone_key_track": (np.int32, (), "bone_key_frame"),
    "bone_key_frame": (np.uint32, (), "bone_key_frame"),
    "bone_key_translation": (np.float32, (3,), "bone_key_frame"),
    "bone_key_rotation": (np.float32, (4,), "bone_key_frame"),
    "bone_key_interpolation": (np.uint8, (64,), "bone_key_frame"),
    "bone_key_physics": (np.bool_, (), "bone_key_frame"),
    "morph_key_track": (np.int32, (), "morph_key_frame"),
    "morph_key_frame": (np.uint32, (), "morph_key_frame"),
    "morph_key_weight": (np.float32, (), "morph_key_frame"),
    "camera_key_frame": (np.uint32, (), "camera_key_frame"),
    "camera_key_distance": (np.float32, (), "camera_key_frame"),
    "camera_key_position": (np.float32, (3,), "camera_key_frame"),
    "camera_key_rotation": (np.float32, (3,), "camera_key_frame"),
    "camera_key_interpolation": (np.uint8, (24,), "camera_key_frame"),
    "camera_key_fov": (np.uint32, (), "camera_key_frame"),
    "camera_key_perspective": (np.uint8, (), "camera_key_frame"),
    "light_key_frame": (np.uint32, (), "light_key_frame"),
    "light_key_color": (np.float32, (3,), "light_key_frame"),
    "light_key_direction": (np.float32, (3,), "light_key_frame"),
    "shadow_key_frame": (np.uint32, (), "shadow_key_frame"),
    "shadow_key_mode": (np.uint8, (), "shadow_key_frame"),
    "shadow_key_distance": (np.float32, (), "shadow_key_frame"),
    "property_key_frame": (np.uint32, (), "property_key_frame"),
    "property_key_visible": (np.uint8, (), "property_key_frame"),
    "property_ik_track": (np.int32, (), "property_ik_track"),
    "property_ik_enabled": (np.uint8, (), "property_ik_track"),
}
# float fields that must be finite -> (key track field, track-name field), or (None, what the keys are)
_FINITE = {
    "bone_key_translation": ("bone_key_track", "bone_track_name"),
    "bone_key_rotation": ("bone_key_track", "bone_track_name"),
    "morph_key_weight": ("morph_key_track", "morph_track_name"),
    "camera_key_distance": (None, "camera"), "camera_key_position": (None, "camera"),
    "camera_key_rotation": (None, "camera"), "light_key_color": (None, "light"),
    "light_key_direction": (None, "light"), "shadow_key_distance": (None, "self-shadow"),
}
_NAMES = ("bone_track_name", "morph_track_name", "property_ik_name")
_UINT32_MAX = 2 ** 32 - 1
_ZERO_NORM = 1e-6  # a rotation shorter than this carries no direction: identity
_UNIT_TOLERANCE = 1e-3  # |norm − 1| above this is normalised (keys as MMD writes them are within 1e-6)


def _conform(f: dict, path: str) -> None:
    """Every ``_SPEC`` field converted to its dtype and (count,) + shape, or defaulted to empty."""
    counts = {key: 0 if f.get(key) is None else len(f[key]) for key in {c for _, _, c in _SPEC.values()}}
    for key, (dtype, shape, count_key) in _SPEC.items():
        n = counts[count_key]
        v = f.get(key)
        if v is None:
            if key == "bone_key_physics" and n:
                f[key] = bone_key_physics(f["bone_key_interpolation"])
            else:
                f[key] = np.zeros((n,) + shape, dtype)
            continue
        a = np.asarray(v)
        if dtype == np.uint32 and a.dtype != dtype and a.size and a.dtype.kind in "iu" and \
                (a.min() < 0 or a.max() > _UINT32_MAX):
            i = int(np.flatnonzero((a < 0) | (a > _UINT32_MAX))[0])
            raise BuildError(f"key {i}: {a[i]} is not in 0..{_UINT32_MAX}", path=path, section=key)
        try:
            a = np.ascontiguousarray(a, dtype=dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise BuildError(f"cannot convert to {np.dtype(dtype).name}: {e}", path=path, section=key) from None
        if a.shape != (n,) + shape:
            if a.size != n * int(np.prod(shape, dtype=np.int64)):
                raise BuildError(f"shape {a.shape}, expected {(n,) + shape}", path=path, section=key)
            a = a.reshape((n,) + shape)
        f[key] = a
    start = f.get("property_ik_start")
    n_keys = counts["property_key_frame"]
    start = np.zeros(n_keys + 1, np.int32) if start is None else np.ascontiguousarray(start, np.int32)
    check_starts(start, n_keys, counts["property_ik_track"], path=path, section="property_ik_start")
    f["property_ik_start"] = start


def _conform_names(f: dict, path: str) -> None:
    """Track names as tuples of str, raw names as tuples of bytes of the same length (or empty)."""
    for key in _NAMES:
        names = tuple(str(n) for n in (f.get(key) or ()))
        raw = tuple(bytes(b) for b in (f.get(key + "_bytes") or ()))
        if raw and len(raw) != len(names):
            raise BuildError(f"{len(raw)} raw names for {len(names)} names", path=path, section=key + "_bytes")
        f[key], f[key + "_bytes"] = names, raw


def _check_finite(f: dict, path: str) -> None:
    """``BuildError`` naming the first key (index, track, frame) holding NaN, infinity or a value
    beyond ±MAX_COORDINATE (1e6: translations, camera positions and distances, morph weights and
    every other float; rotations are normalised afterwards, so they are only bounded by MAX_NUMBER)."""
    for key, (track_key, track_names) in _FINITE.items():
        a = f[key]
        bound = MAX_NUMBER if key == "bone_key_rotation" else MAX_COORDINATE
        i = first_out_of_bounds(a, bound)
        if i is None:
            continue
        if track_key is None:
            owner = track_names
        else:
            owner = f"{track_names.split('_')[0]} {f[track_names][int(f[track_key][i])]!r}"
        frame = int(f[key.split("_key_")[0] + "_key_frame"][i])
        unit = " MMD units" if key in ("bone_key_translation", "camera_key_position", "camera_key_distance") else ""
        raise BuildError(f"key {i} ({owner}, frame {frame}): {bound_detail(a[i], bound, unit)}",
                         path=path, section=key)


def unit_quaternions(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(K, 4) xyzw rotations → (the same array, or a normalised copy of its dtype; zero (K,) bool;
    rescaled (K,) bool). Zero-length rotations become identity, those off unit length by more
    than 1e-3 are normalised, every other row is returned bit for bit."""
    norm = np.sqrt(np.square(q, dtype=np.float64).sum(axis=1))
    zero = norm < _ZERO_NORM
    off = ~zero & (np.abs(norm - 1.0) > _UNIT_TOLERANCE)
    if zero.any() or off.any():
        q = q.copy()
        q[off] = q[off] / norm[off, None]
        q[zero] = (0.0, 0.0, 0.0, 1.0)
    return q, zero, off


def _unit_rotations(f: dict, warnings: list) -> None:
    """Bone key rotations of unit length (see ``unit_quaternions``), with one warning per repair."""
    q, zero, off = unit_quaternions(f["bone_key_rotation"])
    f["bone_key_rotation"] = q
    for mask, what in ((zero, "a zero rotation, read as identity"), (off, "a rotation not of unit length, normalised")):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            name = f["bone_track_name"][int(f["bone_key_track"][i])]
            warnings.append(f"bone keys: {int(mask.sum())} key(s) with {what} (first: key {i}, bone {name!r}, "
                            f"frame {int(f['bone_key_frame'][i])})")


def build_motion(fields: dict) -> Motion:
    """Validate ``fields`` (Motion field name → value) and return a frozen ``Motion``."""
    f = dict(fields)
    path = str(f.get("source_path") or "")
    _conform(f, path)
    _conform_names(f, path)
    check_index(f["bone_key_track"], 0, len(f["bone_track_name"]), "bone track", path=path,
                section="bone_key_track")
    check_index(f["morph_key_track"], 0, len(f["morph_track_name"]), "morph track", path=path,
                section="morph_key_track")
    check_index(f["property_ik_track"], 0, len(f["property_ik_name"]), "IK track", path=path,
                section="property_ik_track")
    _check_finite(f, path)
    warnings = list(f.get("warnings") or ())
    _unit_rotations(f, warnings)
    known = set(Motion.__dataclass_fields__)
    unknown = set(f) - known
    if unknown:
        raise BuildError(f"unknown Motion fields {sorted(unknown)}", path=path, section="fields")
    f["model_name"] = str(f.get("model_name") or "")
    f["model_name_bytes"] = bytes(f.get("model_name_bytes") or b"")
    f["source_path"] = path
    f["source_extras"] = dict(f.get("source_extras") or {})
    f["warnings"] = tuple(warnings)
    return freeze(Motion(**f))
