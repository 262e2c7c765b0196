"""The bake: the runtime's own poses (with and without physics), MMD-local transforms that FK
back to the world ones, output frames at any fps, physics stepped at >= 30 Hz between far frames."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.export import bake, output_frames
from mmdkit.physics import physics_for
from mmdkit.runtime import pose


def _qmul(a, b):
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], -1)


def _qrot(q, v):
    u, w = q[..., :3], q[..., 3:]
    t = 2 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


@pytest.fixture(scope="module")
def gene(assets):
    return mmdkit.load(assets / "gene" / "Gene.pmx"), mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")


def test_bake_is_the_runtime_pose(gene, paths_agree):
    model, motion = gene
    frames = np.arange(300.0, 340.0, 0.5)
    b = bake(model, motion, frames, physics=False)
    assert np.array_equal(b.bone_world, pose(model, motion, frames)["bone_world"])  # both the batch kernel
    assert not b.physics and not b.bone_driven.any()
    seen = []
    c = bake(model, motion, frames, physics=False, on_frame=lambda i, ch: seen.append(i))  # frame by frame
    assert seen == list(range(len(frames)))
    paths_agree(c.bone_world, b.bone_world)  # another kernel than the batch: to rounding
    assert np.abs(c.bone_local_rotation - b.bone_local_rotation).max() < 5e-5  # float32 matrices
    assert np.abs(c.bone_local_translation - b.bone_local_translation).max() < 1e-4
    p = bake(model, motion, frames[:20], physics=True)
    ref = pose(model, motion, frames[:20], physics=True)
    assert p.physics and p.bone_driven.sum() > 20
    assert np.array_equal(p.bone_world, ref["bone_world"])  # the same frame-by-frame path with physics, twice


def test_local_transforms_fk_back_to_world(gene):
    model, motion = gene
    b = bake(model, motion, [120.0, 121.0, 700.5], physics=False)
    parent = np.asarray(model.bone_parent)
    rest = np.asarray(model.bone_position, np.float64)
    q = b.bone_world_rotation / np.linalg.norm(b.bone_world_rotation, axis=-1, keepdims=True)
    for bone in range(model.num_bones):
        p = parent[bone]
        if p < 0:
            world_p = rest[bone] + b.bone_local_translation[:, bone]
            world_q = b.bone_local_rotation[:, bone]
        else:
            offset = rest[bone] - rest[p] + b.bone_local_translation[:, bone]
            world_p = b.bone_world_position[:, p] + _qrot(q[:, p], offset)
            world_q = _qmul(q[:, p], b.bone_local_rotation[:, bone])
        assert np.abs(world_p - b.bone_world_position[:, bone]).max() < 1e-4, model.bone_name[bone]
        assert (np.abs((world_q * q[:, bone]).sum(-1)) > 1 - 1e-9).all(), model.bone_name[bone]
    assert (b.bone_local_rotation[..., 3] >= 0).all()


def test_output_frames_and_low_fps_physics(gene):
    model, motion = gene
    np.testing.assert_allclose(output_frames(motion, 60, 10, 12), [10, 10.5, 11, 11.5, 12])
    assert len(output_frames(motion, 30)) == motion.last_frame + 1
    with pytest.raises(OptionError, match="fps"):
        output_frames(motion, -1)
    with pytest.raises(OptionError, match="frames"):
        bake(model, motion, [], physics=False)
    # at 10 fps the world is still stepped every motion frame: the same bodies as a 30 fps run
    slow = bake(model, motion, np.arange(400.0, 430.0, 3.0), fps=10, physics=True)
    fast = bake(model, motion, np.arange(400.0, 430.0), physics=True)
    assert slow.fps == 10 and np.abs(slow.bone_world - fast.bone_world[::3]).max() < 1e-4
