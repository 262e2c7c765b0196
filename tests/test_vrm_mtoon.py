"""VRM MToon materials drawn through their own toon ramp (importers.vrm.mtoon_ramp): the shaded side
takes the shade colour, stepping where MToon's shading does; other materials keep MMD's default."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import mmdkit
from mmdkit.formats.gltf import load_gltf
from mmdkit.importers.mesh import srgb
from mmdkit.importers.vrm import MTOON_RAMP_ROWS, mtoon_ramp
from mmdkit.formats.gltf.vrm_extras import MToon


@pytest.fixture(scope="module")
def godette(assets):
    return assets / "rigs" / "vrm0" / "Godette_vrm_v4.vrm"


def test_ramp_follows_mtoon_shading():
    m = MToon(shade_color=(0.25, 0.5, 1.0), shading_shift=0.0, shading_toony=0.5, shade_image=-1)
    ramp = mtoon_ramp(m, np.ones(3), "1.0")
    n_l = np.linspace(1, -1, MTOON_RAMP_ROWS)
    shade = srgb((0.25, 0.5, 1.0))
    np.testing.assert_allclose(ramp[n_l >= 0.5], 1.0)  # lit beyond 1 − toony
    np.testing.assert_allclose(ramp[n_l <= -0.5], np.broadcast_to(shade, ramp[n_l <= -0.5].shape))
    mid = np.argmin(np.abs(n_l))
    np.testing.assert_allclose(ramp[mid], (shade + 1) / 2, atol=0.02)  # linear in between
    shifted = mtoon_ramp(MToon((0.25, 0.5, 1.0), 0.4, 0.5, -1), np.ones(3), "1.0")
    assert shifted[mid, 0] > ramp[mid, 0] + 0.1  # a positive shift lights more
    # 0.x: from _ShadeShift to lerp(1, _ShadeShift, _ShadeToony)
    old = mtoon_ramp(MToon((0.25, 0.5, 1.0), -0.2, 0.5, -1), np.ones(3), "0.x")
    np.testing.assert_allclose(old[n_l >= 0.4 + 1e-9], 1.0)
    np.testing.assert_allclose(old[n_l <= -0.2][:, 0], shade[0])
    # relative to a coloured base: shade / base, capped at 1
    np.testing.assert_allclose(mtoon_ramp(m, np.array([0.5, 0.5, 0.5]), "1.0")[-1],
                               np.minimum(shade / 0.5, 1.0))


def test_mtoon_materials_get_their_ramp(godette):
    model = mmdkit.load(godette)
    asset = load_gltf(godette)
    images = model.source_extras["embedded_textures"]
    for k, m in enumerate(asset.vrm.mtoon):
        if m is None:  # plain glTF materials: MMD's default toon as before
            assert model.material_toon_index[k] == -1
            continue
        name = model.texture_path[model.material_toon_index[k]]
        ramp = np.asarray(Image.open(io.BytesIO(images[name])).convert("RGB"), np.float64)[:, 0] / 255
        assert ramp.shape == (MTOON_RAMP_ROWS, 3)
        np.testing.assert_allclose(ramp[0], 1.0, atol=1 / 255)
        want = np.minimum(srgb(m.shade_color) / np.maximum(srgb(asset.materials[k].base_color[:3]), 1e-3), 1)
        np.testing.assert_allclose(ramp[-1], want, atol=1.5 / 255)
        assert model.source_extras["vrm_mtoon"][k]["toon"] == name
    assert sum(m is not None for m in asset.vrm.mtoon) == 2


def test_shaded_side_takes_the_shade_colour(godette, ctx):
    """Body's shade colour is (0.50, 0.79, 1.0): drawn with its ramp, the shaded pixels lose red
    against blue (MMD's default ramp is grey: red/blue as lit), the lit ones stay as they were."""
    from mmdkit.render.camera import auto_view, perspective
    from mmdkit.render.gl import Renderer

    model = mmdkit.load(godette)
    plain = model.replace(material_toon_index=np.full(model.num_materials, -1, np.int32))
    shots = []
    for m in (model, plain):
        ren = Renderer(m, (160, 160), 0, ctx=ctx, edges=False, ground_shadow=False,
                       model_dir=str(godette.parent))
        view, _ = auto_view(m.vertex_position.min(0), m.vertex_position.max(0), 30.0, 1.0)
        eye = np.broadcast_to(np.eye(4, dtype=np.float32), (m.num_bones, 4, 4))
        shots.append(ren.render(eye, view, perspective(30.0, 1.0)).astype(np.float64))
    mtoon, default = shots
    body = (np.abs(default - 255).sum(axis=2) > 30) & (default[..., 2] > 40) & (default[..., 0] > 40)
    assert body.sum() > 500
    ratio = (mtoon[..., 0] / np.maximum(mtoon[..., 2], 1)) / (default[..., 0] / np.maximum(default[..., 2], 1))
    r = ratio[body]
    assert (r < 0.75).mean() > 0.03  # a shaded side in the shade colour
    assert (np.abs(r - 1) < 0.05).mean() > 0.3  # a lit side as before
