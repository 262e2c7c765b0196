"""The automatic camera frames what the character's motion sweeps (not its rest pose), and the
demo's floor lies under the character with the ground shadow on it."""

from __future__ import annotations

import numpy as np
from PIL import Image

from mmdkit.animation.builder import MotionBuilder
from mmdkit.demo import demo_model
from mmdkit.render.camera import fit_view, perspective
from mmdkit.render.framing import motion_box, sample_frames
from mmdkit.render.pipeline import render_motion
from mmdkit.runtime import pose


def _far_walk():
    """The box figure carried far from the origin: センター goes 40 units right and 30 back, then
    to 30 left and 20 forward (MMD units)."""
    mb = MotionBuilder()
    for frame, at in ((0, (40.0, 0.0, 30.0)), (20, (40.0, 0.0, 30.0)), (40, (-30.0, 0.0, -20.0))):
        mb.add_bone_key("センター", frame, translation=at)
    return mb.build()


def _ink(img: np.ndarray) -> np.ndarray:
    return np.abs(img.astype(int) - 255).sum(axis=2) > 60


def test_fit_view_sees_every_corner_within_the_fill():
    for lo, hi, aspect in (((-8, 0, -2), (8, 20, 1.6), 16 / 9), ((-11, -0.5, -8.5), (9, 24, 5.7), 16 / 9),
                           ((-20, 0, -2), (20, 5, 2), 1.0), ((100, 0, 50), (101, 1000, 60), 0.5)):
        view, dist = fit_view(lo, hi, 30.0, aspect, fill=0.9)
        corners = np.array([[x, y, z, 1.0] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        clip = corners @ (perspective(30.0, aspect) @ view).T
        ndc = clip[:, :2] / clip[:, 3:]
        assert (clip[:, 3] > 0).all() and np.abs(ndc).max() <= 0.9 + 1e-6
        assert np.abs(ndc).max() > 0.85  # as tight as asked: the box fills the picture
        assert dist > 0


def test_motion_box_holds_every_posed_bone_of_a_far_motion():
    model, motion = demo_model(), _far_walk()
    frames = np.arange(0.0, 41.0)
    lo, hi = motion_box(model, motion, frames)
    assert lo[0] < -29 and hi[0] > 39 and lo[2] < -19 and hi[2] > 29  # where it went, not the rest pose
    view, _ = fit_view(lo, hi, 30.0, 16 / 9)
    proj = perspective(30.0, 16 / 9)
    world = pose(model, motion, frames)["bone_world"][:, :, :3, 3].reshape(-1, 3).astype(np.float64)
    clip = np.c_[world, np.ones(len(world))] @ (proj @ view).T
    assert (clip[:, 3] > 0).all() and (np.abs(clip[:, :2] / clip[:, 3:]) <= 1.0).all()
    assert len(sample_frames(np.arange(1000.0), 96)) == 96 and sample_frames(np.arange(1000.0))[-1] == 999


def test_rendered_character_stays_in_the_picture_far_from_the_origin(tmp_path):
    """Rendered, the box figure is in every frame of its walk far from the origin (the old camera
    framed its rest pose at the origin and lost it)."""
    out = tmp_path / "frames"
    render_motion(demo_model(), _far_walk(), str(out), frames=[0, 20, 30, 40], size=(96, 54), msaa=0,
                  physics=False, ground_shadow=False, progress=False)
    for p in sorted(out.iterdir()):
        ink = _ink(np.asarray(Image.open(p).convert("RGB")))
        assert ink.mean() > 0.002, p.name
        cols = np.flatnonzero(ink.any(axis=0))
        assert cols[0] > 0 and cols[-1] < ink.shape[1] - 1, p.name  # not cut by the picture's edge


def test_floor_under_the_character_with_the_shadow_on_it(tmp_path):
    model = demo_model()
    mb = MotionBuilder()
    mb.add_bone_key("センター", 0)
    pictures = {}
    for floor in (False, True):
        out = tmp_path / f"floor{floor}.png"
        render_motion(model, mb.build(), str(out), frames=[0], size=(96, 54), msaa=0, physics=False,
                      progress=False, floor=floor)
        pictures[floor] = np.asarray(Image.open(out).convert("RGB")).astype(int)
    corners = np.concatenate([pictures[False][-3:, :12], pictures[False][-3:, -12:]], axis=1)
    assert (corners == 255).all()  # no floor: white beside the feet
    floor_grey = np.concatenate([pictures[True][-3:, :12], pictures[True][-3:, -12:]], axis=1).mean(axis=2)
    assert ((floor_grey > 150) & (floor_grey < 245)).mean() > 0.9  # a pale floor
    sky = np.concatenate([pictures[True][:3, :12], pictures[True][:3, -12:]], axis=1)
    assert (sky >= 250).all()  # the sky above stays the background
    shadow = (np.abs(pictures[True] - 153) < 12).all(axis=2)  # MMD's ground shadow colour
    assert shadow.sum() > 10


def test_motion_box_of_a_bare_skeleton_holds_its_posed_bones(assets):
    import mmdkit
    from mmdkit.demo import demo_motion

    model = mmdkit.load(assets / "fixtures" / "nanoem" / "test.pmx")
    assert model.num_vertices == 0
    motion = demo_motion()
    frames = np.arange(0.0, 61.0, 3.0)
    lo, hi = motion_box(model, motion, frames)
    world = pose(model, motion, frames)["bone_world"][:, :, :3, 3].reshape(-1, 3)
    assert (world >= lo - 1e-4).all() and (world <= hi + 1e-4).all()
    assert (hi - lo)[1] > 15  # a character's height, not a point


def test_the_automatic_camera_sees_a_character_facing_plus_z_from_its_front(assets):
    """MMD characters face −Z (left leg at +x); a VRM 0.x file faces +Z: the camera turns 180°."""
    import mmdkit
    from mmdkit.render.framing import facing_yaw

    assert facing_yaw(mmdkit.load(assets / "gene" / "Gene_light.pmx")) == 0.0
    assert facing_yaw(mmdkit.load(assets / "rigs" / "vrm0" / "Godette_vrm_v4.vrm")) == 180.0
    assert facing_yaw(mmdkit.load(assets / "rigs" / "vrm1" / "debug_robot.vrm")) == 0.0
