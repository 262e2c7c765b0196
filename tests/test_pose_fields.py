"""The pose kernels' named groups: each declaration (``pose.fields.Field``) matches the arrays built."""

import numpy as np
from numba import njit

from mmdkit.pose.batch import batch_state
from mmdkit.pose.fields import copy_group
from mmdkit.pose.rig import BoneIn, IkIn, MorphIn, build_rig
from mmdkit.pose.state import BoneState, Coupling, FrameOut, MorphOut, MorphState, PoseState, state_sizes
from mmdkit.model.builder import ModelBuilder


def leg_model():
    """Hip, knee (an X hinge) and ankle pulled by a leg IK bone."""
    mb = ModelBuilder("leg")
    root = mb.add_bone("センター", (0, 10, 0), translatable=True)
    hip = mb.add_bone("左足", (0, 10, 0), root)
    knee = mb.add_bone("左ひざ", (0, 5, -0.1), hip)
    ankle = mb.add_bone("左足首", (0, 0, 0), knee)
    ik = mb.add_bone("左足ＩＫ", (0, 0, 0), -1, translatable=True)
    mb.add_ik(ik, ankle, [(knee, (-3.14, 0, 0), (-0.0087, 0, 0)), hip])
    return mb.build(), dict(hip=hip, knee=knee, ankle=ankle, ik=ik)


def _conforms(g, sizes=None):
    """Every array of group g has its declared dtype, number of axes and fixed lengths (and, with
    sizes, its symbolic lengths too); returns the names checked."""
    for f, a in zip(type(g).FIELDS, g):
        assert a.dtype == np.dtype(f.dtype), (f.name, a.dtype, f.dtype)
        assert a.ndim == len(f.shape), (f.name, a.shape, f.shape)
        for n, s in zip(a.shape, f.shape):
            if isinstance(s, int):
                assert n == s, (f.name, a.shape, f.shape)
            elif sizes is not None and s in sizes:
                assert n == sizes[s], (f.name, a.shape, f.shape)
    return type(g)._fields


def test_rig_groups_match_their_declarations():
    model, b = leg_model()
    rig = build_rig(model)
    assert isinstance(rig.bone_in, BoneIn) and isinstance(rig.ik_in, IkIn) and isinstance(rig.morph_in, MorphIn)
    B, K, L = model.num_bones, len(model.ik_bone), len(model.ik_link_bone)
    for g in (rig.bone_in, rig.ik_in, rig.morph_in):
        _conforms(g, dict(B=B, K=K, L=L, N=model.num_morphs))
    assert rig.bone_parent is rig.bone_in.bone_parent  # the fields are the Rig's attributes too
    assert rig.ik_link_bone.tolist() == [b["knee"], b["hip"]]


def test_state_allocated_from_declarations_at_rest():
    model, _ = leg_model()
    rig = build_rig(model)
    s = PoseState.for_rig(rig)
    sizes = state_sizes(rig)
    for g, cls in ((s.bone_state, BoneState), (s.morph_state, MorphState), (s.morph_out, MorphOut),
                   (s.frame_out, FrameOut), (s.coupling, Coupling)):
        assert isinstance(g, cls)
        _conforms(g, sizes)
    assert s.bone_world_q.shape == (model.num_bones, 4) and (s.bone_world_q[:, 3] == 1).all()
    assert not s.bone_world_q[:, :3].any() and (s.ik_enabled == 1).all() and (s.material_mul == 1).all()
    assert s.bone_world is s.frame_out.bone_world


def test_copy_group_in_numba_copies_every_array():
    rig = build_rig(leg_model()[0])
    rest = batch_state(rig)[0]

    @njit
    def copy_and_touch(g):
        c = copy_group(g)
        c.bone_world_q[0, 3] = 5.0
        return c

    c = copy_and_touch(rest)
    assert type(c) is BoneState and c.bone_world_q[0, 3] == 5.0 and rest.bone_world_q[0, 3] == 1.0
    assert all(np.array_equal(x, y) for x, y in zip(c[:-2], rest[:-2]))


def test_set_driven_keeps_the_coupling_declaration():
    model, b = leg_model()
    rig = build_rig(model)
    s = PoseState.for_rig(rig)
    driven = np.zeros(model.num_bones, bool)
    driven[[b["hip"], b["knee"]]] = True
    s.set_driven(rig, driven)
    _conforms(s.coupling)
    assert s.bone_driven.tolist() == [b["hip"], b["knee"]] and s.ik_disabled.tolist() == [1]


