"""render.geometry: GPU skinning (compute pass or palette batches) equals the CPU skinner, for
every character of a crowd, with per-character bones, vertex and UV morph offsets."""

import numpy as np
import pytest

import mmdkit
from mmdkit.demo import demo_model
from mmdkit.runtime import Character
from mmdkit.render.camera import mmd_view, perspective
from mmdkit.render.gl import Renderer

from helpers import uv_morph_quad


@pytest.mark.parametrize("self_shadow, via", [(False, "bones"), (True, "bones"), (False, "morphs")])
def test_crowd_draws_each_character_with_its_own_pose(ctx, self_shadow, via):
    """Two instances side by side, the second 1 unit higher (by its bones, or by its own vertex
    morph offsets), look exactly like two single renders composited: each character is skinned
    into its own slice of the feedback buffer with its own morph offsets."""
    from mmdkit.render.camera import auto_view

    model = demo_model()
    rest = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    zero = np.zeros((model.num_vertices, 3), np.float32)
    up = zero + np.float32([0, 1, 0])
    raised = rest.copy()
    raised[:, 1, 3] = 1.0
    second = (raised, zero) if via == "bones" else (rest, up)
    lo, hi = model.vertex_position.min(0), model.vertex_position.max(0)
    view, _ = auto_view(lo - [4, 0, 0], hi + [4, 1, 0], 30.0, 2.0)
    proj = perspective(30.0, 2.0)
    kw = dict(ctx=ctx, ground_shadow=False, self_shadow=self_shadow)
    crowd = Renderer(model, (96, 48), 0, instances=2, **kw)
    crowd.set_instance_offsets([[-3, 0, 0], [3, 0, 0]])
    both = crowd.render(np.stack([rest, second[0]]), view, proj, vertex_offset=np.stack([zero, second[1]])).astype(int)
    one = Renderer(model, (96, 48), 0, **kw)
    one.set_instance_offsets([[-3, 0, 0]])
    left = one.render(rest, view, proj, vertex_offset=zero).astype(int)
    one.set_instance_offsets([[3, 0, 0]])
    right = one.render(second[0], view, proj, vertex_offset=second[1]).astype(int)
    assert (left < 200).any() and (right < 200).any()
    assert np.abs(both - np.minimum(left, right)).mean() < 1.0


def test_gpu_skinning_equals_cpu(ctx, assets):
    model = mmdkit.load(assets / "gene" / "Gene.pmx")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    ch = Character(model, motion).update(400)
    pos = np.empty((model.num_vertices, 3), np.float32)
    nrm = np.empty_like(pos)
    ch.skin(pos, nrm)
    w1 = np.zeros_like(model.vertex_bone_weight)
    w1[:, 0] = 1
    baked = model.replace(vertex_position=pos, vertex_normal=nrm, vertex_bone_weight=w1,
                          vertex_bone_index=np.zeros_like(model.vertex_bone_index),
                          vertex_deform=np.zeros_like(model.vertex_deform))
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    view, proj = mmd_view((0, 10, 0), (0, 0, 0), -35), perspective(30, 0.75)
    gpu = Renderer(model, (120, 160), 0, ctx=ctx, edges=False).render(ch.bone_skin, view, proj,
                                                                           vertex_offset=ch.vertex_offset)
    cpu = Renderer(baked, (120, 160), 0, ctx=ctx, edges=False).render(eye, view, proj)
    diff = np.abs(gpu.astype(int) - cpu.astype(int)).max(axis=2)
    assert (diff > 40).mean() < 0.002  # a few edge pixels at most
    assert (np.abs(gpu.astype(int) - 255).sum(axis=2) > 30).mean() > 0.05


@pytest.mark.parametrize("name", ["sdef-two-bone-elbow", "qdef-twist-cylinder", "mixed-deform-types",
                                  "bdef4-twist-cylinder"])
def test_gpu_sdef_qdef_equal_cpu(ctx, assets, name):
    from mmdkit.render.camera import auto_view
    from mmdkit.skinning.cpu import CpuSkinner
    from skinning_reference import random_rigid

    path = next((assets / "fixtures").rglob(f"{name}.pmx"))
    model = mmdkit.load(path)
    skin = random_rigid(model.num_bones, np.random.default_rng(3), angle=0.8, spread=0.1)
    pos = np.empty((model.num_vertices, 3), np.float32)
    nrm = np.empty_like(pos)
    CpuSkinner(model).skin(skin, None, pos, nrm)
    w1 = np.zeros_like(model.vertex_bone_weight)
    w1[:, 0] = 1
    baked = model.replace(vertex_position=pos, vertex_normal=nrm, vertex_bone_weight=w1,
                          vertex_bone_index=np.zeros_like(model.vertex_bone_index),
                          vertex_deform=np.zeros_like(model.vertex_deform))
    lo, hi = pos.min(0) - 0.5, pos.max(0) + 0.5
    view, _ = auto_view(lo, hi, 30, 1.0)
    proj = perspective(30, 1.0)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    gpu = Renderer(model, (96, 96), 0, ctx=ctx, edges=False).render(skin, view, proj)
    cpu = Renderer(baked, (96, 96), 0, ctx=ctx, edges=False).render(eye, view, proj)
    covered = (np.abs(cpu.astype(int) - 255).sum(axis=2) > 30).mean()
    assert covered > 0.01
    diff = np.abs(gpu.astype(int) - cpu.astype(int)).max(axis=2)
    assert (diff > 40).mean() < 0.01


