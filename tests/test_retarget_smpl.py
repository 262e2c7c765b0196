"""SMPL-family body models as a retarget target (mmdkit.retarget.smpl/amass, `mmdkit retarget --target
body.npz`): a small synthetic body model in the published layout (SMPL 24 joints, SMPL-X 55), Gene's
wavefile_v2 retargeted onto it, the AMASS npz posed again here with plain numpy forward kinematics
from the axis-angles, compared segment by segment with Gene posed by mmdkit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from mmdkit.errors import FormatError
from mmdkit.retarget.amass import retarget_amass, write_amass
from mmdkit.retarget.motion import pose_source
from mmdkit.retarget.smpl import JOINT_NAMES, read_body_model

# SMPL joint rest positions (metres, y up, facing +z, the body's left at +x), a T-pose.
BODY = {"pelvis": (0, 0, 0), "left_hip": (0.09, -0.08, 0), "right_hip": (-0.09, -0.08, 0), "spine1": (0, 0.1, 0),
        "left_knee": (0.1, -0.45, 0), "right_knee": (-0.1, -0.45, 0), "spine2": (0, 0.22, 0),
        "left_ankle": (0.1, -0.85, -0.02), "right_ankle": (-0.1, -0.85, -0.02), "spine3": (0, 0.28, 0),
        "left_foot": (0.11, -0.9, 0.1), "right_foot": (-0.11, -0.9, 0.1), "neck": (0, 0.5, 0),
        "left_collar": (0.07, 0.42, 0), "right_collar": (-0.07, 0.42, 0), "head": (0, 0.6, 0.02),
        "left_shoulder": (0.18, 0.45, 0), "right_shoulder": (-0.18, 0.45, 0), "left_elbow": (0.45, 0.45, 0),
        "right_elbow": (-0.45, 0.45, 0), "left_wrist": (0.7, 0.45, 0), "right_wrist": (-0.7, 0.45, 0),
        "left_hand": (0.78, 0.45, 0), "right_hand": (-0.78, 0.45, 0), "jaw": (0, 0.62, 0.05),
        "left_eye_smplhf": (0.03, 0.66, 0.08), "right_eye_smplhf": (-0.03, 0.66, 0.08)}
PARENT = {"jaw": "head", "left_eye_smplhf": "head", "right_eye_smplhf": "head"}
SMPL_PARENTS = (-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 20, 21)
FINGER_BASE = {"index": (0.08, 0.0, 0.03), "middle": (0.085, 0.0, 0.01), "ring": (0.08, 0.0, -0.01),
               "pinky": (0.075, 0.0, -0.03), "thumb": (0.02, -0.01, 0.04)}
# (source humanoid bone a, b) -> (SMPL joint a, b): world directions compared
SEGMENTS = {("leftUpperArm", "leftLowerArm"): ("left_shoulder", "left_elbow"),
            ("leftLowerArm", "leftHand"): ("left_elbow", "left_wrist"),
            ("rightUpperArm", "rightLowerArm"): ("right_shoulder", "right_elbow"),
            ("rightLowerArm", "rightHand"): ("right_elbow", "right_wrist"),
            ("leftUpperLeg", "leftLowerLeg"): ("left_hip", "left_knee"),
            ("leftLowerLeg", "leftFoot"): ("left_knee", "left_ankle"),
            ("rightUpperLeg", "rightLowerLeg"): ("right_hip", "right_knee"),
            ("rightLowerLeg", "rightFoot"): ("right_knee", "right_ankle"),
            ("neck", "head"): ("neck", "head")}
ARM_DEG, LEG_MEDIAN_DEG, LEG_P95_DEG, NECK_DEG = 1.0, 5.0, 15.0, 5.0  # as tests/test_retarget_motion.py
EXACT_DEG = 0.05  # no contact pass: every segment as the source's (float32 keys in between)


def joints_of(count: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, parents (J,), rest joints (J,3) metres) of a synthetic SMPL (24) or SMPL-X (55)."""
    names = list(JOINT_NAMES[count])
    pos, parents = [], []
    for j, n in enumerate(names):
        if j < 24 and count == 24 or j < 22:
            pos.append(BODY[n])
            parents.append(SMPL_PARENTS[j])
        elif n in BODY:
            pos.append(BODY[n])
            parents.append(names.index(PARENT[n]))
        else:  # finger joints: side_finger1..3 in a row along the hand
            side, finger, k = n.split("_")[0], n.split("_")[1][:-1], int(n[-1])
            sign = 1.0 if side == "left" else -1.0
            base = np.array(BODY[f"{side}_wrist"]) + np.array(FINGER_BASE[finger]) * (sign, 1, 1)
            pos.append(tuple(base + (sign * 0.025 * (k - 1), 0, 0)))
            parents.append(names.index(f"{side}_wrist") if k == 1 else j - 1)
    return names, np.array(parents), np.array(pos, np.float64)


