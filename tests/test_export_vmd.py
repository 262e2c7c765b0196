"""Baked VMD: read back and posed WITHOUT physics, it reproduces the original run (with physics)
within 1e-3 units on every bone; IK off by property keys, physics-off flags on driven bones,
append bones keyed with their own part only; key reduction."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.animation.binding import match_tracks
from mmdkit.animation.curves import bone_key_physics
from mmdkit.errors import OptionError
from mmdkit.export import bake
from mmdkit.export.vmd import write
from mmdkit.runtime import pose

FRAMES = np.arange(200.0, 320.0)


@pytest.fixture(scope="module")
def gene(assets):
    model = mmdkit.load(assets / "gene" / "Gene.pmx")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    return model, motion, bake(model, motion, FRAMES, physics=True)


@pytest.fixture(scope="module")
def replayed(gene, tmp_path_factory):
    model, motion, baked = gene
    path = tmp_path_factory.mktemp("vmd") / "baked.vmd"
    info = write(baked, path, motion=motion, warn=lambda s: None)
    back = mmdkit.load(path)
    return info, back, pose(model, back, FRAMES)


def test_replay_without_physics_matches_physics_run(gene, replayed):
    model, _, baked = gene
    info, back, out = replayed
    assert baked.physics and baked.bone_driven.sum() > 20  # hair/cloth really simulated
    position_error = np.abs(out["bone_world"][..., :3, 3] - baked.bone_world[..., :3, 3]).max()
    rotation_error = np.abs(out["bone_world"][..., :3, :3] - baked.bone_world[..., :3, :3]).max()
    assert position_error < 1e-3 and rotation_error < 1e-3, (position_error, rotation_error)
    assert info["bone_keys"] == info["bones_keyed"] * len(FRAMES)


@pytest.mark.parametrize("path", ["mokou/mokou_A.pmd", "mei/Model/mei/mei.pmd", "gene/Gene.pmd"])
def test_replay_other_models(assets, tmp_path, path):
    model = mmdkit.load(assets / path)
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    frames = np.arange(500.0, 530.0)
    baked = bake(model, motion, frames, physics=True)
    write(baked, tmp_path / "b.vmd", motion=motion, warn=lambda s: None)
    out = pose(model, mmdkit.load(tmp_path / "b.vmd"), frames)
    assert baked.bone_driven.any()
    assert np.abs(out["bone_world"][..., :3, 3] - baked.bone_world[..., :3, 3]).max() < 1e-3
    assert np.abs(out["bone_world"][..., :3, :3] - baked.bone_world[..., :3, :3]).max() < 1e-3


def test_ik_off_and_physics_off_flags(gene, replayed):
    model, _, baked = gene
    _, back, _ = replayed
    ik_names = {model.bone_name[b] for b in model.ik_bone}
    assert set(back.property_ik_name) == ik_names
    assert back.num_property_keys >= 1 and not back.property_ik_enabled.any()
    flags = bone_key_physics(back.bone_key_interpolation)
    track_bone, unbound = match_tracks(model.bone_name, back.bone_track_name, back.bone_track_name_bytes, 15)
    assert not unbound
    driven = baked.bone_driven[track_bone[back.bone_key_track]]
    assert driven.any() and not flags[driven].any() and flags[~driven].all()


def test_append_bones_keyed_with_their_own_part(gene, replayed):
    """Append bones the dance does not key and physics does not drive get identity keys (MMD adds
    the append itself), though the append turns them (右肩連 follows 右肩 with ratio 1)."""
    model, motion, baked = gene
    _, back, _ = replayed
    assert np.abs(baked.bone_local_rotation[:, model.bone_name.index("右肩連"), :3]).max() > 0.1
    checked = 0
    for b in np.nonzero(np.asarray(model.bone_append_parent) >= 0)[0]:
        name = model.bone_name[b]
        if name in motion.bone_track_name or baked.bone_driven[b] or name not in back.bone_track_name:
            continue
        keys = back.bone_key_rotation[back.bone_key_track == back.bone_track_name.index(name)]
        assert np.abs(keys[:, :3]).max() < 1e-4, name
        checked += 1
    assert checked >= 1


def test_morph_keys_copied(gene, replayed):
    _, motion, _ = gene
    _, back, _ = replayed
    assert back.num_morph_keys == motion.num_morph_keys
    assert back.morph_track_name == motion.morph_track_name


@pytest.mark.parametrize("tol", [0.001, 0.01])
def test_reduction_within_tolerance_on_every_bone(gene, tmp_path, tol):
    """Re-posed without physics, every bone of the reduced bake is within TOL of the physics run
    (each bone's share of TOL: errors inherited down a chain or through append add up to TOL);
    kinematic bones shrink >= 10x, physics-driven bones hardly (their local rotations jitter
    ~0.01-0.03 rad from frame to frame, see docs/export.md)."""
    model, motion, baked = gene
    info = write(baked, tmp_path / "r.vmd", motion=motion, reduce=tol, warn=lambda s: None)
    back = mmdkit.load(tmp_path / "r.vmd")
    driven_keys = int((~back.bone_key_physics).sum())
    kinematic_full = len(FRAMES) * int((~baked.bone_driven).sum())
    assert info["bone_keys"] - driven_keys < kinematic_full / 10
    assert info["bone_keys"] < info["full_keys"] / 2
    out = pose(model, back, FRAMES)
    err = np.linalg.norm(out["bone_world"][..., :3, 3] - baked.bone_world[..., :3, 3], axis=-1).max()
    assert err <= tol, err


@pytest.mark.parametrize("tol,tol2", [(0.001, 0.05), (0.01, 0.002)])
def test_reduce_physics_bounds_each_region(gene, tmp_path, tol, tol2):
    """--reduce-physics TOL2: re-posed without physics, the bones physics drives and the bones
    below them (the 'End' tips included) stay within TOL2 of the physics run, every other bone
    within TOL; a looser TOL2 drops physics keys, a tighter one keeps more."""
    from mmdkit.export.vmd import baked_motion, physics_region

    model, motion, baked = gene
    region = physics_region(model, baked.bone_driven)
    assert region[baked.bone_driven].all() and (region & ~baked.bone_driven).any() and not region.all()
    info = write(baked, tmp_path / "p.vmd", motion=motion, reduce=tol, reduce_physics=tol2, warn=lambda s: None)
    plain = baked_motion(baked, motion, reduce=tol, warn=lambda s: None)[1]
    out = pose(model, mmdkit.load(tmp_path / "p.vmd"), FRAMES)
    err = np.linalg.norm(out["bone_world"][..., :3, 3] - baked.bone_world[..., :3, 3], axis=-1).max(axis=0)
    assert err[~region].max() <= tol and err[region].max() <= tol2, (err[~region].max(), err[region].max())
    if tol2 > tol:
        assert err[region].max() > tol  # the looser bound is used, not just allowed
        assert info["bone_keys"] < 0.8 * plain["bone_keys"], (info["bone_keys"], plain["bone_keys"])
    else:
        assert info["bone_keys"] > plain["bone_keys"]


def _five_bones():
    """a → b → c by parent links, d appended from b (ratio 0.5), e below d."""
    from mmdkit.model.builder import ModelBuilder

    mb = ModelBuilder()
    mb.add_bone("a", (0, 0, 0))
    mb.add_bone("b", (0, 1, 0), parent=0)
    mb.add_bone("c", (0, 3, 0), parent=1)
    mb.add_bone("d", (5, 0, 0), append_parent=1, append_ratio=0.5)
    mb.add_bone("e", (5, 4, 0), parent=3)
    return mb.build()


def test_error_budget_splits_along_chains():
    """A chain of 3 moving bones gets TOL/3 each; a bone appended to the chain's middle counts
    the chain above it; a still bone takes no share; reach runs through append children."""
    from mmdkit.export.vmd import bone_reach, error_budget

    model = _five_bones()
    moving = np.array([True, True, True, True, False])
    share = error_budget(model, moving, 0.06)
    np.testing.assert_allclose(share, [0.02, 0.02, 0.02, 0.02, 0.02])
    np.testing.assert_allclose(error_budget(model, np.array([True, False, True, False, False]), 0.06)[2], 0.03)
    np.testing.assert_allclose(bone_reach(model), [3.0, 2.0, 1.0, 4.0, 1.0])


def test_error_budget_physics_region():
    """Physics drives b: b, its child c, its append child d and d's child e form the region
    (TOL2), a keeps TOL; a chain a→b→c sums to TOL + (TOL2 − TOL) = TOL2; TOL2 == TOL is the
    plain split; a tighter TOL2 caps a too (its error reaches the region)."""
    from mmdkit.export.vmd import error_budget, physics_region

    model = _five_bones()
    moving = np.array([True, True, True, True, False])
    driven = np.array([False, True, False, False, False])
    np.testing.assert_array_equal(physics_region(model, driven), [False, True, True, True, True])
    np.testing.assert_allclose(error_budget(model, moving, 0.01, driven=driven, physics_tol=0.1),
                               [0.01, 0.045, 0.045, 0.045, 0.045])
    np.testing.assert_allclose(error_budget(model, moving, 0.06, driven=driven, physics_tol=0.06),
                               error_budget(model, moving, 0.06))
    np.testing.assert_allclose(error_budget(model, moving, 0.06, driven=driven, physics_tol=0.03), [0.01] * 5)


def test_fractional_frames_refused(gene, tmp_path):
    model, motion, _ = gene
    half = bake(model, motion, [0.5, 1.5], physics=False)
    with pytest.raises(OptionError, match="frames"):
        write(half, tmp_path / "x.vmd", motion=motion)
    with pytest.raises(OptionError, match="reduce"):
        write(bake(model, motion, [0.0, 1.0], physics=False), tmp_path / "x.vmd", reduce=-1)
    still = bake(model, motion, [0.0, 1.0], physics=False)
    for bad in (-0.1, "abc", float("inf")):
        with pytest.raises(OptionError, match="reduce_physics"):
            write(still, tmp_path / "x.vmd", reduce=0.01, reduce_physics=bad)
    with pytest.raises(OptionError, match="reduce_physics: needs reduce"):
        write(still, tmp_path / "x.vmd", reduce_physics=0.1)
    assert not list(tmp_path.iterdir())


def test_reduction_fits_bezier_curves(tmp_path):
    """A bone eased from key to key (smoothstep on its translation and rotation: a curve of the
    fitted family) comes back as a few keys carrying fitted curves where straight lines need many
    more, and re-posed within TOL."""
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.animation.curves import LINEAR_CURVE, interpolation_curves

    model = _five_bones()
    mb = MotionBuilder()
    half = np.sin(0.05), np.cos(0.05)
    smooth = {"x": (42, 0, 85, 127), "r": (42, 0, 85, 127)}
    mb.add_bone_key("a", 0)
    mb.add_bone_key("a", 60, (0.5, 0, 0), (0, half[0], 0, half[1]), smooth)
    motion = mb.build()
    frames = np.arange(0.0, 61.0)
    baked = bake(model, motion, frames, physics=False)
    write(baked, tmp_path / "eased.vmd", motion=motion, reduce=0.01, warn=lambda s: None)
    back = mmdkit.load(tmp_path / "eased.vmd")
    a = [n.rstrip("\0") for n in back.bone_track_name].index("a")
    keys = np.nonzero(back.bone_key_track == a)[0]
    curves = np.rint(interpolation_curves(back.bone_key_interpolation[keys]) * 127)
    fitted = [not np.array_equal(c[0], LINEAR_CURVE) or not np.array_equal(c[3], LINEAR_CURVE) for c in curves[1:]]
    assert len(keys) <= 4 and all(fitted), (back.bone_key_frame[keys], curves)
    # straight lines between the same frames miss the eased frames by far more than TOL
    lin = np.interp(frames, back.bone_key_frame[keys].astype(float), back.bone_key_translation[keys, 0])
    assert np.abs(lin - baked.bone_world[:, 0, 0, 3]).max() > 0.02
    out = pose(model, back, frames)
    err = np.linalg.norm(out["bone_world"][..., :3, 3] - baked.bone_world[..., :3, 3], axis=-1).max()
    assert err <= 0.01, err
    assert bone_key_physics(back.bone_key_interpolation).all()
