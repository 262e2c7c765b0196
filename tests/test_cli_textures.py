"""Textures too big to draw (issue #23): capped at MAX_TEXTURE_EDGE with one warning naming the file,
for `render` and `export` alike; Pillow's decompression-bomb warning and error become mmdkit's own."""

from __future__ import annotations

import io
import json
import struct
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image

from mmdkit.errors import FormatError
from mmdkit.formats.pmx import write_pmx
from mmdkit.model.builder import ModelBuilder
MAX_TEXTURE_EDGE = 4096  # mmdkit.model.textures.MAX_TEXTURE_EDGE, as documented
WIDE = (5000, 12)  # over the cap, yet cheap to decode


def _textured_model(folder, texture: str):
    """m.pmx in ``folder``: one triangle whose material draws ``texture``; and an empty motion."""
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.formats.vmd import write_vmd

    mb = ModelBuilder("tex")
    mb.add_bone("センター", (0, 0, 0))
    m = mb.add_material("m", texture=texture)
    mb.add_mesh(m, [(-5, 0, 0), (5, 0, 0), (0, 10, 0)], [(0, 0, -1)] * 3, [(0, 1), (1, 1), (0.5, 0)], [(0, 1, 2)],
                [[0, 0, 0, 0]] * 3)
    (folder / "m.pmx").write_bytes(write_pmx(mb.build()))
    (folder / "still.vmd").write_bytes(write_vmd(MotionBuilder().build()))
    return folder / "m.pmx", folder / "still.vmd"


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` × ``height`` in its header and holds one empty IDAT."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def test_read_texture_downscales_over_the_cap_and_says_so(tmp_path):
    from mmdkit.model.textures import MAX_TEXTURE_EDGE as cap, read_texture

    assert cap == MAX_TEXTURE_EDGE
    for mode, colour in (("RGB", (200, 20, 20)), ("RGBA", (200, 20, 20, 128)), ("P", 3), ("L", 90)):
        Image.new(mode, WIDE, colour).save(tmp_path / "wide.png")
        im, note = read_texture(str(tmp_path / "wide.png"), "wide.png")
        assert im.size == (MAX_TEXTURE_EDGE, 9), mode  # aspect kept (12 × 4096/5000 = 9.8)
        assert "'wide.png'" in note and "5000×12" in note and f"{MAX_TEXTURE_EDGE}×9" in note
        Image.new(mode, (9000, 40), colour).save(tmp_path / "wider.png")  # reduced 2× first, then resampled
        im, note = read_texture(str(tmp_path / "wider.png"), "wider.png")
        assert im.size == (MAX_TEXTURE_EDGE, 18) and "9000×40" in note
        want = colour if mode != "P" else im.getpixel((0, 0))
        assert np.abs(np.subtract(im.getpixel((100, 9)), want)).max() <= 2, mode  # resampling rounds
    assert im.getpixel((100, 4)) == 90  # the pixels survive the reduction
    Image.new("RGB", (64, 32)).save(tmp_path / "small.png")
    im, note = read_texture(str(tmp_path / "small.png"), "small.png")
    assert im.size == (64, 32) and note is None


def test_pillow_bomb_limits_become_mmdkit_messages(tmp_path, monkeypatch):
    import PIL.Image

    from mmdkit.model.textures import read_texture

    Image.new("RGB", WIDE).save(tmp_path / "wide.png")
    monkeypatch.setattr(PIL.Image, "MAX_IMAGE_PIXELS", 40_000)  # 60,000 pixels: over it, under twice it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Pillow's DecompressionBombWarning must not escape
        im, note = read_texture(str(tmp_path / "wide.png"), "wide.png")
    assert im.size[0] == MAX_TEXTURE_EDGE and note
    monkeypatch.setattr(PIL.Image, "MAX_IMAGE_PIXELS", 20_000)
    with pytest.raises(FormatError, match=r"texture 'wide.png' has more than 40,000 pixels"):
        read_texture(str(tmp_path / "wide.png"), "wide.png")


def test_export_caps_textures_and_survives_a_bomb_header(tmp_path, mmdkit_cli):
    model, _ = _textured_model(tmp_path, "tex.png")
    Image.new("RGBA", WIDE, (10, 200, 10, 255)).save(tmp_path / "tex.png")
    code, out, err = mmdkit_cli("export", model, "-o", tmp_path / "m.glb", "--no-physics")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "tex.png" in ln]
    assert len(lines) == 1 and "downscaled" in lines[0] and lines[0].startswith("mmdkit: warning:")
    glb = (tmp_path / "m.glb").read_bytes()
    n = struct.unpack_from("<I", glb, 12)[0]
    doc = json.loads(glb[20:20 + n])
    view = doc["bufferViews"][doc["images"][0]["bufferView"]]
    binary = glb[20 + n + 8:]
    image = Image.open(io.BytesIO(binary[view.get("byteOffset", 0):view.get("byteOffset", 0) + view["byteLength"]]))
    assert image.size == (MAX_TEXTURE_EDGE, 9)
    (tmp_path / "tex.png").write_bytes(_png_header_only(100_000, 100_000))  # 10^10 pixels claimed, 60 bytes
    code, out, err = mmdkit_cli("export", model, "-o", tmp_path / "b.glb", "--no-physics")
    assert code == 0, err
    assert "Traceback" not in err and "DecompressionBomb" not in err
    assert "tex.png" in err and "refused" in err and err.count("\n") == 1


def test_render_caps_textures_with_one_warning(tmp_path):
    import subprocess
    import sys

    model, motion = _textured_model(tmp_path, "tex.png")
    Image.new("RGB", WIDE, (200, 20, 20)).save(tmp_path / "tex.png")
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:PIL", "-m", "mmdkit", "render", str(model),
                        str(motion), "--frames", "0", "--size", "64x64", "-o", str(tmp_path / "r.png")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "tex.png" in ln]
    assert len(lines) == 1 and "5000×12" in lines[0] and "downscaled" in lines[0]
    assert str(tmp_path / "tex.png") in lines[0]
