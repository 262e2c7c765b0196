"""render.textures: image lookup inside the model folder (links and paths that leave it refused),
PMD shared toons from the model folder first, missing images named in one warning."""

import numpy as np
import pytest
from PIL import Image

import mmdkit
from mmdkit.errors import FormatError
from mmdkit.model.builder import ModelBuilder
from mmdkit.render.camera import mmd_view, perspective
from mmdkit.render.gl import Renderer
from mmdkit.model.textures import resolve_texture

from helpers import quad


def test_pmd_shared_toon_is_taken_from_the_model_folder_first(ctx, tmp_path):
    """MMD resolves a PMD's toon01..10.bmp in the model's folder before its own shared toons."""
    mb = ModelBuilder("toon")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True, toon=0)
    quad(mb, mat, 0.0, b)
    mmdkit.save(mb.build(), tmp_path / "toon.pmd")
    model = mmdkit.load(tmp_path / "toon.pmd")
    assert model.material_toon_shared[0] and model.material_toon_index[0] == 0

    def centre():
        ren = Renderer(model, (32, 32), 0, ctx=ctx, edges=False, ground_shadow=False)
        img = ren.render(np.broadcast_to(np.eye(4, dtype=np.float32), (1, 4, 4)),
                         mmd_view((0, 0, 0), (0, 0, 0), -6), perspective(30, 1.0), light_dir=(0, 0, 1))
        return img[16, 16].astype(int)

    plain = centre()
    Image.new("RGB", (32, 32), (255, 40, 40)).save(tmp_path / "toon01.bmp")
    red = centre()
    assert abs(plain[0] - plain[1]) < 12  # the built-in ramp is grey
    assert red[0] > red[1] + 60  # the folder's toon01.bmp (red) is used


def test_texture_paths_stay_inside_model_folder(tmp_path):
    (tmp_path / "Tex").mkdir()
    (tmp_path / "Tex" / "Face.PNG").write_bytes(b"x")
    assert resolve_texture(str(tmp_path), "tex\\face.png").endswith("Face.PNG")
    assert resolve_texture(str(tmp_path), "missing.png") is None
    for bad in ("../secret.png", "/etc/passwd", "tex/../../x.png", "C:\\x.png"):
        with pytest.raises(FormatError, match="leaves the model folder"):
            resolve_texture(str(tmp_path), bad)


def _textured_quad_model(tmp_path, textures=("tex.png",)):
    """A one-quad PMX in tmp_path whose materials use ``textures`` (none of them written)."""
    mb = ModelBuilder("textured")
    b = mb.add_bone("root", (0, 0, 0))
    for name in textures:
        mat = mb.add_material(name, diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True,
                              texture=name)
        quad(mb, mat, 0.0, b)
    mmdkit.save(mb.build(), tmp_path / "m.pmx")


def _centre(model, ctx):
    ren = Renderer(model, (32, 32), 0, ctx=ctx, edges=False, ground_shadow=False)
    img = ren.render(np.broadcast_to(np.eye(4, dtype=np.float32), (1, 4, 4)), mmd_view((0, 0, 0), (0, 0, 0), -6),
                     perspective(30, 1.0), light_dir=(0, 0, 1))
    return img[16, 16].astype(int), ren.warnings


def test_model_loaded_by_bare_file_name_finds_its_textures(ctx, tmp_path, monkeypatch):
    """`cd gene && mmdkit render Gene.pmx`: the texture folder of 'm.pmx' is the current folder."""
    _textured_quad_model(tmp_path)
    Image.new("RGB", (4, 4), (220, 30, 30)).save(tmp_path / "tex.png")
    monkeypatch.chdir(tmp_path)
    colour, warnings = _centre(mmdkit.load("m.pmx"), ctx)
    assert warnings == []
    assert colour[0] > colour[1] + 60  # the red texture is drawn, not a white quad


def test_missing_textures_give_one_warning_naming_them(ctx, tmp_path):
    _textured_quad_model(tmp_path, ("a.png", "b.png"))
    colour, warnings = _centre(mmdkit.load(tmp_path / "m.pmx"), ctx)
    assert len(warnings) == 1
    assert "a.png" in warnings[0] and "b.png" in warnings[0] and str(tmp_path) in warnings[0]


def test_texture_lookup_refuses_links_out_before_looking_inside(tmp_path):
    """A directory link out of the model folder is refused at the link, whether or not the file
    exists behind it (listing the outside folder would tell which files exist there)."""
    model_dir, outside = tmp_path / "model", tmp_path / "outside"
    model_dir.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.png").write_bytes(b"x")
    (model_dir / "tex").mkdir()
    (model_dir / "tex" / "a.png").write_bytes(b"x")
    (model_dir / "out").symlink_to(outside, target_is_directory=True)
    (model_dir / "in").symlink_to(model_dir / "tex", target_is_directory=True)
    for stored in ("out\\secret.png", "out\\nothing.png", "OUT/sub/x.png"):
        with pytest.raises(FormatError, match="leaves the model folder"):
            resolve_texture(str(model_dir), stored)
    assert resolve_texture(str(model_dir), "in\\A.png").endswith("a.png")  # a link that stays inside
