"""VRM spring bones (mmdkit.physics.springs): read from VRM 0.x and 1.0, simulated between the bone
passes so hair lags and swings when a VRM dances, stays out of its colliders, comes to rest, resets
on seeks and is off with --no-physics.

A "tail" below is where a joint's bone points: bone_world · (rest tail − rest head), MMD units.
The rigid reference is the same motion posed without a world (bones follow their parents).
"""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.physics import physics_for
from mmdkit.physics.springs import SpringWorld
from mmdkit.runtime import Character
from vrm_build import HEAD_SPHERE, vrm1_bytes

DANCE_END, STILL_END = 60, 240


@pytest.fixture(scope="module")
def godette(assets):
    return mmdkit.load(assets / "rigs" / "vrm0" / "Godette_vrm_v4.vrm")


def _vrm1(tmp_path, **kw):
    p = tmp_path / "hair.vrm"
    p.write_bytes(vrm1_bytes(**kw))
    return mmdkit.load(p)


def _quat(axis, deg):
    a = np.radians(deg) / 2
    return (*(np.sin(a) * np.asarray(axis, float)), np.cos(a))


def dance(model):
    """Head and hips swinging every 10 frames up to DANCE_END, then still (the rest pose)."""
    bones = model.source_extras["vrm_humanoid"]["bones"]
    head, hips = model.bone_name[bones["head"]], model.bone_name[bones["hips"]]
    mb = MotionBuilder(model_name=model.name)
    for f in range(0, DANCE_END + 1, 10):
        s = 0 if f in (0, DANCE_END) else (1 if f // 10 % 2 else -1)
        mb.add_bone_key(head, f, rotation=_quat((0, 0, 1), 35 * s))
        mb.add_bone_key(hips, f, translation=(2.0 * s, 0, 0), rotation=_quat((0, 1, 0), 40 * s))
    return mb.build()


def tails(model, bone_world):
    sp = model.source_extras["vrm_springs"]
    off = sp.joint_tail - model.bone_position[sp.joint_bone]
    w = np.asarray(bone_world[sp.joint_bone], np.float64)
    return np.einsum("jik,jk->ji", w[:, :3, :3], off) + w[:, :3, 3]


def run(model, motion, frames, world=True):
    ch = Character(model, motion, physics_for(model) if world else None)
    out = []
    for f in frames:
        ch.update(f)
        out.append(tails(model, ch.bone_world))
    return np.array(out), ch


def test_springs_read_from_vrm0_and_vrm1(godette, assets, tmp_path):
    sp = godette.source_extras["vrm_springs"]
    assert (sp.num_joints, len(sp.chain_center), len(sp.collider_bone)) == (16, 3, 4)
    assert set(np.asarray(godette.bone_name)[sp.joint_bone]) >= {"Ribbon", "HairBall_L_End", "FrontHair_R"}
    by_name = dict(zip(np.asarray(godette.bone_name)[sp.joint_bone], sp.joint_stiffness))
    assert (by_name["Ribbon"], by_name["FrontHair_R"]) == (2 * 12.5, 2.5 * 12.5)  # 0.x 'stiffiness' × 12.5
    np.testing.assert_allclose(sp.collider_radius[:2], [0.1 * 12.5, 0.217 * 12.5], rtol=1e-6)
    v1 = _vrm1(tmp_path).source_extras["vrm_springs"]
    assert v1.num_joints == 2 and v1.collider_capsule.tolist() == [False, True]  # the last joint is a tail only
    np.testing.assert_allclose(v1.joint_tail[0], [0, 1.4 * 12.5, 0.1 * 12.5], atol=1e-5)  # z negated
    assert "vrm_springs" not in mmdkit.load(assets / "rigs" / "vrm1" / "debug_robot.vrm").source_extras
    assert isinstance(physics_for(godette), SpringWorld) and physics_for(godette, False) is None
    assert any("VRM spring bones (16 joints, 4 colliders) are not written" in line
               for line in godette.source_extras["import_losses"])  # what `mmdkit convert` says


def test_dancing_hair_lags_swings_and_comes_to_rest(godette):
    motion = dance(godette)
    frames = np.arange(STILL_END + 1)
    sim, ch = run(godette, motion, frames)
    rigid, _ = run(godette, motion, frames, world=False)
    assert np.isfinite(sim).all()
    lag = np.linalg.norm(sim - rigid, axis=2)  # (F, J)
    assert lag[5:DANCE_END].max() > 0.3  # tips trail their parents while the body moves
    swing = np.linalg.norm(np.diff(sim[DANCE_END:DANCE_END + 30], axis=0), axis=2).max()
    assert swing > 0.01  # and still swing after it stops
    # at rest: no motion left, and the pose a settle at the same frame gives
    assert np.linalg.norm(sim[-1] - sim[-2], axis=1).max() < 1e-3
    settled, _ = run(godette, motion, [STILL_END])
    np.testing.assert_allclose(sim[-1], settled[0], atol=0.02)
    # kinematic bones are untouched: only the springs' bones and what hangs below them differ
    free = ~ch.simulation.world.driven_bone_mask
    np.testing.assert_allclose(ch.bone_world[free][:, :3, 3], Character(godette, motion).update(STILL_END)
                               .bone_world[free][:, :3, 3], atol=1e-4)


def test_gravity_bends_the_chain_and_it_rests(tmp_path):
    """gravityDir sideways (+x): the resting hair leans toward +x; without gravity it hangs as modelled."""
    frames = np.arange(STILL_END + 1)
    lean = _vrm1(tmp_path, gravityPower=1.0, gravityDir=[1, 0, 0])
    sim, _ = run(lean, dance(lean), frames)
    rigid, _ = run(lean, dance(lean), frames, world=False)
    assert np.isfinite(sim).all()
    assert (sim[-1, :, 0] - rigid[-1, :, 0]).min() > 0.1
    assert np.linalg.norm(sim[-1] - sim[-2], axis=1).max() < 1e-3
    plain = _vrm1(tmp_path, gravityPower=0.0)
    sim0, _ = run(plain, dance(plain), frames)
    rigid0, _ = run(plain, dance(plain), frames, world=False)
    np.testing.assert_allclose(sim0[-1], rigid0[-1], atol=0.02)
    assert np.linalg.norm(sim0[:DANCE_END] - rigid0[:DANCE_END], axis=2).max() > 0.1


@pytest.mark.parametrize("collide", [True, False])
def test_tails_stay_out_of_colliders(tmp_path, collide):
    """Gravity pulls the hair (behind the head) forwards into the head sphere: with the collider the
    tails stop at its radius + hitRadius, within 10 % of it (the spec's one push per step, then the
    length constraint, leaves a tail pressed by gravity ~4 % inside); without it they go in deep."""
    model = _vrm1(tmp_path, collide=collide, gravityPower=3.0, gravityDir=[0, 0, 1], stiffness=0.2)
    frames = np.arange(120)
    sim, ch = run(model, dance(model), frames)
    sp = model.source_extras["vrm_springs"]
    head = sp.collider_bone[0]
    posed = Character(model, dance(model))
    gaps = []
    for i, f in enumerate(frames):
        posed.update(f)
        centre = posed.bone_world[head][:3, 3].astype(np.float64)  # offset (0, 0, 0)
        gaps.append(np.linalg.norm(sim[i] - centre, axis=1) - (HEAD_SPHERE[2] + 0.02) * 12.5)
    gaps = np.array(gaps)
    assert np.isfinite(gaps).all()
    reach = (HEAD_SPHERE[2] + 0.02) * 12.5
    if collide:
        assert gaps.min() > -0.1 * reach
    else:
        assert gaps.min() < -0.5 * reach


def test_seek_settles_like_a_fresh_start(godette):
    motion = dance(godette)
    ch = Character(godette, motion, physics_for(godette))
    for f in range(0, 25):
        ch.update(f)
    ch.update(45)  # a jump: reset and settle at frame 45
    fresh = Character(godette, motion, physics_for(godette)).update(45)
    np.testing.assert_allclose(ch.bone_world, fresh.bone_world, atol=1e-5)


def test_no_physics_turns_springs_off(godette, mmdkit_cli, tmp_path):
    from mmdkit.formats.vmd import write_vmd

    vmd = tmp_path / "dance.vmd"
    vmd.write_bytes(write_vmd(dance(godette)))
    arrays = {}
    for flag in ("--physics", "--no-physics"):
        out = tmp_path / f"{flag[2:]}.npz"
        code, _, err = mmdkit_cli("export", godette.source_path, vmd, "-o", out, "--frames", "0:40", flag, "-q")
        assert code == 0, err
        arrays[flag] = dict(np.load(out))
    key = next(k for k in arrays["--physics"] if arrays["--physics"][k].ndim >= 3 and
               arrays["--physics"][k].dtype.kind == "f")
    on, off = arrays["--physics"][key], arrays["--no-physics"][key]
    assert on.shape == off.shape and np.abs(on - off).max() > 0.1
    rigid, _ = run(godette, dance(godette), [40], world=False)
    sim, _ = run(godette, dance(godette), [40])
    assert np.abs(sim - rigid).max() > 0.01


def test_center_space_keeps_body_motion_out(tmp_path):
    """With the hips as the spring's center, the hips' swings and steps move the hair's inertia
    along (only the head's turn relative to the hips makes it lag): a much smaller lag."""
    frames = np.arange(90)
    lags = []
    for center in (None, 0):
        model = _vrm1(tmp_path, center=center, gravityPower=0.0)
        assert model.source_extras["vrm_springs"].chain_center.tolist() == [-1 if center is None else 0]
        sim, _ = run(model, dance(model), frames)
        rigid, _ = run(model, dance(model), frames, world=False)
        lags.append(np.linalg.norm(sim - rigid, axis=2).max())
    assert lags[1] < 0.5 * lags[0] and lags[1] > 0.05
