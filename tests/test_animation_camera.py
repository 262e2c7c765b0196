"""Camera sampling: Euler lerp (multi-turn survives), cuts at one-frame gaps, light lerp."""

import math

import numpy as np

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.animation.camera import sample_camera, sample_light, sample_shadow


def test_camera_lerp_and_cut():
    mo = MotionBuilder()
    mo.add_camera_key(0, -40, (0, 10, 0), (0, 0, 0), fov=30)
    mo.add_camera_key(10, -20, (0, 10, 0), (0, 4 * math.pi, 0), fov=50)  # two full turns
    mo.add_camera_key(11, -60, (5, 0, 0), (0, 0, 0), fov=20)  # a cut
    cam = sample_camera(mo.build(), [0, 5, 10, 10.5, 11, 20])
    assert cam["distance"][1] == -30
    assert abs(cam["rotation"][1, 1] - 2 * math.pi) < 1e-5  # Euler lerp, not quaternion
    assert cam["fov"][1] == 40
    # across the one-frame gap the value holds, then jumps
    assert cam["distance"][3] == -20
    assert cam["distance"][4] == -60 and cam["distance"][5] == -60
    assert cam["perspective"].all()


def test_light_and_empty():
    mo = MotionBuilder()
    mo.add_light_key(0, (1, 1, 1), (0, -1, 0))
    mo.add_light_key(10, (0, 0, 0), (1, 0, 0))
    motion = mo.build()
    light = sample_light(motion, [5])
    np.testing.assert_allclose(light["color"][0], [0.5, 0.5, 0.5])
    assert sample_camera(motion, [0]) is None


def test_self_shadow_keys_hold_until_the_next_key():
    mb = MotionBuilder()
    mb.add_shadow_key(10, mode=0, distance=0.1)  # listed out of order on purpose
    mb.add_shadow_key(0, mode=1, distance=0.05)
    mb.add_shadow_key(20, mode=2, distance=0.2)
    s = sample_shadow(mb.build(), [0, 9.5, 10, 15, 20, 99])
    assert s["mode"].tolist() == [1, 1, 0, 0, 2, 2]
    np.testing.assert_allclose(s["distance"], [0.05, 0.05, 0.1, 0.1, 0.2, 0.2], rtol=1e-6)
    assert sample_shadow(MotionBuilder().build(), [0]) is None


def test_has_camera_tells_a_camera_file_from_a_dance(tmp_path):
    dance = MotionBuilder()
    dance.add_bone_key("センター", 0)
    dance.add_light_key(0, (1, 1, 1), (0, -1, 0))
    cam = MotionBuilder()
    cam.add_camera_key(0, -40, (0, 10, 0), (0, 0, 0))
    p = tmp_path / "cam.vmd"
    mmdkit.save(cam.build(), p)
    assert not dance.build().has_camera and mmdkit.load(p).has_camera
    assert not mmdkit.Motion().has_camera
