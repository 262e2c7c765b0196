"""MMDPhysics on the real Bullet: falling sphere on the floor, a hanging box chain, Gene at rest,
refused bad joints, per-bone physics flags, blow-up recovery and threaded stepping."""
import dataclasses

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import BuildError
from mmdkit.model.builder import ModelBuilder
from mmdkit.physics import MMDPhysics, _bullet, euler_to_matrix


def rest_bones(model) -> np.ndarray:
    """(B,4,4) float32 rest bone world matrices translate(bone_position)."""
    bw = np.tile(np.eye(4, dtype=np.float32), (len(model.bone_name), 1, 1))
    bw[:, :3, 3] = model.bone_position
    return bw


def joint_reach_ok(phys, body_bind_pos, slack=2.0, stretch=1.0):
    """Every kept joint: |pos_a - pos_b| <= (bind distance + translation-limit span) * stretch + slack.

    Bullet's 6-DOF joints are soft: Gene's cloak weights hang ~93 units below their joint and
    stretch ~10 % under gravity, so real models get stretch=1.2."""
    now, reach = phys.joint_reach(body_bind_pos, stretch=stretch, slack=slack)
    return now <= reach, now, reach


def sphere_model(radius=1.0, height=10.0):
    mb = ModelBuilder("ball")
    mb.add_bone("root", (0, 0, 0))
    mb.add_bone("ball", (0, height, 0), parent=0)
    mb.add_rigid_body("ball", 1, "sphere", (radius, 0, 0), (0, height, 0), mass=1.0, mode=1,
                      linear_damping=0.1, angular_damping=0.1, restitution=0.0, friction=0.8)
    return mb.build()


def test_sphere_falls_and_rests_on_floor():
    model = sphere_model(radius=1.5, height=10.0)
    phys = MMDPhysics(model, floor=True)
    bw = rest_bones(model)
    phys.reset(bw, 0)
    heights = []
    for _ in range(240):
        bw = rest_bones(model)
        phys.step(1 / 60, bw)
        heights.append(bw[1, 1, 3])
    assert heights[10] < 10.0  # it fell
    assert abs(heights[-1] - 1.5) < 0.1  # rests at its radius
    assert phys.driven_bone_mask.tolist() == [False, True]
    assert np.isfinite(bw).all()


@pytest.mark.parametrize("ball_mask, lands", [(0xFFFF, True), (0xFFFF & ~(1 << 3), False)])
def test_collide_mask_says_which_groups_a_body_hits(ball_mask, lands):
    """As stored in PMX/PMD (and read by MMD, saba, three.js): bit g set = collides with group g.
    A ball (group 2) over a table (group 3) lands on it only when its mask has bit 3."""
    mb = ModelBuilder("table")
    mb.add_bone("root", (0, 0, 0))
    mb.add_bone("ball", (0, 10, 0), parent=0)
    mb.add_rigid_body("table", 0, "box", (5, 0.5, 5), (0, 4.5, 0), mode=0, group=3, collide_mask=0xFFFF)
    mb.add_rigid_body("ball", 1, "sphere", (1, 0, 0), (0, 10, 0), mass=1.0, mode=1, group=2,
                      collide_mask=ball_mask, linear_damping=0.1, restitution=0.0)
    model = mb.build()
    phys = MMDPhysics(model, warmup_steps=0)
    phys.reset(rest_bones(model), 0)
    for _ in range(120):
        bw = rest_bones(model)
        phys.step(1 / 60, bw)
    y = bw[1, 1, 3]
    assert (abs(y - 6.0) < 0.2) if lands else (y < 0.0), y


def test_sphere_without_floor_keeps_falling_under_gravity():
    model = sphere_model()
    phys = MMDPhysics(model, floor=False)
    bw = rest_bones(model)
    for _ in range(30):
        phys.step(1 / 60, bw)
    # 0.5 s of free fall at 98 units/s^2, mild damping: ~ -12 units
    assert -13.5 < bw[1, 1, 3] - 10.0 < -6.0


