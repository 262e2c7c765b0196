"""VRM Animation (.vrma) output (#26): three-vrm's own loader plays what mmdkit writes as mmdkit
poses it, and dances survive the trip through a .vrma.

- three-vrm (``@pixiv/three-vrm`` + ``three-vrm-animation`` in Node, tools/threejs/vrma_pose.mjs):
  a dance retargeted onto a VRM 1.0 and a VRM 0.x file and written by ``mmdkit retarget -o
  x.vrma`` gives, through VRMAnimationLoaderPlugin + createVRMAnimationClip, the normalized
  humanoid world rotations mmdkit's pose of the retargeted motion has (≤ 1e-4 rad; measured
  ≤ 5.4e-6 over 240 frames), the bone positions (≤ 1e-4 m) and the expression weights (≤ 1e-5);
  Gene's own dance written as .vrma (A-pose rest → VRM's T-pose) played by three-vrm on a VRM 1.0
  points its arms and legs where Gene's point (< 0.1°).
- Round trips with the contact pass off (it moves legs on purpose): Gene + wavefile → .vrma
  (``mmdkit export``) → retargeted back onto Gene, and Gene → a VRM (.vrma) → Gene, give back the
  world rotations of the humanoid bones both carry within 1e-4 rad — the arms' roll included (the
  twist between two humanoid bones goes onto 腕捩/手捩, each humanoid bone keeps its own) and the
  leaves (distal fingers, toes: they take their parent's rest alignment) and the eyes (append
  followers of 両目: 両目 keyed from one, the other keeps what the append does not give it).
- The file is valid glTF (Khronos validator), the CLI and Python paths write it, bad input is one line.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess

import numpy as np
import pytest
from helpers import THREEJS
from test_export_gltf import assert_valid

from mmdkit import load
from mmdkit.export import bake, export
from mmdkit.formats.io import read_bytes
from mmdkit.importers import clips_of, read_gltf_model
from mmdkit.importers.vrm import MMD_NAMES
from mmdkit.model.space import MMD_UNITS_PER_METRE, Space
from mmdkit.retarget import humanoid_map, retarget
from mmdkit.retarget.motion import pose_source
from mmdkit.retarget.quat import qconj, qmul

ROT_TOL = 1e-4
"""Radians: float32 storage and the engine's ~1e-5 drift, with room."""
FRAMES = np.arange(0, 240)
ROUND_TRIP_FRAMES = np.r_[0:120, 2120:2240]
"""Frames compared after a round trip: also late ones, where a float32 key time (~73 s) is
~4e-6 s off f/30 (a reader must take it as the key, not interpolate 1e-4 of a frame away)."""
TO_GLTF = Space(1.0 / MMD_UNITS_PER_METRE)


def angle(a, b):
    """Radians between rotations a and b (…, 4)."""
    d = qmul(qconj(a), b)
    return 2 * np.arctan2(np.linalg.norm(d[..., :3], axis=-1), np.abs(d[..., 3]))


def vrma_json(path) -> dict:
    data = path.read_bytes()
    n = struct.unpack("<I", data[12:16])[0]
    return json.loads(data[20:20 + n])


