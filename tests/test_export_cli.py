"""`mmdkit export` as users run it: each format by extension, --frames/--fps, one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit


@pytest.fixture
def miku_dance(assets):
    return assets / "low_miku" / "miku.pmd", assets / "wavefile" / "wavefile_v2.vmd"


def test_npz_bvh_vmd(mmdkit_cli, miku_dance, tmp_path):
    model, motion = miku_dance
    code, out, err = mmdkit_cli("export", model, motion, "-o", tmp_path / "d.npz", "--frames", "0:30",
                                "--fps", "15", "--no-physics", "--joints", "humanoid", "-q")
    assert code == 0, err
    d = np.load(tmp_path / "d.npz")
    np.testing.assert_array_equal(d["frames"], np.arange(0.0, 31.0, 2.0))  # 30/fps frames apart
    code, out, err = mmdkit_cli("export", model, motion, "-o", tmp_path / "d.bvh", "--frames", "0:9", "--no-physics",
                                "--scale", "0.08")
    assert code == 0, err
    assert "wrote" in out and (tmp_path / "d.bvh").read_text(encoding="utf-8").startswith("HIERARCHY")
    code, out, err = mmdkit_cli("export", model, motion, "-o", tmp_path / "d.vmd", "--frames", "0:60",
                                "--no-physics", "--reduce", "0.01")
    assert code == 0, err
    baked = mmdkit.load(tmp_path / "d.vmd")
    assert 0 < baked.num_bone_keys < 61 * model_bones(model)


def test_vmd_reduce_physics(mmdkit_cli, miku_dance, tmp_path):
    """--reduce-physics with physics on: fewer keys than --reduce alone, the summary line as usual."""
    model, motion = miku_dance
    counts = []
    for extra in ([], ["--reduce-physics", "0.1"]):
        out_path = tmp_path / f"p{len(extra)}.vmd"
        code, out, err = mmdkit_cli("export", model, motion, "-o", out_path, "--frames", "100:160", "--physics",
                                    "--reduce", "0.001", *extra)
        assert code == 0 and "wrote" in out, err
        counts.append(mmdkit.load(out_path).num_bone_keys)
    assert counts[1] < counts[0], counts


def model_bones(path) -> int:
    return mmdkit.load(path).num_bones


def test_still_model_without_motion(mmdkit_cli, miku_dance, tmp_path):
    code, _, err = mmdkit_cli("export", miku_dance[0], "-o", tmp_path / "rest.npz", "--no-physics", "-q")
    assert code == 0, err
    d = np.load(tmp_path / "rest.npz")
    assert d["joint_position"].shape[0] == 1


@pytest.mark.parametrize("args,message", [
    (["-o", "{tmp}/x.fbx"], "-o: "),
    (["-o", "{tmp}/x.bvh", "--vertices"], "--vertices: does not apply to .bvh"),
    (["-o", "{tmp}/x.npz", "--fps", "0"], "fps"),
    (["-o", "{tmp}/x.vmd", "--frames", "0:4:0.5"], "frames"),
    (["-o", "{tmp}/x.vmd", "--reduce", "-1"], "reduce"),
    (["-o", "{tmp}/x.vmd", "--reduce", "0.01", "--reduce-physics", "-1"], "--reduce-physics: must be a finite number"),
    (["-o", "{tmp}/x.vmd", "--reduce", "0.01", "--reduce-physics", "abc"], "--reduce-physics: 'abc' is not a number"),
    (["-o", "{tmp}/x.vmd", "--reduce-physics", "0.1"], "--reduce-physics: needs reduce"),
    (["-o", "{tmp}/x.glb", "--reduce-physics", "0.1"], "--reduce-physics: does not apply to .glb"),
    (["-o", "{motion}"], "input"),
])
def test_errors_are_one_line(mmdkit_cli, miku_dance, tmp_path, args, message):
    model, motion = miku_dance
    args = [a.format(tmp=tmp_path, motion=motion) for a in args]
    code, _, err = mmdkit_cli("export", model, motion, "--no-physics", *args)
    errors = [line for line in err.splitlines() if line.startswith("mmdkit: error:")]
    assert code == 2 and len(errors) == 1 and message in errors[0], err
    assert not [p for p in tmp_path.iterdir()]