def chain_model(n=4, length=2.0, swing=True, ik_goal=None):
    mb = ModelBuilder("chain")
    mb.add_bone("root", (0, 20, 0))
    for i in range(n):
        mb.add_bone(f"link{i}", (0, 20, (i + 0.5) * length), parent=i)
    mb.add_rigid_body("anchor", 0, "box", (0.5, 0.5, 0.5), (0, 20, 0), mode=0, group=0, collide_mask=0)
    for i in range(n):
        mb.add_rigid_body(f"link{i}", i + 1, "box", (0.2, 0.2, length * 0.4), (0, 20, (i + 0.5) * length),
                          mass=1.0, mode=1, group=1, collide_mask=0)
    for i in range(n):
        mb.add_joint(f"j{i}", i, i + 1, (0, 20, i * length), rotation_lower=(-np.pi, -np.pi, -np.pi),
                     rotation_upper=(np.pi, np.pi, np.pi))
    if ik_goal is not None:  # an IK bone pulling the last link towards ik_goal, every link in the chain
        ik = mb.add_bone("chainIK", ik_goal)
        mb.add_ik(ik, n, list(range(n - 1, 0, -1)))
    return mb.build()


def test_box_chain_swings_and_stays_within_reach():
    model = chain_model()
    phys = MMDPhysics(model)
    bw = rest_bones(model)
    phys.reset(bw, 0)
    bind = phys.body_world[:, :3, 3].copy()
    lowest = []
    for _ in range(90):
        bw = rest_bones(model)
        phys.step(1 / 60, bw)
        lowest.append(phys.body_world[1:, 1, 3].min())
        ok, now, reach = joint_reach_ok(phys, bind, slack=0.3)
        assert ok.all(), (now, reach)
    assert min(lowest) < 20 - 3.0  # the horizontal chain swung down
    assert np.isclose(phys.body_world[0, 1, 3], 20.0)  # static anchor stays with its bone
    assert np.isfinite(bw).all()
    # driven bones: rotation from the body, so the tail link now points down
    assert bw[4, 1, 3] < 20 - 3.0


def test_set_bone_physics_makes_bodies_follow_their_bones():
    model = chain_model()
    phys = MMDPhysics(model)
    bw = rest_bones(model)
    mask = np.ones(len(model.bone_name), bool)
    mask[1:] = False
    phys.set_bone_physics(mask)
    assert not phys.driven_bone_mask.any()
    for _ in range(30):
        bw = rest_bones(model)
        phys.step(1 / 60, bw)
    assert np.allclose(bw, rest_bones(model))  # bones untouched
    assert np.allclose(phys.body_world[1:, 1, 3], 20.0, atol=1e-4)  # bodies followed the bones
    phys.set_bone_physics(np.ones(len(model.bone_name), bool))
    assert phys.driven_bone_mask[1:].all()
    for _ in range(30):
        phys.step(1 / 60, rest_bones(model))
    assert phys.body_world[1:, 1, 3].min() < 19.0  # falling again


def test_bad_joint_index_refused_and_missing_body_dropped():
    model = chain_model(n=2)
    bad = dataclasses.replace(model, joint_body_b=np.array([1, 7], np.int32))
    with pytest.raises(BuildError, match="joint 1 refers to rigid bodies"):
        MMDPhysics(bad)
    dropped = dataclasses.replace(model, joint_body_b=np.array([1, -1], np.int32))
    phys = MMDPhysics(dropped)
    assert phys.world.num_joints == 1
    assert any("1 joints dropped" in w for w in phys.warnings)
    same = dataclasses.replace(model, joint_body_b=np.array([1, 1], np.int32), joint_body_a=np.array([0, 1], np.int32))
    assert MMDPhysics(same).world.num_joints == 1
    with pytest.raises(ValueError, match="bad body pair"):
        phys.world.add_joints(np.array([0], np.int32), np.array([9], np.int32), *(np.zeros((1, 4, 4), np.float32),) * 2,
                              *(np.zeros((1, 3), np.float32),) * 4, np.zeros((1, 6), np.float32))


