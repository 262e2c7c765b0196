"""Retargeting (mmdkit.retarget.retarget, `mmdkit retarget`, a Take's --source) on real files: Gene's
wavefile_v2 onto mokou (MMD → MMD, other proportions) and onto VRM 1.0/0.x models, glTF clips and a
VRM Animation onto Gene. The result is posed back by mmdkit itself (IK on) and compared with the
source, bone segment by bone segment, with the tolerances docs/retarget.md states."""

from __future__ import annotations

import numpy as np
import pytest

from mmdkit.formats.io import load, save
from mmdkit.importers import clips_of, read_gltf_model
from mmdkit.retarget import humanoid_map
from mmdkit.retarget import contact as C
from mmdkit.retarget.align import align
from mmdkit.retarget.motion import pose_source, retarget
from mmdkit.retarget.quat import angle_between, qrot
from mmdkit.runtime.take import Take

ARMS = [("leftUpperArm", "leftLowerArm"), ("leftLowerArm", "leftHand"), ("rightUpperArm", "rightLowerArm"),
        ("rightLowerArm", "rightHand")]
LEGS = [("leftUpperLeg", "leftLowerLeg"), ("leftLowerLeg", "leftFoot"), ("rightUpperLeg", "rightLowerLeg"),
        ("rightLowerLeg", "rightFoot")]
SPINE = [("spine", "neck"), ("neck", "head")]
# Stated tolerances, degrees: arms and spine are copied exactly (up to the rest-pose difference of bones
# only one skeleton has on the spine); legs are moved by the contact pass (planted feet, floor).
ARM_DEG, SPINE_DEG = 1.0, 5.0
LEG_MEDIAN_DEG, LEG_P95_DEG = 5.0, 15.0
# Feet, in the target's leg lengths (hips -> foot): during source contacts
CONTACT_HEIGHT, CONTACT_SPEED, BELOW_FLOOR = 0.06, 0.01, 0.01


def segment_angles(src, src_motion, tgt, tgt_motion, frames, segments):
    """{(a, b): (F,) degrees} between the source's and the target's world direction a → b, each posed
    by mmdkit (IK on), the target's turned to face as the source does."""
    sm, tm = humanoid_map(src), humanoid_map(tgt)
    al = align(src, sm, tgt, tm)
    sp, _ = pose_source(src, src_motion, frames)
    tp, _ = pose_source(tgt, tgt_motion, frames)
    out = {}
    for a, b in segments:
        if min(sm[a], sm[b], tm[a], tm[b]) >= 0:
            d_s = sp[:, sm[b]] - sp[:, sm[a]]
            d_t = qrot(al.facing_q, tp[:, tm[b]] - tp[:, tm[a]])
            out[(a, b)] = np.degrees(angle_between(d_s, d_t))
    return out, sp, tp, al


def check_directions(angles, legs=True):
    for seg, ang in angles.items():
        if seg in ARMS:
            assert np.percentile(ang, 95) < ARM_DEG, (seg, np.percentile(ang, 95))
        elif seg in SPINE:
            assert ang.max() < SPINE_DEG, (seg, ang.max())
        elif legs:
            assert np.median(ang) < LEG_MEDIAN_DEG and np.percentile(ang, 95) < LEG_P95_DEG, (seg, np.median(ang))
    assert all(s in angles for s in ARMS + (LEGS[:2] if legs else []))


def check_feet(src, tgt, sp, tp, al, frames):
    sm, tm = humanoid_map(src), humanoid_map(tgt)
    rs, rt = np.asarray(src.bone_position), np.asarray(tgt.bone_position)
    L = al.target_leg
    planted = 0
    for side in ("left", "right"):
        sf, tf = sm[f"{side}Foot"], tm[f"{side}Foot"]
        on = C.contacts(sp[:, sf], rs[sf, 1], al.source_leg, frames)
        height = tp[:, tf, 1] - rt[tf, 1]
        step = np.r_[0.0, np.linalg.norm(np.diff(tp[:, tf][:, [0, 2]], axis=0), axis=1)]
        inside = on & np.r_[False, on[:-1]]  # frame and the one before both in the same contact
        assert height[on].max() < CONTACT_HEIGHT * L, (side, height[on].max() / L)
        assert step[inside].max() < CONTACT_SPEED * L, (side, step[inside].max() / L)
        assert height.min() > -BELOW_FLOOR * L, (side, height.min() / L)
        planted += on.sum()
    assert planted > 0.3 * len(frames)


