"""npz dataset arrays: humanoid joints read the mapped bones (with fallbacks), local rotations
compose back to the world ones, vertices streamed into the zip equal the engine's skinning,
outputs never overwrite inputs."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.export import bake, export
from mmdkit.export.humanoid import HUMANOID, joint_set
from mmdkit.model.builder import ModelBuilder
from mmdkit.runtime import pose


def _qmul(a, b):
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], -1)


@pytest.fixture(scope="module")
def miku(assets):
    return mmdkit.load(assets / "low_miku" / "miku.pmd"), mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")


def test_humanoid_npz(miku, tmp_path):
    model, motion = miku
    frames = np.arange(100.0, 160.0, 2.0)
    info = export(model, motion, tmp_path / "m.npz", frames=frames, fps=15, physics=False, joints="humanoid",
                  scale=0.08)
    d = np.load(tmp_path / "m.npz")
    J = len(HUMANOID)
    assert info["joints"] == J and d["joint_position"].shape == (30, J, 3) and d["joint_rotation"].shape == (30, J, 4)
    assert list(d["joint_names"]) == [j for j, _, _ in HUMANOID] and float(d["fps"]) == 15
    world = pose(model, motion, frames)["bone_world"]
    bones = d["joint_bone"]
    assert np.abs(d["joint_position"] - world[:, bones][..., :3, 3] * 0.08).max() < 1e-5
    # miku has no 上半身2: upper_body2 falls back to 上半身
    names = list(d["joint_names"])
    k = names.index("upper_body2")
    assert d["joint_fallback"][k] and model.bone_name[bones[k]] == "上半身"
    # local rotations compose back into the world rotations along the joint tree
    parent = d["joint_parent"]
    for j in range(J):
        p = parent[j]
        rot = d["joint_rotation"]
        expect = rot[:, j] if p < 0 else _qmul(rot[:, p], d["joint_local_rotation"][:, j])
        dots = np.abs((expect * d["joint_rotation"][:, j]).sum(-1))
        assert (dots > 1 - 1e-5).all(), names[j]
    assert str(d["root_name"]) == "センター" and d["root_position"].shape == (30, 3)
    assert d["morph_weight"].shape == (30, model.num_morphs) and len(d["morph_names"]) == model.num_morphs


def test_vertices_streamed(miku, tmp_path):
    model, motion = miku
    frames = np.arange(0.0, 12.0)
    export(model, motion, tmp_path / "v.npz", frames=frames, physics=False, vertices=True)
    d = np.load(tmp_path / "v.npz")
    ref = pose(model, motion, frames, vertices=True)
    assert d["vertex_position"].shape == (12, model.num_vertices, 3)
    assert np.array_equal(d["vertex_position"], ref["vertex_position"])
    assert d["joint_position"].shape == (12, model.num_bones, 3) and str(d["joint_set"]) == "all"


def test_all_joints_match_bake(miku, tmp_path):
    model, motion = miku
    b = bake(model, motion, [5.0, 6.0], physics=False)
    export(model, motion, tmp_path / "a.npz", frames=[5.0, 6.0], physics=False)
    d = np.load(tmp_path / "a.npz")
    assert np.abs(d["joint_position"] - b.bone_world_position).max() < 1e-5
    assert np.array_equal(d["bone_parent"], model.bone_parent)


def test_humanoid_missing_arm_is_refused():
    mb = ModelBuilder(name="stick")
    c = mb.add_bone("センター", (0, 8, 0))
    mb.add_bone("上半身", (0, 10, 0), parent=c)
    model = mb.build()
    with pytest.raises(OptionError, match="left_arm"):
        joint_set(model, "humanoid")
    with pytest.raises(OptionError, match="joints"):
        joint_set(model, "quadruped")


def test_never_overwrites_an_input(miku, tmp_path):
    model, _ = miku
    src = tmp_path / "in.vmd"
    shutil.copy(miku[1].source_path, src)
    motion = mmdkit.load(src)
    before = src.read_bytes()
    with pytest.raises(OptionError, match="input"):
        export(model, motion, src, frames=[0.0], physics=False)
    assert src.read_bytes() == before
    with pytest.raises(OptionError, match="fps"):
        export(model, motion, tmp_path / "x.npz", fps=0)
    with pytest.raises(OptionError, match=".fbx"):
        export(model, motion, tmp_path / "x.fbx")


def test_vertices_stream_holds_one_frame(assets, tmp_path):
    """--vertices never holds every frame's vertices: 80 more frames add far less traced memory
    than their vertices (27 MB on Gene)."""
    import tracemalloc

    model = mmdkit.load(assets / "gene" / "Gene.pmx")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    export(model, motion, tmp_path / "warm.npz", frames=[0.0, 1.0], physics=False, vertices=True)
    peaks = []
    for count in (20, 100):
        tracemalloc.start()
        export(model, motion, tmp_path / f"v{count}.npz", frames=np.arange(float(count)), physics=False,
               vertices=True)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    extra_vertices = 80 * model.num_vertices * 12
    assert peaks[1] - peaks[0] < extra_vertices / 5, (peaks, extra_vertices)
    with np.load(tmp_path / "v100.npz") as d:
        assert d["vertex_position"].shape == (100, model.num_vertices, 3)
