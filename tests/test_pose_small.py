"""Pose behaviour on small models built in code: append, IK (knee, limits, switch), curves, morphs."""

import math

import numpy as np
import pytest

from mmdkit.animation.sampling import bezier_weight
from mmdkit.animation.builder import MotionBuilder
from mmdkit.model.builder import ModelBuilder
from mmdkit.runtime import Character, pose

KNEE = ((-math.pi, 0, 0), (-0.0087, 0, 0))


def leg_model(loop_count=40):
    mb = ModelBuilder("leg")
    root = mb.add_bone("センター", (0, 10, 0), translatable=True)
    hip = mb.add_bone("左足", (0, 10, 0), root)
    # the knee sits a little forward, as in real models: CCD turns a link about target × goal,
    # and a perfectly straight leg pulled along its own line gives it no axis (MMD leaves it)
    knee = mb.add_bone("左ひざ", (0, 5, -0.1), hip)
    ankle = mb.add_bone("左足首", (0, 0, 0), knee)
    ik = mb.add_bone("左足ＩＫ", (0, 0, 0), -1, translatable=True)
    mb.add_ik(ik, ankle, [(knee, *KNEE), hip], loop_count=loop_count, limit_angle=2.0)
    return mb.build(), dict(root=root, hip=hip, knee=knee, ankle=ankle, ik=ik)


def world_pos(ch, b):
    return ch.bone_world[b, :3, 3].astype(np.float64)


def length_kept(ch, model, a, b):
    """|world(a) − world(b)| equals the rest distance of the two bones."""
    rest = np.linalg.norm(model.bone_position[a].astype(np.float64) - model.bone_position[b])
    return abs(np.linalg.norm(world_pos(ch, a) - world_pos(ch, b)) - rest) < 1e-4


def test_rest_pose_is_bind_pose():
    model, _ = leg_model()
    ch = Character(model).update(0)
    np.testing.assert_allclose(ch.bone_skin, np.broadcast_to(np.eye(4), ch.bone_skin.shape), atol=1e-6)
    np.testing.assert_allclose(ch.bone_world[:, :3, 3], model.bone_position, atol=1e-6)


def test_knee_bends_forward_and_foot_reaches_target():
    model, b = leg_model()
    mo = MotionBuilder()
    mo.add_bone_key("左足ＩＫ", 0, translation=(0, 3, 0))
    ch = Character(model, mo.build()).update(0)
    # the foot reaches the raised goal; the knee goes forward (MMD forward is -Z)
    assert np.linalg.norm(world_pos(ch, b["ankle"]) - np.array([0, 3, 0])) < 1e-3
    assert world_pos(ch, b["knee"])[2] < -1.0
    # bone lengths are kept
    assert length_kept(ch, model, b["knee"], b["hip"]) and length_kept(ch, model, b["ankle"], b["knee"])


def test_corrupt_ik_loop_count_is_capped():
    from mmdkit.pose.rig import IK_MAX_LOOPS

    model, b = leg_model(loop_count=2**31 - 1)  # a lying file must not hang posing
    mo = MotionBuilder()
    mo.add_bone_key("左足ＩＫ", 0, translation=(3, -5, 2))  # out of reach: every loop runs
    ch = Character(model, mo.build())
    assert ch.rig.ik_loop.tolist() == [IK_MAX_LOOPS]
    ch.update(0)
    assert np.isfinite(ch.bone_world).all()
    assert model.ik_loop_count[0] == 2**31 - 1  # the model keeps the file's value (written back as is)


def test_ik_stops_at_limits_when_unreachable():
    model, b = leg_model()
    mo = MotionBuilder()
    mo.add_bone_key("左足ＩＫ", 0, translation=(0, -5, 0))  # 5 below the straight leg
    ch = Character(model, mo.build()).update(0)
    knee_local = ch.state.bone_local_q[b["knee"]]
    angle = 2 * math.atan2(knee_local[0], knee_local[3])
    assert KNEE[0][0] - 1e-6 <= angle <= KNEE[1][0] + 1e-6
    # leg points straight down as far as it can
    assert world_pos(ch, b["ankle"])[1] < 0.01


def test_ik_switched_off_by_property_key():
    model, b = leg_model()
    mo = MotionBuilder()
    mo.add_bone_key("左足ＩＫ", 0, translation=(0, 3, 0))
    mo.add_property_key(0, ik={"左足ＩＫ": True})
    mo.add_property_key(10, ik={"左足ＩＫ": False})
    ch = Character(model, mo.build())
    ch.update(5)
    assert world_pos(ch, b["ankle"])[1] > 2.9
    ch.update(12)
    np.testing.assert_allclose(world_pos(ch, b["ankle"]), [0, 0, 0], atol=1e-5)