@pytest.mark.parametrize("target", ["mokou/mokou_A.pmd", "rigs/vrm1/debug_robot.vrm", "rigs/vrm0/Godette_vrm_v4.vrm"])
def test_wavefile_onto_other_models(assets, gene, dance, target):
    """The whole dance: limb directions follow Gene's, planted feet stay planted on the target."""
    tgt = load(assets / target)
    frames = np.arange(0, dance.last_frame + 1)
    out = retarget(gene, dance, tgt)
    assert set(out.bone_track_name) <= set(tgt.bone_name)
    angles, sp, tp, al = segment_angles(gene, dance, tgt, out, frames, ARMS + LEGS + SPINE)
    check_directions(angles)
    check_feet(gene, tgt, sp, tp, al, frames)


def test_mmd_target_keys_and_vmd_round_trip(assets, gene, dance, tmp_path):
    """An MMD target: センター moves, 足ＩＫ/つま先ＩＫ are keyed (no IK switched off), and the VMD
    written and read back poses (IK on) as the Motion in memory."""
    tgt = load(assets / "mokou" / "mokou_A.pmd")
    frames = np.arange(0, 600)
    out = retarget(gene, dance, tgt, frames=frames)
    for name in ("センター", "上半身", "下半身", "左足ＩＫ", "右つま先ＩＫ", "左ひざ", "右腕"):
        assert name in out.bone_track_name
    assert len(out.property_ik_name) == 0
    save(out, tmp_path / "m.vmd")
    back = load(tmp_path / "m.vmd")
    p0, _ = pose_source(tgt, out, frames)
    p1, _ = pose_source(tgt, back, frames)
    assert np.abs(p0 - p1).max() < 1e-2
    ik = list(tgt.bone_name).index("左足ＩＫ")
    assert np.ptp(p1[:, ik], axis=0).max() > 1.0  # the IK target really moves


def test_twist_goes_to_twist_bones(gene, dance):
    """Gene onto itself (it has 腕捩/手捩): the arm's twist is keyed on the twist bones, the arm
    directions stay the source's."""
    frames = np.arange(0, 300)
    out = retarget(gene, dance, gene, frames=frames)
    assert "左腕捩" in out.bone_track_name and "右手捩" in out.bone_track_name
    i = list(out.bone_track_name).index("左腕捩")
    rot = np.asarray(out.bone_key_rotation)[np.asarray(out.bone_key_track) == i]
    assert np.abs(rot[:, :3]).max() > 0.01
    angles, *_ = segment_angles(gene, dance, gene, out, frames, ARMS)
    check_directions(angles, legs=False)


@pytest.mark.parametrize("rig, clip", [("rigs/humanoid/mannequiny-0.3.0.glb", "run"),
                                       ("gltf/RobotExpressive.glb", "Dance")])
def test_glb_clips_onto_gene(assets, gene, rig, clip):
    src = load(assets / rig)
    clips = clips_of(src)
    _, motion = clips.get_clip(clip, "--clip")
    frames = np.arange(0, motion.last_frame + 1)
    out = retarget(src, motion, gene, contact=False)
    angles, *_ = segment_angles(src, motion, gene, out, frames, ARMS + LEGS + SPINE)
    for seg in ARMS + LEGS:
        assert np.percentile(angles[seg], 95) < ARM_DEG, (seg, angles[seg].max())


def test_vrma_onto_gene(assets, gene):
    """A VRM Animation: its humanoid nodes are the source skeleton."""
    path = assets / "rigs" / "vrma" / "three-vrm_test.vrma"
    src = read_gltf_model(path.read_bytes(), str(path))
    _, motion = clips_of(src).get_clip(0, "--clip")
    out = retarget(src, motion, gene)
    frames = np.arange(0, motion.last_frame + 1)
    angles, *_ = segment_angles(src, motion, gene, out, frames, ARMS)
    check_directions(angles, legs=False)


def test_take_retargets_a_motion_that_does_not_bind(assets, gene, dance):
    """A VMD on a VRM with a source model: Take.load retargets and says so in one line."""
    said = []
    loaded = Take(assets / "rigs" / "vrm1" / "debug_robot.vrm", assets / "wavefile" / "wavefile_v2.vmd",
                  source=gene, frames="0:30").load(said.append)
    retargeted = [w for w in said if "retargeted from" in w]
    assert len(retargeted) == 1 and "bone tracks bind" in retargeted[0]
    report = loaded.bound.report()
    assert report.bound_bones == report.bone_tracks > 30
    said.clear()
    Take(assets / "mokou" / "mokou_A.pmd", assets / "wavefile" / "wavefile_v2.vmd", source=gene,
         frames="0:3").load(said.append)
    assert not [w for w in said if "retargeted" in w]  # binds: played as it is


