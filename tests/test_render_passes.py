"""render.passes: the main pass's blending order and MMD's specular highlight."""

import numpy as np

from mmdkit.model.builder import ModelBuilder
from mmdkit.render.camera import mmd_view, perspective
from mmdkit.render.gl import Renderer

from helpers import quad


def test_material_order_with_transparency(ctx):
    mb = ModelBuilder("quads")
    b = mb.add_bone("root", (0, 0, 0))
    red = mb.add_material("red", diffuse=(1, 0, 0, 1), ambient=(0, 0, 0), edge=False, double_sided=True)
    blue = mb.add_material("blue", diffuse=(0, 0, 1, 0.5), ambient=(0, 0, 0), edge=False, double_sided=True)
    quad(mb, red, 0.5, b)   # behind (MMD: camera on −z)
    quad(mb, blue, -0.5, b)  # in front, half transparent, drawn second
    model = mb.build()
    ren = Renderer(model, (32, 32), 0, ctx=ctx, edges=False)
    img = ren.render(np.broadcast_to(np.eye(4, dtype=np.float32), (1, 4, 4)), mmd_view((0, 0, 0), (0, 0, 0), -6),
                     perspective(30, 1.0), light_dir=(0, 0, 1))
    c = img[16, 16].astype(int)
    assert c[0] > 40 and c[2] > 40 and c[1] < 20  # red seen through blue: both present


def test_specular_highlight_follows_the_eye(ctx):
    """MMD's half vector uses the direction to the eye: a mirror-like quad lit from the camera
    shines when seen head-on and goes dark when the camera moves 60° around it."""
    mb = ModelBuilder("shiny")
    b = mb.add_bone("root", (0, 0, 0))
    shiny = mb.add_material("shiny", diffuse=(0, 0, 0, 1), ambient=(0, 0, 0), specular=(1, 1, 1),
                            specular_power=50, edge=False, double_sided=True)
    quad(mb, shiny, 0.0, b)
    ren = Renderer(mb.build(), (32, 32), 0, ctx=ctx, edges=False, ground_shadow=False)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (1, 4, 4))
    light = (0.0, 0.0, 1.0)  # shining along +z: from the camera's side onto the quad
    head_on = ren.render(eye, mmd_view((0, 0, 0), (0, 0, 0), -6), perspective(30, 1.0), light_dir=light)
    oblique = ren.render(eye, mmd_view((0, 0, 0), (0, np.radians(60), 0), -6), perspective(30, 1.0), light_dir=light)
    assert head_on[16, 16].min() > 100
    assert oblique[16, 16].max() < 30
