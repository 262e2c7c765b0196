"""Headless rendering: reference image, coverage, transparency order, GPU = CPU skinning, outputs."""

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

import mmdkit
from mmdkit.demo import demo_model, demo_motion
from mmdkit.errors import FormatError
from mmdkit.model.builder import ModelBuilder
from mmdkit.runtime import Character
from mmdkit.render.camera import mmd_view, perspective
from mmdkit.render.gl import Renderer, create_context
from mmdkit.render.pipeline import render_still
from mmdkit.model.textures import resolve_texture

DATA = __import__("pathlib").Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def ctx():
    c = create_context()
    yield c
    c.release()


def test_demo_matches_reference_and_covers_frame(ctx):
    img = render_still(demo_model(), size=(160, 120), ctx=ctx).astype(np.int16)
    ref = np.asarray(Image.open(DATA / "demo_rest_160x120.png").convert("RGB"), np.int16)
    assert np.abs(img - ref).mean() < 3.0
    covered = (np.abs(img - 255).sum(axis=2) > 30).mean()
    assert 0.03 < covered < 0.6  # the character is in the picture, not filling it


def _quad(mb, mat, z, color_bone):
    p = [[-1, -1, z], [1, -1, z], [1, 1, z], [-1, 1, z]]
    mb.add_mesh(mat, p, [[0, 0, -1]] * 4, [[0, 0]] * 4, [[0, 2, 1], [0, 3, 2]], [color_bone] * 4)


def test_material_order_with_transparency(ctx):
    mb = ModelBuilder("quads")
    b = mb.add_bone("root", (0, 0, 0))
    red = mb.add_material("red", diffuse=(1, 0, 0, 1), ambient=(0, 0, 0), edge=False, double_sided=True)
    blue = mb.add_material("blue", diffuse=(0, 0, 1, 0.5), ambient=(0, 0, 0), edge=False, double_sided=True)
    _quad(mb, red, 0.5, b)   # behind (MMD: camera on −z)
    _quad(mb, blue, -0.5, b)  # in front, half transparent, drawn second
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
    _quad(mb, shiny, 0.0, b)
    ren = Renderer(mb.build(), (32, 32), 0, ctx=ctx, edges=False, ground_shadow=False)
    eye = np.broadcast_to(np.eye(4, dtype=np.float32), (1, 4, 4))
    light = (0.0, 0.0, 1.0)  # shining along +z: from the camera's side onto the quad
    head_on = ren.render(eye, mmd_view((0, 0, 0), (0, 0, 0), -6), perspective(30, 1.0), light_dir=light)
    oblique = ren.render(eye, mmd_view((0, 0, 0), (0, np.radians(60), 0), -6), perspective(30, 1.0), light_dir=light)
    assert head_on[16, 16].min() > 100
    assert oblique[16, 16].max() < 30


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


def test_pmd_shared_toon_is_taken_from_the_model_folder_first(ctx, tmp_path):
    """MMD resolves a PMD's toon01..10.bmp in the model's folder before its own shared toons."""
    mb = ModelBuilder("toon")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True, toon=0)
    _quad(mb, mat, 0.0, b)
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


def test_texture_paths_stay_inside_model_folder(tmp_path):
    (tmp_path / "Tex").mkdir()
    (tmp_path / "Tex" / "Face.PNG").write_bytes(b"x")
    assert resolve_texture(str(tmp_path), "tex\\face.png").endswith("Face.PNG")
    assert resolve_texture(str(tmp_path), "missing.png") is None
    for bad in ("../secret.png", "/etc/passwd", "tex/../../x.png", "C:\\x.png"):
        with pytest.raises(FormatError, match="leaves the model folder"):
            resolve_texture(str(tmp_path), bad)


