"""render.gl: the Renderer's limits (MSAA, picture size), broken light keys, and each frame drawn
from its own arguments alone."""

import numpy as np
import pytest

from mmdkit.demo import demo_model
from mmdkit.render.camera import mmd_view, perspective
from mmdkit.render.gl import Renderer


def test_msaa_the_gl_cannot_do_is_an_option_error(ctx):
    from mmdkit.errors import OptionError

    model = demo_model()
    for bad in (3, -4, ctx.max_samples * 2):
        with pytest.raises(OptionError, match=f"msaa: {bad}"):
            Renderer(model, (32, 32), bad, ctx=ctx)
    for good in (0, 1, 2, ctx.max_samples):
        Renderer(model, (32, 32), good, ctx=ctx)


def test_gl_limits_and_broken_light_keys_are_handled(ctx):
    from mmdkit.errors import RenderError

    model = demo_model()
    with pytest.raises(RenderError, match="70000x16"):
        Renderer(model, (70000, 16), 0, ctx=ctx)
    ren = Renderer(model, (48, 48), 0, ctx=ctx)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    view, proj = mmd_view((0, 10, 0), (0, 0, 0), -30), perspective(30, 1.0)
    default = ren.render(eye, view, proj)
    for broken in ((0.0, 0.0, 0.0), (np.nan, -1.0, 0.0)):  # a zero or NaN VMD light key: the default light
        np.testing.assert_array_equal(ren.render(eye, view, proj, light_dir=broken), default)


def test_a_frame_without_offsets_draws_none_whatever_came_before(ctx, tmp_path):
    """``vertex_offset=None`` / ``uv_offset=None`` mean no morph offsets: after a frame with
    offsets, a frame without them is drawn as a fresh renderer draws it (nothing carried over)."""
    from mmdkit.render.camera import auto_view

    from helpers import uv_morph_quad

    model = demo_model()
    ren = Renderer(model, (96, 72), 0, ctx=ctx)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    view, d = auto_view(model.vertex_position.min(0), model.vertex_position.max(0), 30.0, 96 / 72)
    proj = perspective(30.0, 96 / 72)
    fresh = ren.render(eye, view, proj, eye_distance=d)
    moved = ren.render(eye, view, proj, vertex_offset=np.full((model.num_vertices, 3), 3.0, np.float32),
                       eye_distance=d)
    assert np.abs(moved.astype(int) - fresh).sum(axis=2).max() > 60  # the offsets show
    np.testing.assert_array_equal(ren.render(eye, view, proj, eye_distance=d), fresh)

    model = uv_morph_quad(tmp_path)  # red texture; the UV morph moves it onto the blue half
    ren = Renderer(model, (32, 32), 0, ctx=ctx, edges=False, ground_shadow=False)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    view, proj = mmd_view((0, 0, 0), (0, 0, 0), -6), perspective(30, 1.0)
    fresh = ren.render(eye, view, proj, light_dir=(0, 0, 1))
    uv = np.zeros((model.num_vertices, 4), np.float32)
    uv[:, 0] = 0.5
    blue = ren.render(eye, view, proj, uv_offset=uv, light_dir=(0, 0, 1)).astype(int)
    assert blue[16, 16, 2] > blue[16, 16, 0] + 60 and fresh[16, 16, 0] > int(fresh[16, 16, 2]) + 60
    np.testing.assert_array_equal(ren.render(eye, view, proj, light_dir=(0, 0, 1)), fresh)


def test_a_frame_is_drawn_into_the_callers_picture_when_given(ctx):
    """``out=``: the picture goes into the caller's array (nothing allocated for it), the same
    pixels as a new one; an array of another shape, type or layout is refused on one line."""
    from mmdkit.errors import OptionError

    model = demo_model()
    ren = Renderer(model, (48, 40), 0, ctx=ctx)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    view, proj = mmd_view((0, 10, 0), (0, 0, 0), -30), perspective(30, 48 / 40)
    new = ren.render(eye, view, proj)
    assert new.flags.c_contiguous and new.shape == (40, 48, 3) and (new < 200).any()
    mine = np.zeros((40, 48, 3), np.uint8)
    assert ren.render(eye, view, proj, out=mine) is mine
    np.testing.assert_array_equal(mine, new)
    for bad in (np.zeros((40, 48, 4), np.uint8), np.zeros((40, 48, 3)), np.zeros((40, 96, 3), np.uint8)[:, ::2]):
        with pytest.raises(OptionError, match="out: needs a writable C-ordered"):
            ren.render(eye, view, proj, out=bad)
