"""VMD: counts, interpolation/physics bytes, byte-exact round trips, header and tail quirks."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import FormatError
from mmdkit.formats.vmd import read_vmd, write_vmd


def test_wavefile(assets):
    m = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    assert (m.num_bone_keys, m.num_morph_keys) == (14160, 1279)
    assert m.model_name == "初音ミク" and m.warnings == ()
    assert m.bone_key_interpolation.shape == (14160, 64) and m.bone_key_interpolation.dtype == np.uint8
    ik = [i for i, n in enumerate(m.bone_track_name) if "ＩＫ" in n]
    assert np.isin(m.bone_key_track, ik).sum() == 1215
    assert m.bone_key_physics.all()  # old file: curve copies in row 0 bytes 2-3, physics on
    assert m.last_frame == 2809
    # track names are unique and their raw bytes decode back to them
    assert len(set(m.bone_track_name)) == len(m.bone_track_name)
    assert all(b.decode("cp932") == s for b, s in zip(m.bone_track_name_bytes, m.bone_track_name))


def test_physics_toggle_flag(assets):
    m = mmdkit.load(assets / "fixtures/babylon-mmd/physics_toggle_test_v2_yyb10th.vmd")
    assert m.bone_key_physics.tolist() == [True, True, False]
    assert m.bone_key_interpolation[2, 2:4].tolist() == [99, 15]


def test_every_vmd_round_trips(assets):
    files = sorted(assets.rglob("*.vmd"))
    assert len(files) > 90
    for p in files:
        data = p.read_bytes()
        assert write_vmd(read_vmd(data, str(p))) == data, p


def test_header_without_version(assets):
    m = mmdkit.load(assets / "fixtures/yohawing-three-mmd-loader/test/fixtures/joint_orient_test.vmd")
    assert m.num_bone_keys == 12 and '" 0002"' in m.warnings[0]


def test_trailing_bytes_and_truncation(assets):
    data = (assets / "gene/motion/01_happy.vmd").read_bytes()
    m = read_vmd(data + b"\xff" * 7, "t.vmd")
    assert m.num_bone_keys == read_vmd(data).num_bone_keys
    assert any("7 bytes after" in w for w in m.warnings)
    assert write_vmd(m) == data + b"\xff" * 7
    with pytest.raises(FormatError) as e:
        read_vmd(data[:200], "cut.vmd")
    assert e.value.section == "bone keys" and "cut.vmd" in str(e.value)
    with pytest.raises(FormatError, match="not a VMD"):
        read_vmd(b"hello" * 10)


def test_truncated_track_names_are_kept_as_bytes():
    from mmdkit.animation.builder import MotionBuilder

    long = "左腕捩れ補助ボーン１"  # 20 cp932 bytes: cut to 15 in the file, mid-character
    mo = MotionBuilder("m")
    mo.add_bone_key(long, 0)
    m = read_vmd(write_vmd(mo.build()))
    assert m.bone_track_name_bytes[0] == long.encode("cp932")[:15]
    assert long.startswith(m.bone_track_name[0]) and m.warnings == ()


def test_old_vmd_header_uses_10_byte_name(assets):
    data = (assets / "gene/motion/01_happy.vmd").read_bytes()
    old = b"Vocaloid Motion Data file\0\0\0\0\0" + b"model\0\0\0\0\0" + data[50:]
    m = read_vmd(old, "old.vmd")
    new = read_vmd(data)
    assert m.source_extras["version"] == "0001" and m.model_name == "model" and m.warnings == ()
    assert np.array_equal(m.bone_key_rotation, new.bone_key_rotation)
    assert write_vmd(m) == old


def test_physics_flag_written_from_derived_array(assets):
    m = mmdkit.load(assets / "fixtures/babylon-mmd/physics_toggle_test_v2_yyb10th.vmd")
    flipped = m.__class__(**{**m.__dict__, "bone_key_physics": np.array([False, True, True])})
    r = read_vmd(write_vmd(flipped))
    assert r.bone_key_physics.tolist() == [False, True, True]
    assert r.bone_key_interpolation[0, 2:4].tolist() == [99, 15] and r.bone_key_interpolation[2, 2:4].tolist() == [0, 0]
