"""render.shadow: MMD's self-shadow map (and VMD self-shadow keys switching it off)."""

import numpy as np

from mmdkit.model.builder import ModelBuilder
from mmdkit.render.camera import mmd_view, perspective
from mmdkit.render.gl import Renderer


def test_self_shadow_darkens_what_the_light_cannot_see(ctx):
    """A plate floating above a floor, lit from the upper left: with self-shadow its shadow
    falls on the floor to the right (MMD's toon-dark colour); without, the floor is even."""
    mb = ModelBuilder("plate")
    b = mb.add_bone("root", (0, 0, 0))
    for name, y, half in (("floor", 0.0, 5.0), ("plate", 3.0, 1.0)):
        mat = mb.add_material(name, diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True)
        q = [[-half, y, -half], [half, y, -half], [half, y, half], [-half, y, half]]
        mb.add_mesh(mat, q, [[0, 1, 0]] * 4, [[0, 0]] * 4, [[0, 1, 2], [0, 2, 3]], [b] * 4)
    model = mb.build()
    view = mmd_view((0, 0, 0), (np.radians(60), 0, 0), -20)
    proj = perspective(30, 1.0)

    def pixel(p):
        c = proj @ view @ np.r_[p, 1.0]
        x, y = c[:2] / c[3]
        return int((1 - y) / 2 * 96), int((x + 1) / 2 * 96)

    shade, lit = pixel((3.0, 0.0, 0.0)), pixel((-3.0, 0.0, 0.0))
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (1, 4, 4))
    out = {}
    for on in (False, True):
        ren = Renderer(model, (96, 96), 0, ctx=ctx, edges=False, ground_shadow=False, self_shadow=on)
        out[on] = ren.render(eye, view, proj, light_dir=(1.0, -1.0, 0.0)).astype(int)
    assert abs(out[False][shade].sum() - out[False][lit].sum()) < 6
    assert out[True][lit].sum() > out[True][shade].sum() + 60
    # a VMD self-shadow key with mode 0 turns it off for that frame
    off = ren.render(eye, view, proj, light_dir=(1.0, -1.0, 0.0), self_shadow=False).astype(int)
    # another shader (compiled with SELF_SHADOW, its branch off) than out[False]'s: llvmpipe may round
    # a channel one or two steps apart; the shadow itself darkens by 60 or more
    assert np.abs(off - out[False]).max() <= 2
