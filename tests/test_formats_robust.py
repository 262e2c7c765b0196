"""Readers facing hostile or unusual input (issue #12): each case warns or refuses in one line,
never hangs, never allocates from a lie, and reads every valid file."""

from __future__ import annotations

import os
import struct
import threading

import numpy as np
import pytest

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.errors import FormatError
from mmdkit.formats.pmx import read_pmx, write_pmx
from mmdkit.formats.vmd import write_vmd
from mmdkit.model.build import build_model
from mmdkit.model.builder import ModelBuilder


def _many_materials(n: int):
    mb = ModelBuilder(name="")
    mb.add_bone("", (0, 0, 0))
    for _ in range(n):
        mb.add_material("")
    return mb.build()


def test_pmx_with_many_small_materials_reads():
    # a material can be 84 + 2 × texture index size bytes; the bound once was 110
    m = _many_materials(50)
    data = write_pmx(m)
    back = build_model(read_pmx(data, "small.pmx"))
    assert back.num_materials == 50


def test_read_bytes_refuses_what_is_not_a_regular_file(tmp_path):
    (tmp_path / "zero.pmx").symlink_to("/dev/zero")
    (tmp_path / "folder.vmd").mkdir()
    for name in ("zero.pmx", "folder.vmd"):
        with pytest.raises(FormatError, match="not a regular file") as e:
            mmdkit.load(tmp_path / name)
        assert name in str(e.value)
    fifo = tmp_path / "pipe.vmd"
    os.mkfifo(fifo)
    result = []
    t = threading.Thread(target=lambda: result.append(pytest.raises(FormatError, mmdkit.load, fifo)), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "loading a FIFO hangs"
    assert "pipe.vmd" in str(result[0].value) and "not a regular file" in str(result[0].value)


VPD_HEAD = "Vocaloid Pose Data file\r\n\r\nmiku.osm;\r\n{count};\r\n\r\n"
VPD_BONE = "Bone0{センター\r\n  0,1,0;\r\n  0,0,0,1;\r\n}\r\n"


@pytest.mark.parametrize("count", ["①", "1" * 5000, "３"])
def test_vpd_odd_bone_count_is_a_format_error(count):
    from mmdkit.formats.vpd import read_vpd

    data = (VPD_HEAD.format(count=count) + VPD_BONE).encode("cp932")
    with pytest.raises(FormatError, match="bone count") as e:
        read_vpd(data, "odd.vpd")
    assert e.value.path == "odd.vpd" and e.value.section == "header"


def test_vpd_unterminated_blocks_fail_fast():
    import time

    from mmdkit.formats.vpd import read_vpd

    for body in ("Bone0{a\r\n 1,2,3;\r\n" * 24_000, "Bone0{" * 80_000):
        data = (VPD_HEAD.format(count=1) + body).encode("cp932")
        assert len(data) > 400_000
        t = time.thread_time()  # CPU seconds of this thread (~0.02): a loaded machine does not add to them
        with pytest.raises(FormatError, match="malformed block"):
            read_vpd(data, "open.vpd")
        assert time.thread_time() - t < 2.0  # no scan over the text per block (quadratic: minutes)


def test_pmx_soft_body_iterations_are_capped_with_a_warning():
    from mmdkit.formats.pmx import SoftBodyRecord
    from mmdkit.model.model import SOFT_BODY_MAX_ITERATIONS

    mb = ModelBuilder("soft")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("cloth")
    mb.add_mesh(mat, np.eye(3), np.eye(3), np.zeros((3, 2)), [[0, 1, 2]], [b] * 3)
    sb = SoftBodyRecord(name="skirt", material=mat, iteration=(2**31 - 1, 2, -5, 4))
    data = write_pmx(mb.build().replace(soft_bodies=(sb,)))
    m = build_model(read_pmx(data, "soft.pmx"))
    assert m.soft_bodies[0].iteration == (SOFT_BODY_MAX_ITERATIONS, 2, 0, 4)
    assert [w for w in m.warnings if "soft bodies" in w and "2 iteration counts" in w and "2147483647" in w]


def _bone_morph_camera_vmd():
    import struct

    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.formats.vmd import write_vmd

    mo = MotionBuilder(model_name="m")
    mo.add_bone_key("センター", 0, translation=(0, 1, 0))
    mo.add_morph_key("あ", 3, 0.5)
    mo.add_camera_key(0, -30.0, (0, 10, 0), (0, 0, 0))
    data = write_vmd(mo.build())
    tail = struct.pack("<3I", 0, 0, 0)  # light, self-shadow, property counts: all zero
    assert data.endswith(tail)
    return data[:-len(tail)]


def test_vmd_garbage_after_valid_sections_reads_what_reads():
    from mmdkit.formats.vmd import read_vmd, write_vmd

    head = _bone_morph_camera_vmd()
    data = head + (4_294_967_271).to_bytes(4, "little") + b"\x13\x37" * 50
    m = read_vmd(data, "wild.vmd")
    assert (m.num_bone_keys, m.num_morph_keys, m.num_camera_keys, m.num_light_keys) == (1, 1, 1, 0)
    w = [x for x in m.warnings if "light keys" in x]
    assert len(w) == 1 and f"byte {len(head)}" in w[0] and "dropped" in w[0]
    assert write_vmd(m) == data  # the dropped bytes go back as they were
    with pytest.raises(FormatError):
        read_vmd(data[:60], "cut.vmd")  # a broken bone key section is still refused


def test_vpd_non_finite_value_is_a_format_error():
    from mmdkit.formats.vpd import read_vpd

    for text in ("0,1e999,0;", "0,1e39,0;"):  # 1e39 overflows float32 ("nan" is not a number there)
        vpd = (VPD_HEAD.format(count=1) + VPD_BONE.replace("0,1,0;", text)).encode("cp932")
        with pytest.raises(FormatError, match="not finite") as e:
            read_vpd(vpd, "inf.vpd")
        assert e.value.section == "bones" and e.value.offset == len(VPD_HEAD.format(count=1))


# --- huge finite values (issue #23): refused like NaN, one line naming the file and section ----------

MARK = struct.pack("<3f", 1.25, 2.5, 3.75)  # a position no other float of the file holds
FLT_MAX = struct.pack("<3f", 0.0, 0.0, -3.4028234663852886e38)


def _physics_model():
    mb = ModelBuilder("bodies")
    mb.add_bone("root", (0, 0, 0))
    mb.add_bone("hair", (0, 0, 0), parent=0)  # PMD stores body positions relative to the bone
    mb.add_rigid_body("hair", 1, "sphere", (1.0, 0, 0), (1.25, 2.5, 3.75), mode=1)
    return mb.build()


@pytest.mark.parametrize("suffix", [".pmd", ".pmx"])
def test_model_with_a_rigid_body_at_flt_max_is_refused(tmp_path, mmdkit_cli, suffix):
    from mmdkit.formats.pmd import write_pmd

    data = (write_pmd if suffix == ".pmd" else write_pmx)(_physics_model())
    assert data.count(MARK) == 1
    path = tmp_path / f"huge{suffix}"
    path.write_bytes(data.replace(MARK, FLT_MAX))
    with pytest.raises(FormatError) as e:
        mmdkit.load(path)
    assert e.value.section == "rigid_body_position" and "beyond ±1e+06 MMD units" in str(e.value)
    assert "rigid body 'hair'" in str(e.value)
    motion = tmp_path / "m.vmd"
    motion.write_bytes(write_vmd(MotionBuilder().build()))
    code, out, err = mmdkit_cli("pose", path, motion, "--physics", "--frames", "0:3", "-o", tmp_path / "o.npz")
    assert code == 2 and not (tmp_path / "o.npz").exists()
    assert err.count("\n") == 1 and str(path) in err and "rigid_body_position" in err


def test_model_values_just_inside_the_bounds_are_read():
    mb = ModelBuilder("edge")
    mb.add_bone("root", (0, 9.9e5, 0))
    mb.add_rigid_body("b", 0, "box", (9.9e5, 1, 1), (0, -9.9e5, 0), mass=9e8)
    assert build_model(mb.fields()).num_rigid_bodies == 1
    f = mb.fields()
    f["joint_spring_translation"] = np.full((0, 3), 2e9, np.float32)  # empty: nothing to refuse
    build_model(f)
    f = mb.fields()
    f["rigid_body_mass"] = np.array([2e9], np.float32)
    with pytest.raises(FormatError, match=r"rigid_body_mass.*row 0: value 2000000000.0 is beyond ±1e\+09"):
        build_model(f)


def test_vmd_center_translation_at_flt_max_is_refused(tmp_path, mmdkit_cli):
    mb = MotionBuilder()
    mb.add_bone_key("センター", 0, translation=(1.25, 2.5, 3.75))
    mb.add_bone_key("センター", 10)
    data = write_vmd(mb.build())
    assert data.count(MARK) == 1
    path = tmp_path / "huge.vmd"
    path.write_bytes(data.replace(MARK, struct.pack("<3f", 3.4e38, 0, 0)))
    with pytest.raises(FormatError) as e:
        mmdkit.load(path)
    assert e.value.section == "bone_key_translation"
    assert "bone 'センター', frame 0" in str(e.value) and "beyond ±1e+06 MMD units" in str(e.value)
    model = tmp_path / "m.pmx"
    model.write_bytes(write_pmx(_physics_model()))
    code, out, err = mmdkit_cli("pose", model, path, "--frames", "0:2", "-o", tmp_path / "o.npz")
    assert code == 2 and err.count("\n") == 1 and str(path) in err and "bone_key_translation" in err
    with pytest.raises(FormatError, match="morph_key_weight"):
        bad = MotionBuilder()
        bad.add_morph_key("あ", 0, 5e6)
        bad.build()


def test_vpd_huge_translation_is_a_format_error():
    from mmdkit.formats.vpd import read_vpd

    vpd = (VPD_HEAD.format(count=1) + VPD_BONE.replace("0,1,0;", "0,2e38,0;")).encode("cp932")
    with pytest.raises(FormatError, match=r"Bone0 'センター'.*beyond ±1e\+06 MMD units") as e:
        read_vpd(vpd, "big.vpd")
    assert e.value.section == "bones"
    ok = (VPD_HEAD.format(count=1) + VPD_BONE.replace("0,1,0;", "0,9e5,0;")).encode("cp932")
    assert read_vpd(ok, "ok.vpd").bone_translation[0, 1] == pytest.approx(9e5)