def body_model_arrays(count: int = 24, seed: int = 0) -> dict:
    """A tiny body model in the published layout: 4 vertices around each joint (a tetrahedron, its
    4 faces), J_regressor averaging them, random-ish shapedirs/posedirs, one-hot weights."""
    rng = np.random.default_rng(seed)
    names, parents, joints = joints_of(count)
    J = len(names)
    tet = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], np.float64) * 0.01
    v = (joints[:, None, :] + tet[None]).reshape(-1, 3)
    reg = np.kron(np.eye(J), np.full((1, 4), 0.25))
    # shape directions: a joint cluster moves as a whole, mirror-symmetric as a body is (the left
    # side's move with x negated on the right, none across on the middle), plus per-vertex noise
    # summing to zero in each cluster
    move = {n: rng.normal(0.0, 0.01, (3, 10)) for n in names if not n.startswith("right")}
    for n in names:
        if n.startswith("right"):
            move[n] = move["left" + n[5:]] * np.array([-1.0, 1.0, 1.0])[:, None]
        elif not n.startswith("left"):
            move[n][0] = 0.0
    noise = rng.normal(0.0, 0.005, (J, 4, 3, 10))
    shapedirs = np.stack([move[n] for n in names])[:, None] + noise - noise.mean(1, keepdims=True)
    shapedirs = shapedirs.reshape(4 * J, 3, 10)
    faces = np.concatenate([np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]]) + 4 * j for j in range(J)])
    kintree = np.stack([np.where(parents < 0, 2 ** 32 - 1, parents), np.arange(J)]).astype(np.uint32)
    return dict(v_template=v, shapedirs=shapedirs, posedirs=rng.normal(0.0, 0.001, (4 * J, 3, 9 * (J - 1))),
                J_regressor=reg, weights=np.kron(np.eye(J), np.ones((4, 1))), kintree_table=kintree,
                f=faces.astype(np.uint32), J=reg @ v)


def rodrigues(aa: np.ndarray) -> np.ndarray:
    """(…,3) axis-angle → (…,3,3) rotation matrices."""
    angle = np.linalg.norm(aa, axis=-1)[..., None, None]
    k = aa / np.maximum(np.linalg.norm(aa, axis=-1, keepdims=True), 1e-12)
    K = np.zeros(aa.shape[:-1] + (3, 3))
    K[..., 0, 1], K[..., 0, 2], K[..., 1, 2] = -k[..., 2], k[..., 1], -k[..., 0]
    K = K - np.swapaxes(K, -1, -2)
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * (K @ K)


def smpl_joints(poses, trans, rest, parents) -> np.ndarray:
    """(F,J,3) posed joints: SMPL's kinematic chain, root at rest[0] + trans."""
    F, J = len(poses), len(parents)
    R = rodrigues(poses.reshape(F, J, 3))
    G, p = np.zeros((F, J, 3, 3)), np.zeros((F, J, 3))
    G[:, 0], p[:, 0] = R[:, 0], rest[0] + trans
    for j in range(1, J):
        a = parents[j]
        G[:, j] = G[:, a] @ R[:, j]
        p[:, j] = p[:, a] + G[:, a] @ (rest[j] - rest[a])
    return p


def check_segments(gene, dance, frames, out, body, betas, up, contact):
    from mmdkit.retarget import humanoid_map

    names = list(body.names)
    got = smpl_joints(out["poses"], out["trans"], body.joints(betas), body.parents)
    sp, _ = pose_source(gene, dance, frames)
    sm = humanoid_map(gene)
    turn = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]]) if up == "z" else np.eye(3)  # +90° about x
    for (a, b), (ja, jb) in SEGMENTS.items():
        d_src = (sp[:, sm[b]] - sp[:, sm[a]]) * (1, 1, -1) @ turn.T  # MMD -> right-handed (-> z up)
        d_smpl = got[:, names.index(jb)] - got[:, names.index(ja)]
        cos = np.sum(d_src * d_smpl, 1) / np.linalg.norm(d_src, axis=1) / np.linalg.norm(d_smpl, axis=1)
        ang = np.degrees(np.arccos(np.clip(cos, -1, 1)))
        if not contact:
            assert ang.max() < EXACT_DEG, (a, ang.max())
        elif "Arm" in a:
            assert np.percentile(ang, 95) < ARM_DEG, (a, np.percentile(ang, 95))
        elif "Leg" in a:
            assert np.median(ang) < LEG_MEDIAN_DEG and np.percentile(ang, 95) < LEG_P95_DEG, (a, np.median(ang))
        else:
            assert ang.max() < NECK_DEG, (a, ang.max())
    return got


@pytest.mark.parametrize("count, up, contact", [(24, "z", False), (24, "y", False), (55, "z", False),
                                                (24, "z", True)])
