"""Annotated renders (#25): the camera conventions (OpenCV K, R, t ⇄ the renderer's GL matrices, the
MMD camera), cameras.json read back as views, byte-identical reruns, bad input (one line, exit 2,
nothing written) and the body-part rule."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.errors import OptionError
from mmdkit.animation.view import mmd_view, perspective
from mmdkit.model.space import MMD_UNITS_PER_METRE
from mmdkit.render.labels import cameras as cams
from mmdkit.render.labels import sink
from mmdkit.render.labels.parts import PART, bone_parts
from mmdkit.runtime.take import Output, Take

FLIP = np.array([1.0, 1.0, -1.0])


def _gl_pixels(points, view, proj, w, h):
    """Pixels (top-left pixel's centre at (0, 0)) where OpenGL draws MMD points."""
    clip = np.c_[points, np.ones(len(points))] @ (proj @ view).T
    ndc = clip[:, :2] / clip[:, 3:]
    return np.c_[(ndc[:, 0] + 1) * w / 2 - 0.5, (1 - ndc[:, 1]) * h / 2 - 0.5]


def _cv_pixels(points, K, R, t):
    cam = (points * FLIP / MMD_UNITS_PER_METRE) @ R.T + t
    uvw = cam @ K.T
    return uvw[:, :2] / uvw[:, 2:]


def test_mmd_camera_as_k_r_t():
    """An MMD camera (mmd_view/perspective, as the renderer draws it) turned into K, R, t projects
    points onto the same pixels, and K, R, t turned back give the GL matrices again."""
    rng = np.random.default_rng(1)
    w, h = 640, 360
    for _ in range(5):
        view = mmd_view(rng.uniform(-5, 5, 3) + (0, 10, 0), rng.uniform(-0.6, 0.6, 3), -rng.uniform(20, 60))
        proj = perspective(rng.uniform(15, 60), w / h, cams.NEAR, cams.FAR)
        v = cams.Views(["c"], w, h, view[None, None], proj[None, None], np.zeros((1, 1), bool))
        K, R, t = v.K[0, 0], v.R[0, 0], v.t[0, 0]
        assert np.allclose(R @ R.T, np.eye(3)) and np.isclose(np.linalg.det(R), 1.0)
        pts = rng.uniform(-8, 8, (50, 3)) + (0, 10, 0)
        np.testing.assert_allclose(_cv_pixels(pts, K, R, t), _gl_pixels(pts, view, proj, w, h), atol=1e-6)
        np.testing.assert_allclose(cams.gl_view(R, t), view, atol=1e-9)
        np.testing.assert_allclose(cams.projection(K, w, h), proj, atol=1e-9)
    # the principal point of an off-centre K survives the trip
    K = np.array([[500.0, 0.0, 300.0], [0.0, 510.0, 170.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(cams.intrinsics(cams.projection(K, w, h), w, h), K, atol=1e-9)


def test_ring_views_look_at_the_box():
    box = (np.array([-4.0, 0.0, -3.0]), np.array([4.0, 20.0, 3.0]))
    v = cams.ring_views(box, 4, (320, 240), 2, height=1.0, radius=3.0, fov=40)
    centre = np.array([0.0, 10.0, 0.0])
    for c in range(4):
        px = _cv_pixels(centre[None], v.K[c, 0], v.R[c, 0], v.t[c, 0])[0]
        assert np.allclose(px, (159.5, 119.5), atol=1e-6)  # the box's centre at the picture's centre
        eye = -v.R[c, 0].T @ v.t[c, 0]  # camera centre, glTF metres
        assert math.isclose(eye[1], 1.0) and math.isclose(math.hypot(eye[0], eye[2]), 3.0)
    assert abs(v.K[0, 0, 1, 1] - 120 / math.tan(math.radians(20))) < 1e-6
    eye0 = -v.R[0, 0].T @ v.t[0, 0]
    assert eye0[2] > 2.9  # the first camera in front of the character (MMD −z is glTF +z)


@pytest.fixture(scope="module")
def small(assets, tmp_path_factory):
    """A tiny annotated render of low_miku, done twice, and once more through its own cameras.json."""
    tmp = tmp_path_factory.mktemp("views")
    model = assets / "low_miku" / "miku.pmd"
    motion = assets / "wavefile" / "wavefile_v2.vmd"
    outs = []
    for k, views in enumerate((2, 2, None)):
        out = tmp / f"run{k}"
        views = views if views is not None else str(tmp / "run0" / "cameras.json")
        mmdkit.run(Take(model, motion, frames="100:101", physics=True,
                        outputs=(Output(str(out) + "/", {"annotate": True, "views": views, "size": (96, 72),
                                                         "shards": 3 if k < 2 else None, "preview": k < 2,
                                                         "correspondence": k < 2}),)),
                   warn=lambda *a: None)
        outs.append(out)
    return outs


def _files(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())


def test_the_same_command_twice_gives_the_same_bytes(small):
    a, b, _ = small
    names = _files(a)
    assert len(names) == 2 * 8 * 2 + 5 + 3 and names == _files(b)  # 2 frames × 8 kinds × 2 views, 5 files, 3 shards
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n
    j = np.load(a / "joints3d.npz")
    assert j["world"].shape == (2, 39, 3) and j["camera"].shape == (2, 2, 39, 3)


def test_preview_is_the_middle_frame(small):
    """preview.png: per view a column of the picture, the parts, the characters and the depth of the
    middle frame (index 1 of 2), as the PNGs hold them."""
    from mmdkit.render.labels.preview import CHARACTER_COLORS, PART_COLORS

    out = small[0]
    sheet = np.array(Image.open(out / "preview.png"))
    assert sheet.shape == (4 * 72, 2 * 96, 3)
    for v in range(2):
        col = sheet[:, v * 96:(v + 1) * 96]
        parts, mask = (np.array(Image.open(out / f"view_{v:02d}" / k / "000001.png")) for k in ("parts", "mask"))
        assert (col[72:144] == PART_COLORS[parts]).all() and (col[144:216] == CHARACTER_COLORS[mask]).all()
        depth = np.array(Image.open(out / f"view_{v:02d}" / "depth" / "000001.png"))
        assert ((col[216:] > 0).any(-1) == (depth > 0)).all()


def test_webdataset_reads_the_shards(small):
    """One sample per view and frame, in order over the 3 shards, holding the PNGs the folder holds
    and the image's COCO annotations and camera."""
    import webdataset as wds

    out = small[0]
    urls = sorted(str(p) for p in (out / "shards").glob("*.tar"))
    assert len(urls) == 3
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    assert [s["__key__"] for s in samples] == [f"{i:06d}_view_{c:02d}" for i in range(2) for c in range(2)]
    cameras = json.loads((out / "cameras.json").read_text())
    for s in samples:
        i, c = int(s["__key__"][:6]), int(s["__key__"][-2:])
        for kind in ("rgb", "depth", "mask", "parts", "vertex", "face", "uv_u", "uv_v"):
            assert s[f"{kind}.png"] == (out / f"view_{c:02d}" / kind / f"{i:06d}.png").read_bytes()
        meta = json.loads(s["json"])
        assert meta["image"]["frame_index"] == i and meta["image"]["view_index"] == c
        assert np.allclose(meta["R"], cameras["views"][c]["frames"][i]["R"]) and len(meta["annotations"]) == 1


def test_cameras_json_read_back_draws_the_same(small):
    """The views a run wrote, given back as --views cams.json, are the same cameras (to the 9
    decimals written) and draw the same masks."""
    a, _, c = small
    ca, cc = (json.loads((x / "cameras.json").read_text()) for x in (a, c))
    for va, vc in zip(ca["views"], cc["views"]):
        assert va["name"] == vc["name"] and np.allclose(va["K"], vc["K"], atol=1e-6)
        for fa, fc in zip(va["frames"], vc["frames"]):
            assert np.allclose(fa["R"], fc["R"], atol=1e-8) and np.allclose(fa["t"], fc["t"], atol=1e-8)
    for v in range(2):
        ma, mc = (np.array(Image.open(x / f"view_{v:02d}" / "mask" / "000000.png")) for x in (a, c))
        assert (ma != mc).mean() < 0.001 and ma.any()


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mmdkit", "render", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_bad_input_one_line_exit_2_nothing_written(assets, tmp_path):
    model, motion = assets / "gene" / "Gene_light.pmx", assets / "gene" / "motion" / "01_happy.vmd"
    (tmp_path / "nok.json").write_text(json.dumps({"views": [{"width": 64, "height": 48, "frames": [
        {"R": np.eye(3).tolist(), "t": [0, 0, 3]}]}]}))
    (tmp_path / "file").write_text("x")
    cases = [(["--views", "nok.json"], "views[0] has no 'K'"), (["--views", "0"], "--views: must be 1 to 64"),
             (["--views", "2", "--view-fov", "0"], "--view-fov: must be a number from 1"),
             (["-o", "file"], "an annotated render writes a folder"), (["--palette", "36"], "--palette"),
             (["--shards", "0"], "--shards: must be a number of tar files"),
             (["--view-radius", "3"], "--view-radius: places the cameras of --views N")]
    for extra, words in cases:
        args = [model, motion, "--frames", "0:1", "--annotate", "--size", "64x48", *extra]
        if "-o" not in extra:
            args += ["-o", "out/"]
        r = _cli(*args, cwd=tmp_path)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mmdkit: error")]
        assert r.returncode == 2 and len(lines) == 1 and words in lines[0], (extra, r.stderr)
        assert "Traceback" not in r.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "nok.json"]  # nothing half-written
    for flag in (["--views", "2"], ["--correspondence"]):
        r = _cli(model, motion, "--frames", "0:1", *flag, "-o", "out/", cwd=tmp_path)
        assert r.returncode == 2 and f"{flag[0]}: needs --annotate" in r.stderr
        assert len(r.stderr.splitlines()) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "nok.json"]


def test_parts_from_the_humanoid_map_and_physics(assets):
    model = mmdkit.load(assets / "gene" / "Gene_light.pmx")
    part = bone_parts(model)
    name = {n: i for i, n in enumerate(model.bone_name)}
    expect = {"頭": "head", "上半身": "torso", "左ひじ": "left_lower_arm", "右手首": "right_hand",
              "左人指２": "left_hand", "右ひざ": "right_lower_leg", "左足首": "left_foot", "前髪1_1": "hair",
              "後髪A1_1": "hair", "すそ1_1": "cloth", "前クローク1_2": "cloth", "左腕捩": "left_upper_arm"}
    for bone, p in expect.items():
        assert part[name[bone]] == PART[p], bone


def test_mmd_camera_cuts_are_marked():
    """Keys one frame apart are a cut: the first rendered frame past it is marked, no other; the
    field of view gives each frame's K."""
    mo = MotionBuilder()
    mo.add_camera_key(0, -40, (0, 10, 0), (0, 0, 0), fov=30)
    mo.add_camera_key(10, -20, (0, 10, 0), (0, 0.5, 0), fov=50)
    mo.add_camera_key(11, -60, (5, 0, 0), (0, 0, 0), fov=20)
    v = cams.mmd_camera_view(mo.build(), np.arange(0.0, 16.0, 2.0), (64, 48))
    assert v.cut[0].tolist() == [False] * 6 + [True, False]  # frames 0 2 4 6 8 10 12 14: the cut is 10 → 12
    assert abs(v.K[0, 0, 1, 1] - 24 / math.tan(math.radians(15))) < 1e-9
    assert abs(v.K[0, 7, 1, 1] - 24 / math.tan(math.radians(10))) < 1e-9


def test_correspondence_refuses_a_model_past_its_ids(assets, tmp_path, monkeypatch):
    """Ids are 24-bit (8-bit RGB): a model with as many vertices or triangles is refused before
    anything is written (the limit lowered here to Gene's size: no model of 2**24 vertices needed)."""
    model = mmdkit.load(assets / "gene" / "Gene_light.pmx")
    assert max(model.num_vertices, len(model.face_vertex_index)) < sink.MAX_CORRESPONDENCE_ID
    out = tmp_path / "out"
    take = Take(model, None, frames="0:0", physics=False,
                outputs=(Output(str(out) + "/", {"annotate": True, "size": (32, 24), "correspondence": True}),))
    monkeypatch.setattr(sink, "MAX_CORRESPONDENCE_ID", model.num_vertices)
    with pytest.raises(OptionError, match=f"correspondence: numbers vertices and triangles below "
                                          f"{model.num_vertices:,}; this model has {model.num_vertices:,} vertices"):
        mmdkit.run(take, warn=lambda *a: None)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(sink, "MAX_CORRESPONDENCE_ID", model.num_vertices + 1)
    assert max(model.num_vertices, len(model.face_vertex_index)) >= model.num_vertices + 1  # triangles: 47,106
    with pytest.raises(OptionError, match="triangles below"):
        mmdkit.run(take, warn=lambda *a: None)
    assert list(tmp_path.iterdir()) == []