def three_vrm(model_path, vrma_path, times) -> dict:
    assert shutil.which("node"), "node is missing: apt-get install nodejs npm (scripts/setup.sh)"
    assert (THREEJS / "node_modules" / "@pixiv" / "three-vrm-animation").is_dir(), \
        "three-vrm is not installed: npm ci --prefix tools/threejs (scripts/setup.sh)"
    run = subprocess.run(["node", str(THREEJS / "vrma_pose.mjs"), str(model_path), str(vrma_path),
                          ",".join(f"{t:.9g}" for t in times)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def read_back(path):
    """The .vrma as a source model and its clip (as ``mmdkit retarget X.vrma`` reads it)."""
    model = read_gltf_model(read_bytes(path), str(path))
    clips = clips_of(model)
    return model, clips.get_clip(clips.resolve(0, "--clip"), "--clip")[1]


@pytest.mark.parametrize("target", ["vrm1/VRMC_materials_mtoon_UV_Animation_Test.vrm", "vrm1/debug_robot.vrm",
                                    "vrm0/Godette_vrm_v4.vrm"])
def test_three_vrm_plays_the_written_vrma_as_mmdkit_poses_it(assets, gene, dance, mmdkit_cli, tmp_path, target):
    vrm_path = assets / "rigs" / target
    out = tmp_path / "dance.vrma"
    code, stdout, err = mmdkit_cli("retarget", assets / "wavefile" / "wavefile_v2.vmd", "--source",
                                   assets / "gene" / "Gene.pmx", "--target", vrm_path, "--frames", "0:239",
                                   "--no-contact", "-o", out)
    assert code == 0, err
    assert "240 frames" in stdout
    assert_valid(out)
    root = vrma_json(out)
    assert root["extensionsUsed"] == ["VRMC_vrm_animation"]
    ext = root["extensions"]["VRMC_vrm_animation"]
    assert ext["specVersion"] == "1.0" and root["nodes"][ext["humanoid"]["humanBones"]["hips"]["node"]]["name"] == "hips"
    assert all("rotation" not in n for n in root["nodes"])  # T-pose nodes: no rest rotations

    vrm = load(vrm_path)
    motion = retarget(gene, dance, vrm, frames=FRAMES, contact=False)
    picks = np.array([0, 1, 37, 100, 171, 239])
    world_p, world_q = pose_source(vrm, motion, picks)
    got = three_vrm(vrm_path, out, picks / 30.0)
    hmap = humanoid_map(vrm)
    bones = [hmap[n] for n in got["bones"]]
    # three-vrm's normalized world rotation = mmdkit's world delta (VRM rest = T-pose), in glTF space
    want_q = TO_GLTF.quaternions(world_q[:, bones])
    err = angle(np.asarray(got["rotation"]), want_q)
    assert err.max() < ROT_TOL, (err.max(), got["bones"][int(err.max(axis=0).argmax())])
    want_p = TO_GLTF.points(world_p[:, bones])
    assert np.abs(np.asarray(got["position"]) - want_p).max() < 1e-4  # metres: the hips track unscaled
    assert len(got["bones"]) >= 40
    # expressions: the VMD's あ/まばたき… copied onto the VRM's expressions, played by three-vrm
    assert set(got["expressions"]) == set(ext.get("expressions", {}).get("preset", {}))
    if "UV_Animation" not in target:  # (that file has no mouth or blink expressions)
        assert {"aa", "blink"} <= set(got["expressions"]), "the dance's あ/まばたき should reach aa/blink"
    weights = bake(vrm, motion, frames=picks.astype(float), physics=False).morph_weight
    for preset, values in got["expressions"].items():
        m = next(list(vrm.morph_name).index(n) for n in (preset, MMD_NAMES[preset]) if n in vrm.morph_name)
        assert np.abs(np.asarray(values) - weights[:, m]).max() < 1e-5, preset


LEAVES = tuple(f"{s}{f}Distal" for s in ("left", "right") for f in ("Thumb", "Index", "Middle", "Ring", "Little")) + \
    ("leftToes", "rightToes")


def _round_trip_errors(gene, dance, vrma_path, shared):
    """{humanoid bone: max radians} between Gene dancing ``dance`` and Gene dancing the .vrma retargeted back."""
    src, clip = read_back(vrma_path)
    back = retarget(src, clip, gene, contact=False)
    _, q0 = pose_source(gene, dance, ROUND_TRIP_FRAMES)
    _, q1 = pose_source(gene, back, ROUND_TRIP_FRAMES)
    hmap = humanoid_map(gene)
    errors = {}
    for name in shared:
        b = hmap[name]
        errors[name] = float(angle(q0[:, b], q1[:, b]).max())  # whole rotations, the arms' roll included
    return errors


def test_mmd_to_vrma_to_the_same_mmd_model(gene, dance, tmp_path):
    path = tmp_path / "gene.vrma"
    info = export(gene, dance, path, frames=ROUND_TRIP_FRAMES.astype(float), physics=False)
    assert info["format"] == "vrma" and info["frames"] == len(ROUND_TRIP_FRAMES) and "aa" in info["expressions"]
    hmap = humanoid_map(gene)
    shared = [n for n, b in hmap.as_dict().items() if b >= 0]
    errors = _round_trip_errors(gene, dance, path, shared)
    exact = errors  # every humanoid bone Gene has, the eyes (append followers of 両目) included
    assert len(exact) >= 50 and max(exact.values()) < ROT_TOL, max(exact.items(), key=lambda kv: kv[1])
    # the leaves (distal fingers, toes) take their parent's rest alignment: they come back exact too
    assert sum(n in errors for n in LEAVES) >= 10


@pytest.mark.parametrize("target", ["vrm1/debug_robot.vrm", "vrm0/Godette_vrm_v4.vrm"])
def test_vmd_to_vrm_to_vmd(assets, gene, dance, tmp_path, target):
    vrm = load(assets / "rigs" / target)
    path = tmp_path / "vrm.vrma"
    export(vrm, retarget(gene, dance, vrm, frames=ROUND_TRIP_FRAMES, contact=False), path,
           frames=ROUND_TRIP_FRAMES.astype(float), physics=False)
    gmap, vmap = humanoid_map(gene), humanoid_map(vrm)
    shared = [n for n, b in gmap.as_dict().items() if b >= 0 and vmap[n] >= 0]
    errors = _round_trip_errors(gene, dance, path, shared)
    assert len(errors) >= 40 and max(errors.values()) < ROT_TOL, max(errors.items(), key=lambda kv: kv[1])


def test_export_cli_writes_vrma_and_refuses_a_model_without_humanoid(assets, mmdkit_cli, tmp_path):
    out = tmp_path / "gene.vrma"
    code, _, err = mmdkit_cli("export", assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd",
                              "--frames", "0:9", "--no-physics", "-o", out)
    assert code == 0, err
    nodes = vrma_json(out)["nodes"]
    assert {"hips", "leftUpperArm", "rightToes"} <= {n["name"] for n in nodes}
    arm = next(n for n in nodes if n["name"] == "leftLowerArm")["translation"]
    assert arm[0] > 0.15 and abs(arm[1]) < 1e-6 and abs(arm[2]) < 1e-6  # T-pose: the left arm along +x
    bad = tmp_path / "fox.vrma"
    code, _, err = mmdkit_cli("export", assets / "gltf" / "Fox.glb", "--frames", "0:3", "-o", bad)
    error = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(error) == 1 and "Fox.glb: no humanoid leftUpperArm" in error[0], err
    assert not bad.exists()


def test_three_vrm_plays_an_mmd_models_vrma_on_a_vrm_with_its_limb_directions(assets, gene, dance, tmp_path):
    """Gene's dance (A-pose rest) written as .vrma and played by three-vrm on a VRM 1.0 model: the
    arms and legs point where Gene's do (the T-pose written is the one VRM clients assume)."""
    path = tmp_path / "gene.vrma"
    export(gene, dance, path, frames=FRAMES.astype(float), physics=False)
    picks = np.arange(0, 240, 7)
    got = three_vrm(assets / "rigs" / "vrm1" / "debug_robot.vrm", path, picks / 30.0)
    at = {n: i for i, n in enumerate(got["bones"])}
    pos = np.asarray(got["position"])
    gene_p, _ = pose_source(gene, dance, picks)
    hmap = humanoid_map(gene)
    for side in ("left", "right"):
        for a, b in (("UpperArm", "LowerArm"), ("LowerArm", "Hand"), ("UpperLeg", "LowerLeg"), ("LowerLeg", "Foot")):
            a, b = side + a, side + b
            v = pos[:, at[b]] - pos[:, at[a]]
            w = TO_GLTF.points(gene_p[:, hmap[b]] - gene_p[:, hmap[a]])
            cos = np.sum(v * w, -1) / np.linalg.norm(v, axis=-1) / np.linalg.norm(w, axis=-1)
            assert np.degrees(np.arccos(np.clip(cos, -1, 1))).max() < 0.1, a