@pytest.mark.parametrize("palette", [13, 36])
def test_palette_batches_draw_like_bone_texture(ctx, assets, palette):
    model = mmdkit.load(assets / "gene" / "Gene.pmx")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    ch = Character(model, motion).update(700)
    view, proj = mmd_view((0, 10, 0), (0, 0, 0), -35), perspective(30, 0.75)
    tex = Renderer(model, (120, 160), 0, ctx=ctx).render(ch.bone_skin, view, proj, vertex_offset=ch.vertex_offset)
    ren = Renderer(model, (120, 160), 0, ctx=ctx, palette_size=palette)
    assert ren.palette.num_batches > model.num_materials
    pal = ren.render(ch.bone_skin, view, proj, vertex_offset=ch.vertex_offset)
    diff = np.abs(tex.astype(int) - pal.astype(int)).max(axis=2)
    assert (diff > 40).mean() < 0.002
    assert (np.abs(pal.astype(int) - 255).sum(axis=2) > 30).mean() > 0.05


@pytest.mark.parametrize("name", ["Gene", "sdef-two-bone-elbow", "qdef-twist-cylinder", "mixed-deform-types"])
def test_gpu_skinned_vertices_equal_cpu_for_every_character(ctx, assets, name):
    """The compute pass skins each character of a crowd with its own bones and vertex morph
    offsets, crowd offset added: read back, it equals the CPU skinner within float32 rounding."""
    from mmdkit.skinning.cpu import CpuSkinner
    from skinning_reference import random_rigid

    path = assets / "gene" / "Gene.pmx" if name == "Gene" else next((assets / "fixtures").rglob(f"{name}.pmx"))
    model = mmdkit.load(path)
    rng = np.random.default_rng(5)
    skins = np.stack([random_rigid(model.num_bones, rng, angle=0.6, spread=0.5) for _ in range(3)])
    offsets = np.zeros((3, model.num_vertices, 3), np.float32)  # where vertex morphs reach, as the CPU reads them
    offsets[:, model.vertex_morph_vertex] = rng.normal(size=(3, len(model.vertex_morph_vertex), 3)) * 0.1
    crowd = np.float32([[-5, 0, 0], [0, 0, 2], [5, 1, 0]])
    ren = Renderer(model, (16, 16), 0, ctx=ctx, instances=3, edges=False, ground_shadow=False)
    ren.set_instance_offsets(crowd)
    ren.render(skins, np.eye(4), np.eye(4), vertex_offset=offsets)
    gpu = ren.geometry.read_skinned()
    assert gpu.shape == (3, model.num_vertices, 2, 3)
    pos = np.empty((model.num_vertices, 3), np.float32)
    nrm = np.empty_like(pos)
    for k in range(3):
        CpuSkinner(model).skin(skins[k], offsets[k], pos, nrm)
        reach = float(np.abs(pos).max())
        np.testing.assert_allclose(gpu[k, :, 0], pos + crowd[k], atol=2e-6 * reach + 1e-5)
        np.testing.assert_allclose(gpu[k, :, 1], nrm, atol=1e-4)


def test_crowd_uv_morph_offsets_are_per_character(ctx, tmp_path):
    """A UV morph moves the second character's quad onto the blue half of the texture; the first,
    without the offset, stays red (UV offsets reach the shader per character, only where UV
    morphs reach)."""
    model = uv_morph_quad(tmp_path)
    ren = Renderer(model, (64, 32), 0, ctx=ctx, instances=2, edges=False, ground_shadow=False)
    ren.set_instance_offsets([[-1.5, 0, 0], [1.5, 0, 0]])
    uv = np.zeros((2, model.num_vertices, 4), np.float32)
    uv[1] = 0.5 * np.float32([1, 0, 0, 0])
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (2, model.num_bones, 4, 4))
    img = ren.render(eye, mmd_view((0, 0, 0), (0, 0, 0), -9), perspective(30, 2.0), uv_offset=uv,
                     light_dir=(0, 0, 1)).astype(int)
    left, right = img[16, 16], img[16, 48]
    assert left[0] > left[2] + 60, left
    assert right[2] > right[0] + 60, right