def test_cli_render_demo_mp4_and_png(tmp_path):
    import av

    out = tmp_path / "d.mp4"
    r = subprocess.run([sys.executable, "-m", "mmdkit", "render", "--demo", "--frames", "0:9", "--size", "64x48",
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with av.open(str(out)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])]
    assert len(frames) == 10 and frames[0].shape == (48, 64, 3)
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*"))
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # a normal file, not mkstemp's 0600
    folder = tmp_path / "frames"
    r = subprocess.run([sys.executable, "-m", "mmdkit", "render", "--demo", "--frames", "0:2", "--size", "64x48",
                        "--crowd", "3", "-o", str(folder)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["frame_000000.png", "frame_000001.png", "frame_000002.png"]


def test_demo_dances_with_physics_hair():
    from mmdkit.physics import MMDPhysics

    model, motion = demo_model(), demo_motion(2.0)
    ch = Character(model, motion, MMDPhysics(model))
    tip = model.bone_index("髪先")
    ys = []
    for f in range(60):
        ch.update(f)
        ys.append(ch.bone_world[tip, :3, 3].copy())
    ys = np.array(ys)
    assert np.isfinite(ys).all()
    assert np.ptp(ys[:, 0]) > 0.1  # the hair swings with the sway
    assert ch.morph_weight[model.morph_index("歌う")] >= 0


@pytest.mark.parametrize("name", ["sdef-two-bone-elbow", "qdef-twist-cylinder", "mixed-deform-types",
                                  "bdef4-twist-cylinder"])
def test_gpu_sdef_qdef_equal_cpu(ctx, assets, name):
    from mmdkit.render.camera import auto_view
    from mmdkit.skinning.cpu import CpuSkinner
    from mmdkit.skinning.reference import random_rigid

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


def test_ground_shadow_and_vmd_light_and_audio(tmp_path, ctx):
    import math
    import wave

    import av

    # ground shadow: pixels below the feet darken only when it is on
    model = demo_model()
    on = render_still(model, size=(160, 120), ctx=ctx)
    ren = Renderer(model, (160, 120), 4, ctx=ctx, ground_shadow=False)
    from mmdkit.render.camera import auto_view

    view, d = auto_view(model.vertex_position.min(0), model.vertex_position.max(0), 30.0, 160 / 120)
    off = ren.render(np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4)), view,
                     perspective(30.0, 160 / 120), eye_distance=d)
    grey = lambda img: ((np.abs(img.astype(int) - 153) < 12).all(axis=2)).sum()  # noqa: E731
    assert grey(on) > grey(off) + 20
    # a VMD light changes the picture; an audio track is muxed in
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.render.pipeline import render_motion

    mo = MotionBuilder()
    mo.add_light_key(0, (1.0, 0.3, 0.3), (0.0, -1.0, 0.0))
    wav = tmp_path / "tone.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(b"".join(int(8000 * math.sin(i / 10)).to_bytes(2, "little", signed=True)
                               for i in range(22050)))
    out = tmp_path / "lit.mp4"
    render_motion(model, demo_motion(1.0), str(out), frames=range(3), camera=mo.build(), size=(64, 48),
                  physics=False, progress=False, audio=str(wav))
    with av.open(str(out)) as c:
        assert len(c.streams.audio) == 1
        frame = next(c.decode(c.streams.video[0])).to_ndarray(format="rgb24")
    plain = tmp_path / "plain.mp4"
    render_motion(model, demo_motion(1.0), str(plain), frames=range(3), size=(64, 48), physics=False,
                  progress=False)
    with av.open(str(plain)) as c:
        frame0 = next(c.decode(c.streams.video[0])).to_ndarray(format="rgb24")
    assert np.abs(frame.astype(int) - frame0.astype(int)).mean() > 1.0


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


def test_property_keys_hide_the_model(tmp_path):
    """MMD's 表示 off: on hidden frames nothing of the model is drawn (not even its shadow)."""
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.render.pipeline import render_motion

    mb = MotionBuilder()
    mb.add_property_key(0, visible=True)
    mb.add_property_key(1, visible=False)
    motion = mb.build()
    ch = Character(demo_model(), motion)
    assert ch.update(0).visible and not ch.update(1).visible
    out = tmp_path / "frames"
    render_motion(demo_model(), motion, str(out), frames=[0, 1], size=(64, 48), msaa=0, physics=False,
                  progress=False, self_shadow=True)
    shown, hidden = (np.asarray(Image.open(out / f"frame_{i:06d}.png").convert("RGB")) for i in (0, 1))
    assert (shown < 200).any()
    assert hidden.min() >= 250  # background only