def test_zero_size_shapes_are_clamped():
    mb = ModelBuilder("tiny")
    mb.add_bone("root", (0, 0, 0))
    mb.add_rigid_body("zero", 0, "box", (0, 0, 0), (0, 5, 0), mode=1)
    model = mb.build()
    phys = MMDPhysics(model)
    assert any("clamped" in w for w in phys.warnings)
    bw = rest_bones(model)
    phys.step(1 / 30, bw)
    assert np.isfinite(bw).all()


def test_blown_up_body_is_reset_to_its_bone():
    model = sphere_model(height=0.0)
    phys = MMDPhysics(model, floor=False)
    bw = rest_bones(model)
    phys.reset(bw, 0)
    far = rest_bones(model)
    far[1, 1, 3] = 1e6  # put the body absurdly far: reset() trusts finite input
    phys.world.reset(np.ascontiguousarray(far[1:2] @ np.eye(4, dtype=np.float32)))
    phys.world.set_kinematic_transforms(np.array([0], np.int32), bw[1:2].copy())
    n = phys.world.step(1 / 60, 10, 1 / 120, phys.blowup_distance)
    assert n == 1
    t = phys.world.get_transforms()
    assert abs(t[0, 1, 3]) < 1.0  # back at its bone
    nan = rest_bones(model)
    nan[1, 0, 3] = np.nan
    phys.world.reset(np.ascontiguousarray(nan[1:2]))  # a non-finite target: the bind frame instead
    assert np.allclose(phys.world.get_transforms()[0], np.eye(4))
    phys.world.reset(np.ascontiguousarray(far[1:2]))
    phys.step(1 / 60, bw)
    assert np.isfinite(bw).all() and phys.blowup_resets == 1 and abs(bw[1, 1, 3]) < 1.0
    assert any("blow-up" in w for w in phys.warnings)


def test_euler_order_is_ry_rx_rz():
    e = np.array([[0.3, -0.7, 1.1]])
    x, y, z = e[0]
    rx = np.array([[1, 0, 0], [0, np.cos(x), -np.sin(x)], [0, np.sin(x), np.cos(x)]])
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rz = np.array([[np.cos(z), -np.sin(z), 0], [np.sin(z), np.cos(z), 0], [0, 0, 1]])
    assert np.allclose(euler_to_matrix(e)[0], ry @ rx @ rz)


def test_gene_rest_pose_120_frames(assets):
    model = mmdkit.load(str(assets / "gene" / "Gene.pmx"))
    phys = MMDPhysics(model)
    bw = rest_bones(model)
    phys.reset(bw, 0)
    bind = phys.body_world[:, :3, 3].copy()
    dyn = model.rigid_body_mode != 0
    for _ in range(120):
        bw = rest_bones(model)
        phys.step(1 / 30, bw)
        assert np.isfinite(bw).all() and np.isfinite(phys.body_world).all()
    ok, now, reach = joint_reach_ok(phys, bind, stretch=1.2)
    assert ok.all(), np.nonzero(~ok)
    assert phys.blowup_resets == 0
    assert phys.driven_bone_mask.sum() == len(set(model.rigid_body_bone[dyn & (model.rigid_body_bone >= 0)]))
    # static bodies stayed on their bones exactly
    st = ~dyn
    assert np.allclose(phys.body_world[st, :3, 3], bind[st], atol=1e-3)


def test_step_async_matches_step(assets):
    model = chain_model()
    p1, p2 = MMDPhysics(model), MMDPhysics(model)
    b1, b2 = rest_bones(model), rest_bones(model)
    for _ in range(20):
        p1.step(1 / 60, b1)
        p2.step_async(1 / 60, b2).result()
    assert np.allclose(b1, b2, atol=1e-5)
    p2.close()


