"""The blow-up guard (issue #12 item 7): hostile set-ups never put NaN into bone_world or the
bodies; the guard measures from where each body's bone puts it, not from the origin."""

import dataclasses

import numpy as np

from mmdkit.model.builder import ModelBuilder
from mmdkit.physics import MMDPhysics


def rest_bones(model) -> np.ndarray:
    bw = np.tile(np.eye(4, dtype=np.float32), (len(model.bone_name), 1, 1))
    bw[:, :3, 3] = model.bone_position
    return bw


def ball_model(height=10.0):
    """A root bone and one free dynamic ball (no floor, no joints) on bone 1."""
    mb = ModelBuilder("ball")
    mb.add_bone("root", (0, 0, 0))
    mb.add_bone("ball", (0, height, 0), parent=0)
    mb.add_rigid_body("ball", 1, "sphere", (1.0, 0, 0), (0, height, 0), mass=1.0, mode=1,
                      linear_damping=0.0, angular_damping=0.0)
    return mb.build()


def pendulum_model():
    """A kinematic anchor on the root and two dynamic links hanging from it by joints."""
    mb = ModelBuilder("pendulum")
    mb.add_bone("root", (0, 20, 0))
    mb.add_bone("a", (0, 18, 0), parent=0)
    mb.add_bone("b", (0, 16, 0), parent=1)
    mb.add_rigid_body("anchor", 0, "box", (0.5, 0.5, 0.5), (0, 20, 0), mode=0, collide_mask=0)
    mb.add_rigid_body("a", 1, "box", (0.3, 0.8, 0.3), (0, 18, 0), mode=1, group=1, collide_mask=0)
    mb.add_rigid_body("b", 2, "box", (0.3, 0.8, 0.3), (0, 16, 0), mode=1, group=1, collide_mask=0)
    lim = dict(rotation_lower=(-1, -1, -1), rotation_upper=(1, 1, 1))
    mb.add_joint("ja", 0, 1, (0, 19, 0), **lim)
    mb.add_joint("jb", 1, 2, (0, 17, 0), **lim)
    return mb.build()


def test_a_body_flung_thousands_of_units_near_the_origin_is_reset():
    model = ball_model(height=0.0)
    phys = MMDPhysics(model)
    bw = rest_bones(model)
    phys.reset(bw, 0)
    far = bw[1:2].copy()
    far[0, 0, 3] = 9000.0  # within 1e4 of the origin, but 9,000 units from its bone
    phys.world.reset(far)
    phys.step(1 / 30, bw)
    assert phys.blowup_resets == 1
    assert np.linalg.norm(bw[1, :3, 3]) < 1.0


def test_a_character_far_from_the_origin_keeps_its_physics():
    model = ball_model(height=10.0)
    drops = []
    for offset in (0.0, 5.0e4):  # 50,000 units away: beyond the old 1e4 limit
        phys = MMDPhysics(model)
        bw = rest_bones(model)
        bw[:, 0, 3] += offset
        phys.reset(bw, 0)
        for _ in range(10):
            frame = rest_bones(model)
            frame[:, 0, 3] += offset
            phys.step(1 / 30, frame)
        assert phys.blowup_resets == 0
        drops.append(10.0 - frame[1, 1, 3])
    assert drops[0] > 3.0  # the ball falls freely for 1/3 s
    assert abs(drops[1] - drops[0]) < 0.05  # the same far away


def test_non_finite_bones_and_model_values_never_reach_the_bodies():
    model = pendulum_model()
    nan = np.float32(np.nan)
    hostile = dataclasses.replace(
        model,
        rigid_body_position=np.array([[0, 20, 0], [nan, 18, 0], [0, 16, 0]], np.float32),
        rigid_body_rotation=np.array([[0, 0, 0], [0, np.inf, 0], [0, 0, 0]], np.float32),
        rigid_body_linear_damping=np.array([0.5, nan, 0.5], np.float32),
        rigid_body_friction=np.array([nan, 0.5, 0.5], np.float32),
        joint_translation_upper=np.array([[nan, 0, 0], [0, 0, 0]], np.float32),
        joint_position=np.array([[0, 19, 0], [0, nan, 0]], np.float32))
    phys = MMDPhysics(hostile)
    text = " ".join(phys.warnings)
    assert "rigid body positions non-finite" in text and "1 joints dropped" in text
    assert np.isfinite(phys.bodies.body_bind).all() and np.isfinite(phys.bodies.body_offset_inv).all()
    phys.reset(rest_bones(model), 0)
    for f in range(30):
        bw = rest_bones(model)
        if f % 3 == 0:
            bw[0] = nan  # the anchor's bone (kinematic body) and ...
        if f % 5 == 0:
            bw[1, 1, 3] = np.inf  # ... a driven bone arrive non-finite
        phys.step(1 / 30, bw)
        assert np.isfinite(phys.body_world).all(), f
        assert np.isfinite(bw[1:]).all(), f  # driven bones come from finite bodies


def test_soft_body_that_goes_non_finite_returns_to_its_rest_shape():
    from mmdkit.formats.pmx import SoftBodyRecord

    mb = ModelBuilder("cloth")
    mb.add_bone("root", (0, 10, 0))
    mb.add_material("cloth")
    pos = np.array([[x, 10.0, z] for z in range(3) for x in range(3)], np.float32)
    faces = [[a, a + 1, a + 3] for a in (0, 1, 3, 4)] + [[a + 1, a + 4, a + 3] for a in (0, 1, 3, 4)]
    mb.add_mesh(0, pos, np.tile([0, 1, 0], (9, 1)), np.zeros((9, 2)), np.array(faces), np.zeros(9, int))
    mb.add_rigid_body("holder", 0, "box", (0.3, 0.3, 0.3), (0, 10, 0), mode=0)
    cfg = (0.0, float("nan"), 0.0, 0.0, 0.0, 1.0, 0.2, 0.0, 1.0, 0.1, 1.0, 0.7)  # damping NaN
    rec = SoftBodyRecord(name="cloth", shape=0, material=0, total_mass=1.0, collision_margin=0.05,
                         config=cfg, iteration=(0, 4, 0, 4), material_coef=(0.9, 0.9, 0.9))
    phys = MMDPhysics(dataclasses.replace(mb.build(), soft_bodies=(rec,)))
    bw = np.tile(np.eye(4, dtype=np.float32), (1, 1, 1))
    bw[0, :3, 3] = (0, 10, 0)
    phys.reset(bw, 0)
    for _ in range(10):
        phys.step(1 / 30, bw)
        assert np.isfinite(phys.soft_body_positions(0)).all()
    assert phys.blowup_resets > 0
    assert np.isfinite(phys.body_world).all()
