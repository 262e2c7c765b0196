"""load/save: dispatch by extension, atomic writes, every asset converts to itself."""

from __future__ import annotations

import os

import numpy as np
import pytest

import mmdkit
from mmdkit.cli.info import describe
from mmdkit.errors import FormatError
from mmdkit.formats.vpd import read_vpd, write_vpd

VPD = ("Vocaloid Pose Data file\r\n\r\nmiku.osm;\t\t// 親ファイル名\r\n2;\t\t\t\t// 総ポーズボーン数\r\n\r\n"
       "Bone0{センター\r\n  0.000000,1.500000,0.000000;\t\t\t\t// trans x,y,z\r\n"
       "  0.000000,0.000000,0.000000,1.000000;\t\t// Quaternion x,y,z,w\r\n}\r\n\r\n"
       "Bone1{左腕\r\n  0,0,0;\r\n  0.0,0.3826834,0.0,0.9238795;\r\n}\r\n\r\nMorph0{まばたき\r\n  1.0;\r\n}\r\n")


def test_vpd_read_write(tmp_path):
    p = tmp_path / "pose.vpd"
    p.write_bytes(VPD.encode("cp932"))
    pose = mmdkit.load(p)
    assert pose.model_name == "miku" and pose.bone_name == ("センター", "左腕") and pose.morph_name == ("まばたき",)
    assert np.allclose(pose.bone_translation[0], (0, 1.5, 0)) and np.allclose(pose.bone_rotation[1, 1], 0.3826834)
    assert write_vpd(pose) == VPD.encode("cp932")  # unchanged → same bytes
    changed = pose.__class__(**{**pose.__dict__, "bone_rotation": pose.bone_rotation * 1, "morph_weight":
                                np.array([0.25], np.float32)})
    again = read_vpd(write_vpd(changed))
    assert again.bone_name == pose.bone_name and np.isclose(again.morph_weight[0], 0.25)
    with pytest.raises(FormatError) as e:
        read_vpd(VPD.replace("1.500000,", "").encode("cp932"), "bad.vpd")
    assert e.value.section == "bones" and e.value.offset > 0


def test_save_is_atomic(tmp_path, assets):
    model = mmdkit.load(assets / "fixtures/babylon-mmd/bone_flag_test.pmx")
    dst = tmp_path / "out.pmx"
    dst.write_bytes(b"old")
    broken = model.replace(bone_ik=np.full(model.num_bones, -1, np.int32),
                           bone_flags=model.bone_flags | 0x20)  # IK flag without a solver: writer fails
    with pytest.raises(FormatError):
        mmdkit.save(broken, dst)
    assert dst.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.pmx"]
    with pytest.raises(FormatError):
        mmdkit.save(model, tmp_path / "x.vmd")  # a model is not a motion
    assert os.listdir(tmp_path) == ["out.pmx"]
    mmdkit.save(model, dst)
    assert dst.read_bytes() == (assets / "fixtures/babylon-mmd/bone_flag_test.pmx").read_bytes()


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(FormatError, match="unknown extension"):
        mmdkit.load(tmp_path / "a.unknownext")
    with pytest.raises(FormatError, match="cannot read"):
        mmdkit.load(tmp_path / "missing.pmx")


def test_every_asset_converts_to_itself(assets, tmp_path):
    files = [p for ext in ("pmx", "pmd", "vmd", "vpd") for p in sorted(assets.rglob(f"*.{ext}"))]
    assert len(files) > 140
    for i, p in enumerate(files):
        obj = mmdkit.load(p)
        out = tmp_path / f"{i}{p.suffix}"
        mmdkit.save(obj, out)
        a, b = describe(obj), describe(mmdkit.load(out))
        if "joint_orient_test.pmx" in p.name:  # repaired quirk re-reads cleanly
            a["warnings"] = []
        assert a == b, p
        if "joint_orient_test.pmx" not in p.name:
            assert out.read_bytes() == p.read_bytes(), p


def test_saving_a_bare_model_is_a_clear_error(tmp_path):
    with pytest.raises(mmdkit.BuildError, match="ModelBuilder"):
        mmdkit.save(mmdkit.Model(), tmp_path / "bare.pmx")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_save_errors_name_the_path_given_not_the_temp_file(tmp_path, assets):
    model = mmdkit.load(assets / "fixtures/babylon-mmd/bone_flag_test.pmx")
    (tmp_path / "taken.pmx").mkdir()
    for target in (tmp_path / "missing" / "x.pmx", tmp_path / "taken.pmx"):
        with pytest.raises(OSError) as e:
            mmdkit.save(model, target)
        assert e.value.filename == str(target) and e.value.filename2 is None, e.value
        assert ".tmp" not in str(e.value)
    assert os.listdir(tmp_path) == ["taken.pmx"] and not os.listdir(tmp_path / "taken.pmx")
