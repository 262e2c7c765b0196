"""The front door (issue #24): several outputs from one pass equal the single-output commands."""

from __future__ import annotations

import numpy as np
import pytest


def _same_npz(a, b) -> bool:
    with np.load(a) as x, np.load(b) as y:
        return sorted(x.files) == sorted(y.files) and all(np.array_equal(x[k], y[k]) for k in x.files)


@pytest.mark.parametrize("physics", ["--physics", "--no-physics"])
def test_one_pass_writes_what_each_command_writes(mmdkit_cli, assets, tmp_path, physics):
    """``render M V -o a.mp4 -o a.glb -o a.npz`` poses (and simulates) once and gives the same glb
    bytes, npz arrays and video bytes as three single-output commands."""
    gene, dance = assets / "gene" / "Gene_light.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    common = [gene, dance, "--frames", "400+8", physics, "-q"]
    one, three = tmp_path / "one", tmp_path / "three"
    one.mkdir(), three.mkdir()
    code, _, err = mmdkit_cli("render", *common, "--size", "96x72", "--joints", "humanoid", "--vertices",
                              "-o", one / "a.mp4", "-o", one / "a.glb", "-o", one / "a.npz")
    assert code == 0, err
    assert mmdkit_cli("render", *common, "--size", "96x72", "-o", three / "a.mp4")[0] == 0
    assert mmdkit_cli("export", *common, "-o", three / "a.glb")[0] == 0
    assert mmdkit_cli("export", *common, "--joints", "humanoid", "--vertices", "-o", three / "a.npz")[0] == 0
    assert (one / "a.glb").read_bytes() == (three / "a.glb").read_bytes()
    assert (one / "a.mp4").read_bytes() == (three / "a.mp4").read_bytes()
    assert _same_npz(one / "a.npz", three / "a.npz")
    with np.load(one / "a.npz") as d:
        assert d["vertex_position"].shape[0] == 8 and str(d["joint_set"]) == "humanoid"


def test_an_option_no_output_takes_is_refused_before_loading(mmdkit_cli, assets, tmp_path):
    gene, dance = assets / "gene" / "Gene_light.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = mmdkit_cli("render", gene, dance, "--joints", "humanoid", "-o", tmp_path / "a.mp4")
    assert code == 2 and err.startswith("mmdkit: error: --joints: does not apply") and err.count("\n") == 1, err
    code, _, err = mmdkit_cli("export", gene, dance, "-o", tmp_path / "a.fbx")
    assert code == 2 and "cannot write '.fbx'" in err, err
    assert not list(tmp_path.iterdir())


def test_python_run_takes_several_outputs(assets, tmp_path):
    import mmdkit

    take = mmdkit.Take(str(assets / "gene" / "Gene_light.pmx"), str(assets / "wavefile" / "wavefile_v2.vmd"),
                       frames="0+3", physics=False,
                       outputs=[mmdkit.Output(str(tmp_path / "a.bvh"), {"joints": "humanoid"}),
                                mmdkit.Output(str(tmp_path / "b.vmd"))])
    bvh, vmd = mmdkit.run(take, warn=lambda m: None)
    assert bvh["frames"] == 3 and vmd["frames"] == 3
    assert int(mmdkit.load(tmp_path / "b.vmd").bone_key_frame.max()) == 2
    assert "Frames: 3" in (tmp_path / "a.bvh").read_text()
