"""build_motion: Motion key arrays are validated like Model arrays (builder and VMD reader)."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.animation.build import build_motion
from mmdkit.animation.builder import MotionBuilder
from mmdkit.errors import BuildError


def two_key_motion():
    mo = MotionBuilder("m")
    mo.add_bone_key("センター", 0)
    mo.add_bone_key("センター", 30, (0, 1, 0), (0, 0.6, 0, 0.8), physics=False)
    mo.add_morph_key("あ", 5, 1.0)
    mo.add_property_key(0, True, {"左足ＩＫ": False})
    return mo.build()


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