def test_pass_two_rewrites_the_links_its_solvers_turn():
    """An after-physics IK bone whose links are first-pass bones: the second pass turns them, so a
    frame posed stage by stage (pass 1 writes every matrix, pass 2 only the rows it may change)
    gives the matrices of a frame posed in one call (every matrix written once, at the end)."""
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.runtime import Character

    mb = ModelBuilder("leg")
    root = mb.add_bone("センター", (0, 10, 0), translatable=True)
    hip = mb.add_bone("左足", (0, 10, 0), root)
    knee = mb.add_bone("左ひざ", (0, 5, -0.1), hip)
    ankle = mb.add_bone("左足首", (0, 0, 0), knee)
    ik = mb.add_bone("左足ＩＫ", (0, 0, 0), -1, translatable=True, after_physics=True)
    mb.add_ik(ik, ankle, [(knee, (-3.14, 0, 0), (-0.0087, 0, 0)), hip])
    model = mb.build()
    rig = build_rig(model)
    assert hip not in rig.bone_pass_after and {hip, knee, ankle} <= set(rig.bone_rewrite_after.tolist())
    mob = MotionBuilder()
    mob.add_bone_key("左足ＩＫ", 0, translation=(0, 3, -2))
    mob.add_bone_key("左足ＩＫ", 30, translation=(1, 4, -3))
    motion = mob.build()
    fused, staged = Character(model, motion), Character(model, motion)
    for f in (0, 7, 15, 30):
        fused.update(f)
        staged.update(f, timed=True)
        assert np.abs(fused.bone_world[knee, :3, 3] - model.bone_position[knee]).max() > 0.1  # the IK turned the leg
        np.testing.assert_allclose(staged.bone_world, fused.bone_world, atol=1e-6)
        np.testing.assert_allclose(staged.bone_skin, fused.bone_skin, atol=1e-6)


def _hair_worlds(links, loops=(4, 40, 9, 40)):
    """Chains hanging from a head (``links(c, bones)``: solver c's IK links, bones nearest the head
    first), one per loop count, posed as one lane group and with every solver alone: (model, the
    grouped rig, bone_world (F, B, 4, 4) grouped, alone, the chains' tips)."""
    from mmdkit.animation.binding import bind_motion
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.pose.stages import BONES_AFTER_PHYSICS, SAMPLE, motion_in, run_stages

    mb = ModelBuilder("hair")
    head = mb.add_bone("頭", (0, 10, 0))
    tips = []
    for c, n in enumerate(loops):
        prev, bones = head, []
        for i in range(4):
            prev = mb.add_bone(f"hair{c}_{i}", (c - 1.5, 10 - 1.0 * i, 0.3 * i), prev)
            bones.append(prev)
        tips.append(prev)
        ik = mb.add_bone(f"hair{c}_IK", (c - 1.2, 7.5, 1.5), -1, translatable=True)
        mb.add_ik(ik, prev, links(c, bones[:-1])[::-1], loop_count=n, limit_angle=0.3)
    model = mb.build()
    mob = MotionBuilder()
    mob.add_bone_key("頭", 0, rotation=(0, 0, 0, 1))
    mob.add_bone_key("頭", 20, rotation=(0.3, 0.2, 0.1, 0.927))
    keys = motion_in(bind_motion(model, mob.build()))
    grouped = build_rig(model)
    alone = type(grouped)(bone_order=grouped.bone_order, bone_in=grouped.bone_in, morph_in=grouped.morph_in,
                          ik_in=grouped.ik_in._replace(ik_group=np.full(len(loops), -1, np.int32)))
    worlds = []
    for rig in (grouped, alone):
        s = PoseState.for_rig(rig)
        out = []
        for f in (0.0, 5.0, 12.5, 20.0):
            run_stages(SAMPLE, BONES_AFTER_PHYSICS, f, False, keys, rig.bone_in, rig.ik_in, rig.morph_in, s.coupling,
                       s.bone_state, s.morph_state, s.morph_out, s.frame_out)
            out.append(s.bone_world.copy())
        worlds.append(np.stack(out))
    return model, grouped, worlds[0], worlds[1], tips


def test_lane_group_with_different_loop_counts_matches_solving_one_by_one():
    """Free hair chains with loop counts 4, 40, 9, 40 form one lane group (each lane stops after its
    own count) and pose as when every solver runs alone."""
    model, grouped, together, alone, tips = _hair_worlds(lambda c, bones: bones)
    assert grouped.ik_group.tolist() == [0, 0, 0, 0]
    assert np.abs(together[:, tips, :3, 3] - model.bone_position[tips]).max() > 0.5  # the chains turned
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_lane_group_of_limited_chains_matches_solving_one_by_one():
    """Chains whose links have angle limits (an X hinge, Euler limits, an X hinge; each chain its own
    values, loop counts 4, 40, 9, 40) form one lane group: every lane runs the scalar solver's
    halves (a hinge's own axis first, the limits reflecting, then clamping) and its own
    iteration count, and the chains pose as when every solver runs alone."""
    def links(c, bones):
        w = 0.1 * c
        return [(bones[0], (-1.5 + w, 0, 0), (0.4, 0, 0)), (bones[1], (-0.7, -0.3 - w, -0.6), (0.7, 0.3, 0.6 + w)),
                (bones[2], (-1.2, 0, 0), (-0.1 * w, 0, 0))]
    model, grouped, together, alone, tips = _hair_worlds(links)
    assert grouped.ik_group.tolist() == [0, 0, 0, 0]
    assert grouped.ik_in.ik_group_link_mode.tolist() == [2, 1, 2]  # from the target up: hinge, Euler, hinge
    assert np.abs(together[:, tips, :3, 3] - model.bone_position[tips]).max() > 0.5  # the chains turned
    np.testing.assert_allclose(together, alone, atol=1e-6)