def test_soft_body_pressure_sphere_lands_on_floor():
    # icosahedron
    t = (1 + 5 ** 0.5) / 2
    v = np.array([[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
                  [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]], np.float32)
    v = v / np.linalg.norm(v, axis=1, keepdims=True) * 2 + np.array([0, 6, 0], np.float32)
    f = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
                  [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5],
                  [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]], np.int32)
    z = np.zeros(0, np.float32)
    w = _bullet.World(np.zeros(0, np.int32), np.zeros((0, 3), np.float32), z, z, z, z, z, np.zeros(0, np.int32),
                      np.zeros(0, np.int32), np.zeros(0, bool), np.zeros((0, 4, 4), np.float32), True,
                      np.array([0, -98, 0], np.float32), 10, True)
    s = w.add_soft_body(v, f, mass=1.0, pressure=50.0, linear_stiffness=0.5, damping=0.05, margin=0.05)
    for _ in range(240):
        w.step(1 / 60, 10, 1 / 120, 1e4)
    p = w.soft_node_positions(s)
    assert p.shape == (12, 3) and np.isfinite(p).all()
    assert p[:, 1].min() > -0.2  # on the floor, not through it
    assert p[:, 1].max() > 2.0  # pressure keeps it inflated


def test_reset_warms_up_hanging_bodies(assets):
    model = chain_model()
    phys = MMDPhysics(model, warmup_steps=120)
    bw = rest_bones(model)
    phys.reset(bw)
    assert phys.body_world[1:, 1, 3].min() < 17.0  # hung down during the warm-up
    assert np.allclose(bw, rest_bones(model))  # reset only reads the bones
    phys.reset(bw, 0)
    assert np.allclose(phys.body_world[1:, 1, 3], 20.0, atol=1e-4)


def test_gene_wavefile_300_frames_with_character(assets):
    from mmdkit.runtime import Character

    model = mmdkit.load(str(assets / "gene" / "Gene.pmx"))
    motion = mmdkit.load(str(assets / "wavefile" / "wavefile_v2.vmd"))
    phys = MMDPhysics(model)
    ch = Character(model, motion, world=phys)
    bind = None  # the model's rigid body positions
    # joints between bodies whose bones carry vertices must hold; the helper joints to Gene's
    # invisible cloak weights (錘, hanging 93 units below on a locked joint while the cloak now
    # collides with the legs) stretch like Bullet's soft joints do, ~20 %
    visible = phys.skinned_joint_mask(model)
    assert visible.sum() > 60
    for f in range(300):
        ch.update(f)
        assert np.isfinite(ch.bone_world).all() and np.isfinite(phys.body_world).all()
        ok, now, reach = joint_reach_ok(phys, bind)
        assert ok[visible].all(), (f, np.nonzero(~ok & visible))
        ok, now, reach = joint_reach_ok(phys, bind, stretch=1.5)
        assert ok.all(), (f, np.nonzero(~ok))
    assert phys.blowup_resets == 0
    # driven bones follow their bodies: bone = body @ inverse(offset)
    b = phys.bodies
    drive = b.drive_body[b.drive_mode == 1]
    bones = b.drive_bone[b.drive_mode == 1]
    expect = phys.body_world[drive] @ b.body_offset_inv[drive]
    assert np.allclose(ch.bone_world[bones][:, :3, 3], expect[:, :3, 3], atol=1e-2)