def test_amass_poses_reproduce_the_dance(gene, dance, tmp_path, count, up, contact):
    """The written axis-angles, posed by SMPL's own chain, point every limb where Gene's points
    (exactly without the contact pass; with it, legs within the tolerances of the other targets);
    the feet stay above the floor (the body's rest ankle height) and the hips move."""
    path = tmp_path / "smplx_female_test.npz"
    np.savez(path, **body_model_arrays(count))
    body = read_body_model(path)
    betas = np.zeros(10) if contact else np.linspace(-1.0, 1.0, 10)
    frames = np.arange(0, 600, 2)
    out = retarget_amass(gene, dance, body, betas=betas, frames=frames, up=up, contact=contact)
    write_amass(tmp_path / "out.npz", out)
    with np.load(tmp_path / "out.npz", allow_pickle=False) as f:
        back = {k: f[k] for k in f.files}
    assert set(back) == {"poses", "trans", "betas", "gender", "mocap_framerate"}
    assert back["poses"].shape == (len(frames), 3 * count) and back["trans"].shape == (len(frames), 3)
    assert np.array_equal(back["betas"], betas) and str(back["gender"]) == "female"
    assert float(back["mocap_framerate"]) == 30.0 and body.family == ("SMPL" if count == 24 else "SMPL-X")
    got = check_segments(gene, dance, frames, back, body, betas, up, contact)
    height = got[..., 2 if up == "z" else 1]
    rest = body.joints(betas)
    ankles = [body.names.index(n) for n in ("left_ankle", "right_ankle")]
    if contact:
        assert height[:, ankles].min() > rest[ankles, 1].min() - 0.01
    assert np.ptp(back["trans"], axis=0).max() > 0.05
    if count == 55:  # fingers keyed: Gene's hands curl
        assert np.abs(back["poses"][:, 3 * 25:]).max() > 0.1


def test_pkl_and_refusals(gene, dance, tmp_path):
    """A pickle of numpy arrays reads as the .npz; chumpy objects, an object-array regressor and a
    wrong joint count are refused with one line naming the file."""
    arrays = body_model_arrays(24)
    np.savez(tmp_path / "a.npz", **arrays)
    (tmp_path / "a.pkl").write_bytes(pickle.dumps(dict(arrays, bs_style="lbs"), protocol=2))
    from_pkl, from_npz = read_body_model(tmp_path / "a.pkl"), read_body_model(tmp_path / "a.npz")
    assert np.allclose(from_pkl.joints([0.5]), from_npz.joints([0.5]))
    (tmp_path / "ch.pkl").write_bytes(b"\x80\x02}q\x00X\x09\x00\x00\x00shapedirsq\x01cchumpy.ch\nCh\nq\x02)\x81q\x03s.")
    with pytest.raises(FormatError, match="ch.pkl: the pickle needs chumpy.ch.Ch .*convert it to .npz"):
        read_body_model(tmp_path / "ch.pkl")
    np.savez(tmp_path / "obj.npz", **dict(arrays, J_regressor=np.array([{"sparse": 1}], dtype=object)))
    with pytest.raises(FormatError, match="obj.npz: J_regressor is stored as Python objects"):
        read_body_model(tmp_path / "obj.npz")
    np.savez(tmp_path / "j23.npz", **dict(arrays, J_regressor=arrays["J_regressor"][:23],
                                         kintree_table=arrays["kintree_table"][:, :23]))
    with pytest.raises(FormatError, match="23 joints"):
        read_body_model(tmp_path / "j23.npz")


def test_cli_writes_amass_npz(assets, mmdkit_cli, tmp_path):
    np.savez(tmp_path / "SMPL_NEUTRAL.npz", **body_model_arrays(24))
    out = tmp_path / "dance.npz"
    source = ["retarget", assets / "wavefile" / "wavefile_v2.vmd", "--source", assets / "gene" / "Gene.pmx",
              "--frames", "0:20"]
    args = source + ["--target", tmp_path / "SMPL_NEUTRAL.npz"]
    code, stdout, err = mmdkit_cli(*args, "-o", out)
    assert code == 0, err
    assert "21 frames" in stdout and "AMASS" in stdout
    with np.load(out, allow_pickle=False) as f:
        assert f["poses"].shape == (21, 72) and str(f["gender"]) == "neutral"
    code, _, err = mmdkit_cli(*args, "-o", tmp_path / "x.vmd")
    assert code == 2 and err.count("\n") == 1 and "writes AMASS .npz" in err
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    code, _, err = mmdkit_cli(*source, "--target", tmp_path / "bad.npz", "-o", tmp_path / "y.npz")
    assert code == 2 and err.count("\n") == 1 and "bad.npz: not a body model .npz" in err, err
    assert not (tmp_path / "y.npz").exists() and not (tmp_path / "x.vmd").exists()