def test_append_rotation_ratio_and_negative():
    mb = ModelBuilder("app")
    src = mb.add_bone("src", (0, 0, 0))
    half = mb.add_bone("half", (1, 0, 0), append_parent=src, append_ratio=0.5, append_rotation=True)
    neg = mb.add_bone("neg", (2, 0, 0), append_parent=src, append_ratio=-1.0, append_rotation=True)
    chain = mb.add_bone("chain", (3, 0, 0), append_parent=half, append_ratio=1.0, append_rotation=True)
    model = mb.build()
    mo = MotionBuilder()
    a = math.radians(60)
    mo.add_bone_key("src", 0, rotation=(0, math.sin(a / 2), 0, math.cos(a / 2)))
    ch = Character(model, mo.build()).update(0)

    def yaw(b):
        r = ch.bone_world[b, :3, :3]
        return math.degrees(math.atan2(r[0, 2], r[0, 0]))

    assert yaw(src) == pytest.approx(60, abs=1e-3)
    assert yaw(half) == pytest.approx(30, abs=1e-3)
    assert yaw(neg) == pytest.approx(-60, abs=1e-3)
    assert yaw(chain) == pytest.approx(30, abs=1e-3)  # appended bone as a source: its append result


def test_translation_append_includes_keyed_translation():
    mb = ModelBuilder("appt")
    src = mb.add_bone("src", (0, 0, 0), translatable=True)
    dst = mb.add_bone("dst", (5, 0, 0), append_parent=src, append_ratio=0.5, append_translation=True)
    mo = MotionBuilder()
    mo.add_bone_key("src", 0, translation=(0, 4, 0))
    ch = Character(mb.build(), mo.build()).update(0)
    np.testing.assert_allclose(ch.bone_world[dst, :3, 3], [5, 2, 0], atol=1e-6)


def test_curve_of_later_key_shapes_segment():
    mb = ModelBuilder("c")
    mb.add_bone("b", (0, 0, 0), translatable=True)
    model = mb.build()
    ease = {"x": (127, 0, 127, 0)}  # slow start
    for first_curve in (None, {"x": (0, 127, 0, 127)}):
        mo = MotionBuilder()
        mo.add_bone_key("b", 0, translation=(0, 0, 0), interpolation=first_curve)
        mo.add_bone_key("b", 10, translation=(10, 0, 0), interpolation=ease)
        ch = Character(model, mo.build()).update(5)
        expect = 10 * bezier_weight(1.0, 0.0, 1.0, 0.0, 0.5)
        assert ch.bone_world[0, 0, 3] == pytest.approx(expect, abs=1e-4)
        assert ch.bone_world[0, 0, 3] < 2.0


def test_physics_flag_bytes_do_not_change_curves():
    mb = ModelBuilder("c")
    mb.add_bone("b", (0, 0, 0), translatable=True)
    model = mb.build()
    res = []
    for phys in (True, False):
        mo = MotionBuilder()
        mo.add_bone_key("b", 0, physics=phys)
        mo.add_bone_key("b", 10, translation=(0, 0, 10), physics=phys)
        res.append(Character(model, mo.build()).update(5).bone_world[0, 2, 3])
    assert res[0] == pytest.approx(5.0, abs=1e-5) and res[1] == pytest.approx(5.0, abs=1e-5)


def test_group_of_group_morph_with_cycle():
    mb = ModelBuilder("m")
    bone = mb.add_bone("b", (0, 0, 0))
    mat = mb.add_material("m")
    mb.add_mesh(mat, [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 0, 1]] * 3, [[0, 0]] * 3, [[0, 1, 2]], [bone] * 3)
    v = mb.add_vertex_morph("v", [1], [[0, 2, 0]])
    g1 = mb.add_group_morph("g1", [v], [0.5])
    g2 = mb.add_group_morph("g2", [g1, 2], [0.5, 1.0])  # 2 = itself: a cycle, ignored
    model = mb.build()
    mo = MotionBuilder()
    mo.add_morph_key("g2", 0, 1.0)
    ch = Character(model, mo.build()).update(0)
    assert ch.morph_weight[v] == pytest.approx(0.25)
    np.testing.assert_allclose(ch.vertex_offset[1], [0, 0.5, 0], atol=1e-6)
    # next frame without keys active: offsets cleared
    mo2 = MotionBuilder()
    mo2.add_morph_key("g2", 0, 1.0)
    mo2.add_morph_key("g2", 10, 0.0)
    ch2 = Character(model, mo2.build())
    ch2.update(0)
    ch2.update(10)
    np.testing.assert_allclose(ch2.vertex_offset, 0, atol=1e-7)
    assert g2 == 2