def test_mode2_takes_rotation_from_body_and_translation_from_bone():
    mb = ModelBuilder("m2")
    mb.add_bone("root", (0, 10, 0))
    mb.add_bone("tip", (0, 10, 2), parent=0)
    mb.add_rigid_body("anchor", 0, "sphere", (0.3, 0, 0), (0, 10, 0), mode=0, collide_mask=0)
    mb.add_rigid_body("arm", 1, "box", (0.2, 0.2, 1.0), (0, 10, 3), mode=2, group=1, collide_mask=0)
    mb.add_joint("hinge", 0, 1, (0, 10, 2), rotation_lower=(-3, -3, -3), rotation_upper=(3, 3, 3))
    model = mb.build()
    phys = MMDPhysics(model)
    for _ in range(20):
        bw = rest_bones(model)
        phys.step(1 / 60, bw)
    assert np.allclose(bw[1, :3, 3], model.bone_position[1])  # translation kept from the bone
    rot_body = phys.body_world[1, :3, :3]
    assert np.allclose(bw[1, :3, :3], rot_body, atol=1e-5)  # rotation from the body (offset has none)
    assert not np.allclose(rot_body, np.eye(3), atol=0.1)  # it swung


def test_vmd_physics_flags_switch_bodies_through_character():
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.runtime import Character

    model = chain_model()
    mo = MotionBuilder("chain")
    for i in range(4):  # physics off for the links from frame 0, back on from frame 30
        mo.add_bone_key(f"link{i}", 0, physics=False)
        mo.add_bone_key(f"link{i}", 30, physics=True)
    phys = MMDPhysics(model, warmup_steps=0)
    ch = Character(model, mo.build(), world=phys)
    for f in range(25):
        ch.update(f)
    assert not phys.driven_bone_mask.any()
    assert np.allclose(phys.body_world[1:, 1, 3], 20.0, atol=1e-3)  # following their bones
    for f in range(25, 60):
        ch.update(f)
    assert phys.driven_bone_mask[1:].all()
    assert phys.body_world[1:, 1, 3].min() < 18.0  # simulated again: the chain fell
    assert np.isfinite(ch.bone_world).all()


def test_physics_modes_playing_always_off():
    from mmdkit.runtime import Character

    model = chain_model()
    rest = rest_bones(model)
    tip = model.num_bones - 1
    chars = {m: Character(model, None, world=MMDPhysics(model, warmup_steps=0), physics_mode=m, settle_seconds=0)
             for m in ("playing", "always", "off")}
    for ch in chars.values():
        ch.update(0)
        ch.update(1)
    y = {m: ch.bone_world[tip, 1, 3] for m, ch in chars.items()}
    for _ in range(10):  # paused on frame 1
        for ch in chars.values():
            ch.update(1)
    assert chars["playing"].bone_world[tip, 1, 3] == pytest.approx(y["playing"], abs=1e-5)  # holds
    assert chars["always"].bone_world[tip, 1, 3] < y["always"] - 0.5  # keeps falling
    np.testing.assert_allclose(chars["off"].bone_world, rest, atol=1e-5)  # bones follow the (empty) motion
    with pytest.raises(ValueError):
        Character(model, None, physics_mode="sometimes")


def test_ik_whose_links_are_all_physics_driven_is_skipped_while_physics_runs():
    """MMD skips such solvers: with physics the chain starts from its keyed pose (the reset
    places the bodies there); with physics_mode='off' the same solver bends the chain."""
    from mmdkit.runtime import Character

    model = chain_model(ik_goal=(0, 14, 4))
    tip = 4
    off = Character(model, None, world=MMDPhysics(model, warmup_steps=0), physics_mode="off").update(0)
    assert off.bone_world[tip, 1, 3] < 17.0  # IK pulled the chain down towards the goal
    phys = MMDPhysics(model, warmup_steps=0)
    on = Character(model, None, world=phys, settle_seconds=0).update(0)
    assert on.ik_enabled.tolist() == [0]
    np.testing.assert_allclose(phys.body_world[1:, 1, 3], 20.0, atol=1e-3)  # reset at the unbent pose
    for f in range(1, 40):
        on.update(f)
    assert on.bone_world[tip, 1, 3] < 19.0  # gravity, not IK, moves it now

