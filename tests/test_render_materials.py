"""render.materials: the material table's PMD rules and material-morph tints reaching the shader."""

from dataclasses import replace

import numpy as np

import mmdkit
from mmdkit.demo import demo_model
from mmdkit.model.builder import ModelBuilder
from mmdkit.render.camera import perspective
from mmdkit.render.gl import Renderer

from helpers import quad


def test_material_morph_tints_reach_the_shader(ctx):
    model = demo_model()
    Mn = model.num_materials
    ren = Renderer(model, (96, 72), 0, ctx=ctx, edges=False, ground_shadow=False)
    from mmdkit.render.camera import auto_view

    view, d = auto_view(model.vertex_position.min(0), model.vertex_position.max(0), 30.0, 96 / 72)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    plain = ren.render(eye, view, perspective(30.0, 96 / 72))
    from mmdkit.render.materials import MaterialValues

    dark = {"toon": (np.full((Mn, 4), 0.2, np.float32), np.zeros((Mn, 4), np.float32))}
    values = MaterialValues.of_model(model)
    tinted = ren.render(eye, view, perspective(30.0, 96 / 72), materials=replace(values, tints=dark))
    body = np.abs(plain.astype(int) - 255).sum(axis=2) > 30
    assert body.sum() > 50
    assert tinted[body].mean() < plain[body].mean() * 0.6


def test_tints_that_change_nothing_draw_the_untinted_picture(ctx):
    """Materials whose tints are all off (colour * 1 + 0) are drawn by a program without tints or
    sphere maps (less work a fragment): the same picture as through the full program, which a tint
    adding 1e-30 (nothing a colour shows) asks for."""
    from mmdkit.render.camera import auto_view
    from mmdkit.render.materials import MaterialValues

    model = demo_model()
    Mn = model.num_materials
    ren = Renderer(model, (96, 72), 4, ctx=ctx)
    view, d = auto_view(model.vertex_position.min(0), model.vertex_position.max(0), 30.0, 96 / 72)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    values = MaterialValues.of_model(model)
    off = (np.ones((Mn, 4), np.float32), np.zeros((Mn, 4), np.float32))
    tiny = (np.ones((Mn, 4), np.float32), np.full((Mn, 4), 1e-30, np.float32))
    kinds = ("texture", "sphere", "toon")
    plain = ren.render(eye, view, perspective(30.0, 96 / 72), materials=replace(values, tints=dict.fromkeys(kinds, off)),
                       eye_distance=d)
    full = ren.render(eye, view, perspective(30.0, 96 / 72), eye_distance=d,
                      materials=replace(values, tints=dict.fromkeys(kinds, tiny)))
    assert (np.abs(plain.astype(int) - 255).sum(axis=2) > 30).sum() > 50  # the model is in the picture
    assert np.abs(plain.astype(int) - full).max() <= 1  # drivers may round the two programs apart


def test_material_table_resolves_pmd_rules(tmp_path):
    """PMD-only rules live in the table, so a backend never asks which format a model came from."""
    from mmdkit.model.materials import material_table

    mb = ModelBuilder("rules")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 1, 1, 0.98), edge=False, toon=2, texture="t.png")
    quad(mb, mat, 0.0, b)
    mmdkit.save(mb.build(), tmp_path / "m.pmd")
    mmdkit.save(mb.build(), tmp_path / "m.pmx")
    pmd, pmx = (material_table(mmdkit.load(tmp_path / f"m.{e}")) for e in ("pmd", "pmx"))
    assert pmd.images[0].texture == pmx.images[0].texture == "t.png"
    assert pmd.images[0].toon == "toon03.bmp" and pmd.images[0].toon_optional and pmd.images[0].toon_builtin == 3
    assert pmx.images[0].toon is None and pmx.images[0].toon_builtin == 3
    assert not pmd.culls(0, 0.5) and pmx.culls(0, 0.5)  # PMD: translucent materials draw both sides
    assert not pmd.casts_self_shadow(0, 0.98) and pmd.casts_self_shadow(0, 1.0)
