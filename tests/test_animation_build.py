"""build_motion: Motion key arrays are validated like Model arrays (builder and VMD reader)."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.animation.binding import bind_motion
from mmdkit.animation.build import build_motion
from mmdkit.animation.builder import MotionBuilder
from mmdkit.animation.sampling import sample_bone_tracks
from mmdkit.errors import BuildError
from mmdkit.model.builder import ModelBuilder


def two_key_motion():
    mo = MotionBuilder("m")
    mo.add_bone_key("センター", 0)
    mo.add_bone_key("センター", 30, (0, 1, 0), (0, 0.6, 0, 0.8), physics=False)
    mo.add_morph_key("あ", 5, 1.0)
    mo.add_property_key(0, True, {"左足ＩＫ": False})
    return mo.build()


def leg():
    mb = ModelBuilder("leg")
    knee = mb.add_bone("左ひざ", (0, 5, 0))
    mb.add_bone("左足首", (0, 0, 0), knee)
    return mb.build()


def fields_of(motion) -> dict:
    return dict(motion.__dict__)


def test_builder_goes_through_build_motion():
    m = two_key_motion()
    assert m.bone_key_frame.dtype == np.uint32 and m.bone_key_frame.tolist() == [0, 30]
    assert m.bone_key_physics.tolist() == [True, False]  # derived from the interpolation blocks
    assert not m.bone_key_rotation.flags.writeable
    again = build_motion(fields_of(m))
    for k in ("bone_key_rotation", "bone_key_interpolation", "morph_key_weight", "property_ik_start"):
        assert np.array_equal(getattr(again, k), getattr(m, k)), k


def test_key_track_out_of_range_is_refused():
    f = fields_of(two_key_motion())
    f["bone_key_track"] = np.array([0, 3], np.int32)
    with pytest.raises(BuildError, match=r"bone_key_track.*row 1.*bone track 3 out of range \[0, 1\)"):
        build_motion(f)
    f = fields_of(two_key_motion())
    f["property_ik_start"] = np.array([0, 2], np.int32)
    with pytest.raises(BuildError, match="property_ik_start"):
        build_motion(f)


def test_wrong_shape_and_negative_frame_are_refused():
    f = fields_of(two_key_motion())
    f["bone_key_translation"] = np.zeros((2, 2), np.float32)
    with pytest.raises(BuildError, match=r"bone_key_translation.*shape \(2, 2\)"):
        build_motion(f)
    mo = MotionBuilder()
    mo.add_bone_key("a", -1)
    with pytest.raises(BuildError, match="bone_key_frame.*key 0"):
        mo.build()


def test_non_finite_key_names_track_and_frame():
    mo = MotionBuilder()
    mo.add_bone_key("センター", 0)
    mo.add_bone_key("センター", 30, (0, np.nan, 0))
    with pytest.raises(BuildError, match=r"bone_key_translation.*key 1 \(bone 'センター', frame 30\)"):
        mo.build()
    mo = MotionBuilder()
    mo.add_camera_key(7, np.inf, (0, 10, 0), (0, 0, 0))
    with pytest.raises(BuildError, match=r"camera_key_distance.*key 0 \(camera, frame 7\)"):
        mo.build()


def test_vmd_reader_refuses_a_nan_key_naming_the_file(tmp_path):
    mo = MotionBuilder("m")
    mo.add_bone_key("センター", 12, (1, 2, 3))
    p = tmp_path / "nan.vmd"
    mmdkit.save(mo.build(), p)
    data = bytearray(p.read_bytes())
    t0 = 30 + 20 + 4 + 15 + 4  # header, model name, key count, bone name, frame
    assert np.frombuffer(bytes(data[t0:t0 + 12]), "<f4").tolist() == [1, 2, 3]
    data[t0 + 4:t0 + 8] = np.array([np.nan], "<f4").tobytes()
    p.write_bytes(bytes(data))
    with pytest.raises(BuildError, match=r"nan\.vmd.*bone_key_translation.*'センター', frame 12"):
        mmdkit.load(p)


def test_zero_and_scaled_rotations_are_repaired_with_a_warning():
    mo = MotionBuilder()
    mo.add_bone_key("左足首", 0, rotation=(0, 0, 0, 0))
    mo.add_bone_key("左足首", 10, rotation=(0.2, 0, 0, 2))
    mo.add_bone_key("左足首", 20, rotation=(0, 0.70710677, 0, 0.70710677))
    m = mo.build()
    q = m.bone_key_rotation
    assert q[0].tolist() == [0, 0, 0, 1]
    assert np.isclose(np.linalg.norm(q[1]), 1, atol=1e-6) and np.isclose(q[1, 3] / q[1, 0], 10)
    assert q[2].tolist() == np.array([0, 0.70710677, 0, 0.70710677], np.float32).tolist()  # untouched
    assert any("zero rotation" in w and "'左足首', frame 0" in w for w in m.warnings)
    assert any("not of unit length" in w and "frame 10" in w for w in m.warnings)
    t, r = sample_bone_tracks(bind_motion(leg(), m), [0, 5, 15])
    assert np.isfinite(r).all() and np.allclose(np.linalg.norm(r, axis=2), 1)


def test_vmd_with_a_zero_rotation_reads_as_identity(tmp_path):
    p = tmp_path / "zero.vmd"
    mo = MotionBuilder()
    mo.add_bone_key("左足首", 3, rotation=(0.5, 0.5, 0.5, 0.5))
    mmdkit.save(mo.build(), p)
    data = bytearray(p.read_bytes())
    q0 = 30 + 20 + 4 + 15 + 4 + 12  # header, model name, key count, bone name, frame, translation
    data[q0:q0 + 16] = bytes(16)
    p.write_bytes(bytes(data))
    m = mmdkit.load(p)
    assert m.bone_key_rotation.tolist() == [[0, 0, 0, 1]] and any("zero rotation" in w for w in m.warnings)


def test_valid_motion_file_is_read_bit_for_bit(tmp_path):
    mo = MotionBuilder()
    rng = np.random.default_rng(1)
    q = rng.normal(size=(50, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    for i in range(50):
        mo.add_bone_key("b", i, rng.normal(size=3), q[i])
    p = tmp_path / "ok.vmd"
    m = mo.build()
    mmdkit.save(m, p)
    r = mmdkit.load(p)
    assert np.array_equal(r.bone_key_rotation, q.astype(np.float32)) and not r.warnings