def test_deeply_shared_group_morphs_expand_in_linear_time():
    """40 nested groups, each listing the next one 30 times: 30^40 paths, one leaf. A hostile
    file like this must expand quickly; weights 1/30 per entry keep the product at 1."""
    mb = ModelBuilder("m")
    bone = mb.add_bone("b", (0, 0, 0))
    mat = mb.add_material("m")
    mb.add_mesh(mat, [[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 0, 1]] * 3, [[0, 0]] * 3, [[0, 1, 2]], [bone] * 3)
    leaf = mb.add_vertex_morph("leaf", [1], [[0, 1, 0]])
    below = leaf
    for i in range(40):
        below = mb.add_group_morph(f"g{i}", [below] * 30, [1 / 30] * 30)
    model = mb.build()
    mo = MotionBuilder()
    mo.add_morph_key("g39", 0, 0.5)
    ch = Character(model, mo.build()).update(0)
    assert ch.morph_weight[leaf] == pytest.approx(0.5, rel=1e-5)


def test_bone_morphs_compose():
    mb = ModelBuilder("bm")
    b = mb.add_bone("b", (0, 0, 0))
    m1 = mb.add_bone_morph("m1", [b], [[1, 0, 0]], [[0, 0, 0, 1]])
    m2 = mb.add_bone_morph("m2", [b], [[0, 2, 0]], [[0, 0, 0, 1]])
    mo = MotionBuilder()
    mo.add_morph_key("m1", 0, 1.0)
    mo.add_morph_key("m2", 0, 0.5)
    ch = Character(mb.build(), mo.build()).update(0)
    np.testing.assert_allclose(ch.bone_world[b, :3, 3], [1, 1, 0], atol=1e-6)
    assert (m1, m2) == (0, 1)


def test_batch_pose_matches_character():
    model, b = leg_model()
    mo = MotionBuilder()
    mo.add_bone_key("左足ＩＫ", 0, translation=(0, 0, 0))
    mo.add_bone_key("左足ＩＫ", 30, translation=(0, 4, -1))
    motion = mo.build()
    out = pose(model, motion, range(0, 31, 5))
    ch = Character(model, motion).update(15)
    np.testing.assert_allclose(out["bone_world"][3], ch.bone_world, atol=1e-6)
    assert out["bone_world"].shape == (7, model.num_bones, 4, 4)


def test_evaluation_order_handles_long_chains_listed_child_first():
    from mmdkit.pose.rig import evaluation_order

    B = 5000  # deeper than Python's recursion limit
    parent = np.arange(1, B + 1)
    parent[-1] = -1  # bone i hangs from bone i+1
    order = evaluation_order(parent, np.zeros(B, np.int32))
    rank = np.empty(B, int)
    rank[order] = np.arange(B)
    assert sorted(order.tolist()) == list(range(B))
    assert (rank[parent[:-1]] < rank[:-1]).all()


def after_physics_model():
    """A bone flagged after-physics with an unflagged child and an unflagged bone appending it."""
    mb = ModelBuilder("after")
    root = mb.add_bone("センター", (0, 0, 0))
    hair = mb.add_bone("hair", (0, 10, 0), root, after_physics=True)
    tip = mb.add_bone("tip", (0, 12, 0), hair)
    follower = mb.add_bone("follower", (5, 10, 0), root, append_parent=hair, append_ratio=1.0, append_rotation=True)
    mo = MotionBuilder()
    mo.add_bone_key("hair", 0)
    mo.add_bone_key("hair", 10, rotation=(0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)))  # 90° about Z
    return mb.build(), mo.build(), dict(hair=hair, tip=tip, follower=follower)