def test_cli_renders_a_vpd_pose_as_one_picture(tmp_path):
    from mmdkit.animation.motion import Pose

    mmdkit.save(demo_model(), tmp_path / "demo.pmx")
    pics = {}
    for name, q in (("rest", [0, 0, 0, 1]), ("tilt", [0, 0, 0.5, 0.8660254])):  # head tilted 60° about z
        mmdkit.save(Pose(bone_name=("頭",), bone_translation=np.zeros((1, 3), np.float32),
                         bone_rotation=np.array([q], np.float32), morph_name=(), morph_weight=np.zeros(0, np.float32)),
                    tmp_path / f"{name}.vpd")
        out = tmp_path / name
        r = subprocess.run([sys.executable, "-m", "mmdkit", "render", str(tmp_path / "demo.pmx"),
                            str(tmp_path / f"{name}.vpd"), "--size", "64x64", "--no-physics", "-o", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert [p.name for p in out.iterdir()] == ["frame_000000.png"]  # a pose: one picture
        pics[name] = np.asarray(Image.open(out / "frame_000000.png").convert("RGB")).astype(int)
    assert np.abs(pics["tilt"] - pics["rest"]).mean() > 0.5  # the pose shows


def _textured_quad_model(tmp_path, textures=("tex.png",)):
    """A one-quad PMX in tmp_path whose materials use ``textures`` (none of them written)."""
    mb = ModelBuilder("textured")
    b = mb.add_bone("root", (0, 0, 0))
    for name in textures:
        mat = mb.add_material(name, diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True,
                              texture=name)
        _quad(mb, mat, 0.0, b)
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


def test_msaa_the_gl_cannot_do_is_an_option_error(ctx):
    from mmdkit.errors import OptionError

    model = demo_model()
    for bad in (3, -4, ctx.max_samples * 2):
        with pytest.raises(OptionError, match=f"msaa: {bad}"):
            Renderer(model, (32, 32), bad, ctx=ctx)
    for good in (0, 1, 2, ctx.max_samples):
        Renderer(model, (32, 32), good, ctx=ctx)


def _demo_render(out, frames, **kw):
    from mmdkit.render.pipeline import render_motion

    return render_motion(demo_model(), demo_motion(1.0), str(out), frames=frames, size=(32, 24), msaa=0,
                         physics=False, progress=False, **kw)


def test_output_path_chooses_picture_video_or_folder(tmp_path):
    """A .png of one frame is one picture; the containers PyAV writes are videos, not folders."""
    import av

    from mmdkit.errors import OptionError

    _demo_render(tmp_path / "still.png", [12])
    assert (tmp_path / "still.png").is_file()
    assert Image.open(tmp_path / "still.png").size == (32, 24)
    with pytest.raises(OptionError, match="one picture but 2 frames"):
        _demo_render(tmp_path / "two.png", [0, 1])
    assert not (tmp_path / "two.png").exists()
    for ext, codec in ((".gif", "gif"), (".webm", "vp9"), (".mkv", "h264"), (".avi", "mpeg4"), (".mov", "h264")):
        out = tmp_path / f"clip{ext}"
        _demo_render(out, range(3))
        assert out.is_file(), ext
        with av.open(str(out)) as c:
            assert c.streams.video[0].codec_context.name == codec
            assert sum(1 for _ in c.decode(c.streams.video[0])) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_png_folder_is_refreshed_and_named_by_frame_number(tmp_path):
    out = tmp_path / "frames"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "frame_00007.png").write_bytes(b"an old render's frame")
    _demo_render(out, range(330, 334))
    _demo_render(out, [330, 331])
    assert sorted(p.name for p in out.iterdir()) == ["frame_000330.png", "frame_000331.png", "notes.txt"]


def test_fps_is_real_time():
    """At 60 fps the 30-frames-a-second motion is sampled every half frame."""
    from mmdkit.animation.frames import output_frames

    np.testing.assert_array_equal(output_frames(330, 332, 60), [330, 330.5, 331, 331.5, 332])
    np.testing.assert_array_equal(output_frames(0, 2, 15), [0, 2])


def test_default_frames_follow_fps(tmp_path):
    from mmdkit.render.video import frame_file_names

    motion = demo_motion(1.0)
    stats = _demo_render(tmp_path / "f", None, fps=60)
    assert stats["frames"] == 2 * int(motion.last_frame) + 1
    names = sorted(p.name for p in (tmp_path / "f").iterdir())
    assert names == frame_file_names(np.arange(stats["frames"]) / 2) and "frame_000000.500.png" in names


def _tone_after_silence(path, rate=22050):
    """1 s of silence, then 1 s of a loud tone (mono 16-bit WAV)."""
    import math
    import wave

    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(2 * rate) + b"".join(int(12000 * math.sin(i / 5)).to_bytes(2, "little", signed=True)
                                                 for i in range(rate)))


def _audio_rms(path, seconds):
    import av

    with av.open(str(path)) as c:
        st = c.streams.audio[0]
        chunks = [f.to_ndarray().reshape(-1) for f in c.decode(st)]
    data = np.concatenate(chunks)[:int(seconds * st.rate)]  # fltp: the first channel comes first per frame
    return float(np.sqrt(np.mean(data.astype(np.float64) ** 2)))