@pytest.mark.parametrize("ext", ["vmd", "glb", "bvh", "npz"])
def test_cli_writes_each_format(assets, mmdkit_cli, tmp_path, ext):
    target = assets / ("mokou/mokou_A.pmd" if ext == "vmd" else "rigs/vrm1/debug_robot.vrm")
    out = tmp_path / f"x.{ext}"
    code, stdout, err = mmdkit_cli("retarget", assets / "wavefile" / "wavefile_v2.vmd", "--source",
                                   assets / "gene" / "Gene.pmx", "--target", target, "--frames", "0:20",
                                   "--no-physics", "-o", out)
    assert code == 0, err
    assert out.stat().st_size > 1000 and "21 frames" in stdout
    if ext == "vmd":
        assert "左足ＩＫ" in load(out).bone_track_name


@pytest.mark.parametrize("args, detail", [
    (["--target", "nope.pmd"], "--target: no file 'nope.pmd'"),
    (["--target", "{assets}/gltf/Fox.glb"], "Fox.glb: no humanoid leftUpperArm"),
    (["--target", "{assets}/mokou/mokou_A.pmd", "-o", "x.txt"], "-o: x.txt: name the output .vmd, .vrma"),
    (["--target", "{assets}/rigs/vrm0/Godette_vrm_v4.vrm", "-o", "x.vmd"], "do not fit a VMD's 15 bytes"),
])
def test_cli_mistakes_are_one_line(assets, mmdkit_cli, tmp_path, monkeypatch, args, detail):
    monkeypatch.chdir(tmp_path)
    args = [a.format(assets=assets) for a in args]
    if "-o" not in args:
        args += ["-o", "x.vmd"]
    code, _, err = mmdkit_cli("retarget", assets / "wavefile" / "wavefile_v2.vmd", "--source",
                              assets / "gene" / "Gene.pmx", "--frames", "0:5", *args)
    assert code == 2 and err.count("\n") == 1 and detail in err, err
    assert not (tmp_path / "x.vmd").exists()


def test_kernels_match_the_formulas(assets, gene, dance):
    """The numba passes (retarget.kernels) give what the module's formulas give in plain numpy:
    W_t = F⁻¹·D_s·A·F with D_s the source's rotation turned onto its actual bone direction, and
    local = W(nearest shared ancestor)⁻¹·W; a caller's source_pose gives the same Motion."""
    from mmdkit.retarget.motion import ancestor_rows, source_deltas, target_locals
    from mmdkit.retarget.quat import qarc, qconj, qmul

    tgt = load(assets / "mokou" / "mokou_A.pmd")
    al = align(gene, humanoid_map(gene), tgt, humanoid_map(tgt))
    frames = np.arange(0, 400, 4)
    sp, sq = pose_source(gene, dance, frames)
    rest = np.asarray(gene.bone_position, np.float64)
    d = sq[:, al.source_bone].copy()
    has = al.source_child >= 0
    sb, sc = al.source_bone[has], al.source_child[has]
    d[:, has] = qmul(qarc(qrot(d[:, has], rest[sc] - rest[sb]), sp[:, sc] - sp[:, sb]), d[:, has])
    face = np.broadcast_to(al.facing_q, d.shape)
    want = qmul(qconj(face), qmul(d, qmul(al.align_q, face)))
    world = source_deltas(al, gene, sp, sq)
    assert np.abs(world - want).max() < 1e-9
    rows = ancestor_rows(tgt, al)
    local = target_locals(tgt, al, world, rows)
    for j, b in enumerate(al.target_bone):
        parent = want[:, rows[j]] if rows[j] >= 0 else np.array([0.0, 0.0, 0.0, 1.0])
        assert np.abs(local[:, b] - qmul(qconj(parent), want[:, j])).max() < 1e-9
    others = np.setdiff1d(np.arange(tgt.num_bones), al.target_bone)
    assert np.array_equal(local[:, others], np.broadcast_to([0.0, 0.0, 0.0, 1.0], (len(frames), len(others), 4)))
    a = retarget(gene, dance, tgt, frames=frames)
    b = retarget(gene, dance, tgt, frames=frames, source_pose=(sp, sq))
    assert np.array_equal(a.bone_key_rotation, b.bone_key_rotation)
    assert np.array_equal(a.bone_key_translation, b.bone_key_translation)