def test_children_of_after_physics_bones_see_this_frames_parent_in_every_path(paths_agree):
    """A child (or append target) of an after-physics bone is evaluated after it: the batch does
    not depend on how frames are chunked (the same bits), and frame-by-frame equals the batch in
    any order (another kernel: to rounding)."""
    from mmdkit.pose import pose_batch

    model, motion, b = after_physics_model()
    frames = np.arange(11.0)
    worlds = [pose_batch(model, motion, frames, num_chunks=n)[0] for n in (1, 2, 4, 11)]
    for w in worlds[1:]:
        np.testing.assert_array_equal(w, worlds[0])
    ch = Character(model, motion)
    for i in reversed(range(len(frames))):
        ch.update(frames[i])
        paths_agree(ch.bone_world, worlds[0][i])
    np.testing.assert_allclose(worlds[0][10][b["tip"], :3, 3], [-2, 10, 0], atol=1e-5)  # 90° with its parent
    np.testing.assert_allclose(worlds[0][10][b["follower"], :3, :3], worlds[0][10][b["hair"], :3, :3], atol=1e-6)
    assert np.isfinite(worlds[0]).all()


def test_zero_and_unnormalised_key_rotations_never_give_nan():
    """Zero quaternion keys on an ankle and a knee (an IK link) are read as the identity, keys of
    length 2 as the unit rotation: no NaN, bone lengths kept (zero keys gave NaN through IK)."""
    import dataclasses

    from mmdkit.pose import pose_batch

    model, b = leg_model()
    mo = MotionBuilder()
    for f in (0, 10):
        mo.add_bone_key("左足首", f)
        mo.add_bone_key("左ひざ", f)
    mo.add_bone_key("左足ＩＫ", 0, translation=(0, 3, 0))
    motion = mo.build()
    rot = np.zeros((len(motion.bone_key_rotation), 4), np.float32)
    motion = dataclasses.replace(motion, bone_key_rotation=rot)
    for f in (0.0, 5.0, 10.0):
        ch = Character(model, motion).update(f)
        assert np.isfinite(ch.bone_world).all(), f
        assert length_kept(ch, model, b["ankle"], b["knee"])
    world, _ = pose_batch(model, motion, [0.0, 5.0])
    assert np.isfinite(world).all()
    doubled = dataclasses.replace(motion, bone_key_rotation=np.tile(np.float32([0, 0, 0, 2]), (len(rot), 1)))
    np.testing.assert_array_equal(Character(model, doubled).update(5).bone_world, Character(model, motion).update(5).bone_world)


def test_euler_limits_skip_their_trigonometry_only_inside():
    """A link rotation whose Euler angles all lie strictly within the link's limits comes back as it
    is (w made positive), without the decomposition's trigonometry (``Rig.ik_link_inside``): the
    same rotation as the full path within rounding. Rotations outside the limits, and links whose
    limits reach past ±90°, take the full path (in each of the three Euler orders)."""
    from mmdkit.pose.ik import _euler_limited
    from mmdkit.pose.rig import ik_inside_table

    h = 0.5 * math.pi
    limits = [((-0.7, -0.3, -0.7), (0.7, 0.3, 0.7)), ((-h, -0.5, -0.6), (h, 0.4, 0.5)),  # Y·X·Z, Z·Y·X
              ((-h, -h, -0.4), (h, h, 0.3)), ((-2.0, -0.5, -0.5), (0.5, 0.5, 0.5))]  # X·Z·Y; past 90°
    lower = np.array([lo for lo, _ in limits])
    upper = np.array([up for _, up in limits])
    table = ik_inside_table(np.ones(len(limits), np.int32), lower, upper)
    never = (2.0, -2.0) + (0.0,) * 8
    rng = np.random.default_rng(3)
    for j in range(len(limits)):
        skipped = outside = 0
        for _ in range(400):
            v = rng.normal(size=3) * rng.choice((0.1, 0.4, 1.5))
            a = np.linalg.norm(v)
            q = (*(np.sin(0.5 * a) * v / a), math.cos(0.5 * a))
            q = tuple(-x for x in q) if rng.random() < 0.5 else q
            for reflect in (True, False):
                fast = _euler_limited(*q, *lower[j], *upper[j], reflect, tuple(table[j]))
                full = _euler_limited(*q, *lower[j], *upper[j], reflect, never)
                np.testing.assert_allclose(fast, full, atol=1e-12)
                assert j < 3 or fast == full  # past 90°: always the full path
                sign = 1.0 if q[3] > 0 else -1.0
                skipped += fast == tuple(sign * x for x in q)
                outside += np.abs(np.asarray(full) - sign * np.asarray(q)).max() > 1e-3
        assert outside > 50 and (skipped > 50 if j < 3 else tuple(table[j]) == never)