def test_audio_starts_at_the_first_rendered_frame(tmp_path):
    wav = tmp_path / "tone.wav"
    _tone_after_silence(wav)
    _demo_render(tmp_path / "late.mp4", range(30, 45), audio=str(wav))  # 1.0 s .. 1.5 s: the tone
    _demo_render(tmp_path / "early.mp4", range(0, 15), audio=str(wav))  # 0 .. 0.5 s: silence
    assert _audio_rms(tmp_path / "late.mp4", 0.3) > 0.1
    assert _audio_rms(tmp_path / "early.mp4", 0.3) < 0.01


def test_audio_mistakes_are_one_line_option_errors(tmp_path):
    from mmdkit.errors import OptionError

    wav = tmp_path / "tone.wav"
    _tone_after_silence(wav)
    text = tmp_path / "notes.wav"
    text.write_text("not a sound")
    for out, audio, what in ((tmp_path / "frames", wav, "sound needs a video"),
                             (tmp_path / "a.mp4", text, "not an audio file"),
                             (tmp_path / "b.gif", wav, "no sound")):
        with pytest.raises(OptionError, match=what) as e:
            _demo_render(out, range(2), audio=str(audio))
        assert "\n" not in str(e.value) and str(e.value).startswith("audio: ")
        assert not out.exists()


def test_material_table_resolves_pmd_rules(tmp_path):
    """PMD-only rules live in the table, so a backend never asks which format a model came from."""
    from mmdkit.model.materials import material_table

    mb = ModelBuilder("rules")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 1, 1, 0.98), edge=False, toon=2, texture="t.png")
    _quad(mb, mat, 0.0, b)
    mmdkit.save(mb.build(), tmp_path / "m.pmd")
    mmdkit.save(mb.build(), tmp_path / "m.pmx")
    pmd, pmx = (material_table(mmdkit.load(tmp_path / f"m.{e}")) for e in ("pmd", "pmx"))
    assert pmd.images[0].texture == pmx.images[0].texture == "t.png"
    assert pmd.images[0].toon == "toon03.bmp" and pmd.images[0].toon_optional and pmd.images[0].toon_builtin == 3
    assert pmx.images[0].toon is None and pmx.images[0].toon_builtin == 3
    assert not pmd.culls(0, 0.5) and pmx.culls(0, 0.5)  # PMD: translucent materials draw both sides
    assert not pmd.casts_self_shadow(0, 0.98) and pmd.casts_self_shadow(0, 1.0)


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


def test_api_arguments_out_of_range_are_option_errors(ctx, tmp_path):
    from mmdkit.errors import OptionError
    from mmdkit.animation.frames import output_frames

    for kw, what in ((dict(crowd=0), "crowd"), (dict(fps=0.0), "fps"), (dict(fps=float("nan")), "fps")):
        with pytest.raises(OptionError, match=what):
            _demo_render(tmp_path / "x.mp4", None, **kw)
    with pytest.raises(OptionError, match="frames: 0..1e\\+09 at 30 fps selects 1,000,000,001 frames"):
        output_frames(0, 1e9, 30)
    with pytest.raises(OptionError, match="size: 0x10"):
        Renderer(demo_model(), (0, 10), 0, ctx=ctx)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["Gene", "sdef-two-bone-elbow", "qdef-twist-cylinder", "mixed-deform-types"])
def test_gpu_skinned_vertices_equal_cpu_for_every_character(ctx, assets, name):
    """The compute pass skins each character of a crowd with its own bones and vertex morph
    offsets, crowd offset added: read back, it equals the CPU skinner within float32 rounding."""
    from mmdkit.skinning.cpu import CpuSkinner
    from mmdkit.skinning.reference import random_rigid

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
    Image.fromarray(np.concatenate([np.full((8, 8, 3), (230, 20, 20), np.uint8),
                                    np.full((8, 8, 3), (20, 20, 230), np.uint8)], axis=1)).save(tmp_path / "rb.png")
    mb = ModelBuilder("uv")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True,
                          texture="rb.png")
    p = [[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]]
    first = mb.add_mesh(mat, p, [[0, 0, -1]] * 4, [[0.1, 0.1], [0.4, 0.1], [0.4, 0.9], [0.1, 0.9]],
                        [[0, 2, 1], [0, 3, 2]], [b] * 4)
    mb.add_uv_morph("blue", np.arange(first, first + 4), [[0.5, 0, 0, 0]] * 4)
    mmdkit.save(mb.build(), tmp_path / "uv.pmx")
    model = mmdkit.load(tmp_path / "uv.pmx")
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
