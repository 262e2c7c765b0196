"""glTF / GLB export: Khronos validator (zero errors), round trips through the native reader and
the importer against the engine's own skinning, key-reduction tolerance, textures, camera.

The validator runs in Node (tools/gltf_validator; ``npm ci --prefix tools/gltf_validator``, done
by scripts/setup.sh). Vertices are compared in glTF space (metres) after converting the engine's
MMD-space vertices once: bound = 1e-3 MMD units × scale.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.export import bake, export
from mmdkit.export.gltf import write_gltf
from mmdkit.export.gltf.materials import plain_png
from mmdkit.formats.gltf import clip_node_local, clip_target_weights, load_gltf, world_matrices
from mmdkit.model.builder import ModelBuilder
from mmdkit.animation.builder import MotionBuilder
from mmdkit.model.model import DEFORM_SDEF, MATERIAL_DOUBLE_SIDED
from mmdkit.physics import physics_for
from mmdkit.runtime import Character

from helpers import threejs_pose

REPO = Path(__file__).resolve().parents[1]
VALIDATOR = REPO / "tools" / "gltf_validator"
S = 1 / 12.5  # metres per MMD unit
FLIP = np.array([S, S, -S])
C = np.diag([S, S, -S, 1.0])


def validate(*paths) -> list[dict]:
    """Khronos glTF-Validator reports of ``paths`` (one dict each)."""
    assert shutil.which("node"), "node is missing: apt-get install nodejs npm (scripts/setup.sh)"
    assert (VALIDATOR / "node_modules" / "gltf-validator").is_dir(), \
        "the validator is not installed: npm ci --prefix tools/gltf_validator (scripts/setup.sh)"
    run = subprocess.run(["node", str(VALIDATOR / "validate.mjs"), *map(str, paths)], capture_output=True,
                         text=True, timeout=300)
    reports = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == len(paths), run.stdout + run.stderr
    return reports


def assert_valid(*paths) -> None:
    for r in validate(*paths):
        assert "failure" not in r, r
        assert r["errors"] == 0, json.dumps(r["messages"][:10], ensure_ascii=False)


def read_back(path, frames):
    """(asset, joint world (T, J, 4, 4) glTF space at the baked frames' times)."""
    a = load_gltf(str(path))
    t = (np.asarray(frames, np.float64) - frames[0]) / 30
    world = world_matrices(a.node_parent, a.node_order, clip_node_local(a, 0, t))
    return a, t, world[:, a.skins[0].joint_node]


def skin_asset(a, model, t, joint_world, i) -> np.ndarray:
    """Σ w·J(t)·IBM·(v + Σ morph) of every primitive at time index i, put back in model vertex
    order (primitive m holds np.unique of material m's triangles) → (V, 3) glTF space."""
    skin = a.skins[0]
    mesh_node = int(np.flatnonzero(a.node_mesh >= 0)[0])
    weights = clip_target_weights(a, 0, t).get(mesh_node)
    jm = joint_world[i] @ skin.joint_inverse_bind
    out = np.full((model.num_vertices, 3), np.nan)
    start = model.material_face_start
    prims = iter(a.meshes[0].primitives)
    for m in range(model.num_materials):
        if start[m + 1] == start[m]:
            continue
        p = next(prims)
        used = np.unique(model.face_vertex_index[start[m]:start[m + 1]])
        v = p.vertex_position.astype(np.float64)
        if weights is not None:
            v = v + np.tensordot(weights[i], p.target_position.astype(np.float64), 1)
        mat = np.einsum("vk,vkij->vij", p.vertex_weight[:, :4].astype(np.float64), jm[p.vertex_joint[:, :4]])
        out[used] = np.einsum("vij,vj->vi", mat[:, :3, :3], v) + mat[:, :3, 3]
    return out


def engine_vertices(character, frames) -> list[np.ndarray]:
    """The engine's own CPU-skinned vertices at ``frames`` (played in order), glTF space."""
    V = character.model.num_vertices
    pos, nrm = np.empty((V, 3), np.float32), np.empty((V, 3), np.float32)
    out = []
    for f in frames:
        character.update(float(f))
        character.skin(pos, nrm)
        out.append(pos.astype(np.float64) * FLIP)
    return out


def check_round_trip(model, motion, out, frames, physics, check_at) -> dict:
    """Bake once; export every frame keyed (``reduce=False``) and reduced (``reduce=True``) to
    ``out`` with suffixes; validate both; read back. {reduce: (largest vertex error, largest joint
    translation error — MMD units —, largest rotation-matrix entry error, export summary)} at
    frame indices ``check_at``, against the engine's own skinning played over ``frames``."""
    baked = bake(model, motion, frames, physics=physics)
    paths = {r: out.with_name(f"{out.stem}_{'reduced' if r else 'full'}{out.suffix}") for r in (False, True)}
    stats = {r: write_gltf(model, baked, p, reduce=r, warn=lambda s: None) for r, p in paths.items()}
    assert_valid(*paths.values())
    engine = engine_vertices(Character(model, motion, physics_for(model, True) if physics else None), frames)
    results = {}
    for r, path in paths.items():
        a, t, joint_world = read_back(path, frames)
        bones = [model.bone_name.index(a.node_name[n]) for n in a.skins[0].joint_node]
        want = C @ baked.bone_world[:, bones].astype(np.float64) @ np.linalg.inv(C)
        moved = np.linalg.norm(joint_world[..., :3, 3] - want[..., :3, 3], axis=-1).max() / S
        turned = np.abs(joint_world[..., :3, :3] - want[..., :3, :3]).max()
        worst = 0.0
        for i in check_at:
            got = skin_asset(a, model, t, joint_world, i)
            drawn = ~np.isnan(got[:, 0])  # vertices no triangle uses are not exported
            assert drawn.sum() > 0.9 * model.num_vertices
            worst = max(worst, float(np.linalg.norm(got[drawn] - engine[i][drawn], axis=1).max() / S))
        results[r] = (worst, moved, turned, stats[r])
    return results


@pytest.fixture(scope="module")
def wavefile(assets):
    return mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")


def assert_round_trip(results, model) -> None:
    """Every frame keyed: vertices within 1e-3 units, joints within 1e-4 (float32 noise). Reduced:
    fewer keys; vertices and joints within the tolerance (1e-4 × model height) + the same noise."""
    worst, moved, turned, full = results[False]
    assert worst < 1e-3 and moved < 1e-4 and turned < 1e-4, (worst, moved, turned)
    assert full["keys"] == full["full_keys"] and full["tolerance"] is None
    worst_r, moved_r, _, reduced = results[True]
    assert reduced["tolerance"] == pytest.approx(1e-4 * np.ptp(model.vertex_position[:, 1]))
    assert worst_r <= reduced["tolerance"] + 1e-4 and moved_r <= reduced["tolerance"] + 1e-4, (worst_r, moved_r)
    assert reduced["keys"] < full["keys"] / 2


def test_gene_with_physics_validates_and_matches_the_engine(assets, wavefile, tmp_path):
    gene = mmdkit.load(assets / "gene" / "Gene.pmx")
    results = check_round_trip(gene, wavefile, tmp_path / "gene.glb", np.arange(600, 640, dtype=np.float64), True,
                               [0, 13, 39])
    assert_round_trip(results, gene)
    assert results[False][3]["joints"] == 145 < gene.num_bones  # IK targets, tips and helpers left out


@pytest.mark.parametrize("rel, ext", [("mokou/mokou_A.pmd", ".glb"), ("mei/Model/mei/mei.pmd", ".glb"),
                                      ("low_miku/miku.pmd", ".gltf")])
def test_characters_validate_and_match_the_engine(assets, wavefile, tmp_path, rel, ext):
    model = mmdkit.load(assets / rel)
    results = check_round_trip(model, wavefile, tmp_path / ("out" + ext), np.arange(300, 330, 2, dtype=np.float64),
                               False, [0, 7, 14])
    assert_round_trip(results, model)


def test_textures_embedded_in_glb_and_beside_gltf(assets, tmp_path):
    mei = mmdkit.load(assets / "mei" / "Model" / "mei" / "mei.pmd")
    write_gltf(mei, None, tmp_path / "mei.glb", warn=lambda s: None)
    report = validate(tmp_path / "mei.glb")[0]
    assert report["errors"] == 0 and report["warnings"] == 0, report["messages"]
    a = load_gltf(str(tmp_path / "mei.glb"))
    vest = (assets / "mei" / "Model" / "mei" / "vest.png").read_bytes()  # has iCCP and cHRM chunks
    assert any(img.data == plain_png(vest) and img.mime == "image/png" for img in a.images)  # PNG kept
    assert len(plain_png(vest)) == len(vest) - (2637 + 12) - (32 + 12)  # less its colour-space chunks
    for img in a.images:  # the pixels are the file's
        with Image.open(io.BytesIO(img.data)) as im:
            assert im.size[0] > 0 and "icc_profile" not in im.info
    assert [m.name for m in a.materials] == list(mei.material_name)
    for m, gm in zip(range(mei.num_materials), a.materials):
        assert gm.double_sided == bool(mei.material_flags[m] & MATERIAL_DOUBLE_SIDED)
        np.testing.assert_allclose(gm.base_color, np.clip(mei.material_diffuse[m], 0, 1), atol=1e-6)
        if mei.material_diffuse[m, 3] < 1:
            assert gm.alpha_mode == "BLEND"
    miku = mmdkit.load(assets / "low_miku" / "miku.pmd")
    warnings = []
    stats = write_gltf(miku, None, tmp_path / "miku.gltf", warn=warnings.append)
    assert_valid(tmp_path / "miku.gltf")
    images = [Path(f) for f in stats["files"] if f.endswith(".png")]
    assert images and all(f.read_bytes().startswith(b"\x89PNG") for f in images)  # beside, PNG
    assert not any(f.endswith(".tga") for f in stats["files"])
    assert (tmp_path / "miku.bin").is_file()


def _two_bone_model(deform=None):
    """Root → arm (deforms) → tip (helper, no vertices) + an unrelated IK-like helper root."""
    mb = ModelBuilder(name="t")
    root = mb.add_bone("root", (0, 0, 0))
    arm = mb.add_bone("arm", (0, 1, 0), parent=root)
    mb.add_bone("tip", (0, 2, 0), parent=arm)
    mb.add_bone("helper", (1, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 0.5, 0.25, 0.5), double_sided=True)
    pos = np.array([[0, 0, 0], [1, 1, 0], [0, 2, 1], [1, 2, 1]], np.float32)
    mb.add_mesh(mat, pos, np.tile([0, 0, -1], (4, 1)), np.zeros((4, 2)), [[0, 1, 2], [1, 3, 2]],
                np.array([[0, 1, 0, 0]] * 4), np.array([[0.5, 0.5, 0, 0]] * 4), deform=deform)
    mb.add_vertex_morph("smile", [1, 2], [[0, 0.5, 0], [0, 0.25, 0]])
    return mb.build()


def _arm_motion():
    mo = MotionBuilder(model_name="t")
    for f, a in ((0, 0.0), (10, 1.0), (20, -0.5)):
        mo.add_bone_key("arm", f, rotation=(np.sin(a / 2), 0, 0, np.cos(a / 2)))
        mo.add_morph_key("smile", f, abs(a))
    return mo.build()


def test_skeleton_skips_helpers_and_converts_handedness(tmp_path):
    model = _two_bone_model()
    stats = write_gltf(model, bake(model, _arm_motion(), np.arange(21.0), physics=False), tmp_path / "t.glb",
                       warn=lambda s: None)
    assert_valid(tmp_path / "t.glb")
    a = load_gltf(str(tmp_path / "t.glb"))
    assert [a.node_name[n] for n in a.skins[0].joint_node] == ["root", "arm"] and stats["joints"] == 2
    arm = a.skins[0].joint_node[1]
    np.testing.assert_allclose(a.node_translation[arm], [0, S, 0], atol=1e-7)
    np.testing.assert_allclose(a.skins[0].joint_inverse_bind[1][:3, 3], [0, -S, 0], atol=1e-7)
    p = a.meshes[0].primitives[0]
    np.testing.assert_allclose(p.vertex_position[2], [0, 2 * S, -S], atol=1e-7)  # z flipped, metres
    np.testing.assert_array_equal(p.face_vertex[0], [2, 1, 0])  # winding reversed
    assert a.meshes[0].target_name == ("smile",)
    np.testing.assert_allclose(p.target_position[0, 1], [0, 0.5 * S, 0], atol=1e-7)
    assert a.materials[0].alpha_mode == "BLEND" and a.materials[0].double_sided
    # a rotation about x keeps its axis under the mirror and turns the other way: (−x, −y, z, w)
    _, _, world = read_back(tmp_path / "t.glb", np.arange(21.0))
    rot = world[10, 1, :3, :3]  # MMD's Rx(1) = [[1,0,0],[0,c,−s],[0,s,c]] mirrored: S·R·S
    np.testing.assert_allclose(rot, [[1, 0, 0], [0, np.cos(1), np.sin(1)], [0, -np.sin(1), np.cos(1)]], atol=1e-6)


def test_sdef_is_linearised_with_one_warning(tmp_path):
    model = _two_bone_model(deform=DEFORM_SDEF)
    warnings = []
    stats = write_gltf(model, None, tmp_path / "s.glb", warn=warnings.append)
    assert_valid(tmp_path / "s.glb")
    assert stats["linearised_vertices"] == 4
    assert [w for w in warnings if "SDEF" in w] == [warnings[0]] and "4 SDEF" in warnings[0]


def test_camera_becomes_an_animated_camera_node(tmp_path):
    from mmdkit.animation.view import mmd_view

    model = _two_bone_model()
    cam = MotionBuilder(model_name="camera")
    cam.add_camera_key(0, -30.0, (0, 10, 0), (0.1, 0.5, 0.0), fov=30)
    cam.add_camera_key(30, -20.0, (2, 12, 1), (0.3, -1.0, 0.2), fov=30)
    cam = cam.build()
    frames = np.arange(31.0)
    export(model, _arm_motion(), tmp_path / "c.glb", frames=frames, physics=False, camera=cam, warn=lambda s: None)
    assert_valid(tmp_path / "c.glb")
    a = load_gltf(str(tmp_path / "c.glb"))
    node = a.node_name.index("MMD camera")
    t = frames / 30
    world = world_matrices(a.node_parent, a.node_order, clip_node_local(a, 0, t))[:, node]
    from mmdkit.animation.camera import sample_camera

    sampled = sample_camera(cam, frames)
    p = np.array([1.0, 2.0, 3.0, 1.0])  # an MMD point: its view-space position must agree
    for i in (0, 12, 30):
        want = mmd_view(sampled["position"][i], sampled["rotation"][i], sampled["distance"][i]) @ p
        got = np.linalg.inv(world[i]) @ (C @ p)
        np.testing.assert_allclose(got[:3] / S, want[:3], atol=2e-3)


def test_importer_reads_the_export_back_and_poses_it(assets, wavefile, tmp_path):
    from mmdkit.importers.gltf import load_gltf_scene

    mei = mmdkit.load(assets / "mei" / "Model" / "mei" / "mei.pmd")
    frames = np.arange(0.0, 31.0)
    write_gltf(mei, bake(mei, wavefile, frames, physics=False), tmp_path / "m.glb", reduce=False, warn=lambda s: None)
    model, clips = load_gltf_scene(tmp_path / "m.glb")
    motion = clips[next(iter(clips))]
    engine = engine_vertices(Character(mei, wavefile), frames[[0, 15, 30]])
    got = engine_vertices(Character(model, motion), frames[[0, 15, 30]])
    # the importer keeps each primitive's vertices; match them to Mei's by material order
    start = mei.material_face_start
    index = np.concatenate([np.unique(mei.face_vertex_index[start[m]:start[m + 1]])
                            for m in range(mei.num_materials) if start[m + 1] > start[m]])
    assert model.num_vertices == len(index)
    for e, g in zip(engine, got):
        assert np.linalg.norm(g - e[index], axis=1).max() / S < 1e-3


def test_bad_options_are_refused(tmp_path):
    model = _two_bone_model()
    baked = bake(model, _arm_motion(), np.arange(3.0), physics=False)
    with pytest.raises(OptionError, match="reduce"):
        write_gltf(model, baked, tmp_path / "x.glb", reduce="lots")
    with pytest.raises(OptionError, match="camera"):
        write_gltf(model, baked, tmp_path / "x.glb", camera=_arm_motion())
    with pytest.raises(OptionError, match="frames"):
        write_gltf(model, bake(model, _arm_motion(), [2.0, 1.0], physics=False), tmp_path / "x.glb")
    assert not (tmp_path / "x.glb").exists()
    # through export(): refused before baking
    with pytest.raises(OptionError, match="camera"):
        export(model, _arm_motion(), tmp_path / "x.glb", frames=[0.0, 1.0], physics=False, camera=_arm_motion())
    with pytest.raises(OptionError, match="scale"):
        export(model, _arm_motion(), tmp_path / "x.gltf", frames=[0.0, 1.0], physics=False, scale=-1)


def test_skeleton_without_mesh_exports_every_bone(assets, wavefile, tmp_path):
    skeleton = mmdkit.load(assets / "fixtures" / "nanoem" / "test.pmx")  # 140 bones, no mesh
    stats = write_gltf(skeleton, bake(skeleton, wavefile, np.arange(0.0, 30.0), physics=False), tmp_path / "k.glb",
                       warn=lambda s: None)
    assert_valid(tmp_path / "k.glb")
    assert stats["joints"] == skeleton.num_bones and stats["morph_targets"] == 0
    a = load_gltf(str(tmp_path / "k.glb"))
    assert not a.meshes and not a.skins and len(a.animations) == 1


def test_glb_reads_in_assimp_when_installed(assets, wavefile, tmp_path):
    """Assimp (optional: `apt-get install assimp-utils`) reads the GLB: every triangle, the clip."""
    mei = mmdkit.load(assets / "mei" / "Model" / "mei" / "mei.pmd")
    path = tmp_path / "mei.glb"
    write_gltf(mei, bake(mei, wavefile, np.arange(0.0, 10.0), physics=False), path, warn=lambda s: None)
    assert_valid(path)
    if shutil.which("assimp") is None:
        assert not os.environ.get("CI"), "the assimp command is missing: scripts/setup.sh installs assimp-utils"
        return
    out = subprocess.run(["assimp", "info", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    faces = int(next(line.split()[-1] for line in out.stdout.splitlines() if line.startswith("Faces:")))
    channels = int(next(line.split()[-1] for line in out.stdout.splitlines() if line.startswith("Animation Channels:")))
    assert faces == mei.num_faces and channels > 0


def nlerp_rows(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Row-wise component-wise lerp then normalise (how Blender's F-curves play a rotation)."""
    q = a + s[:, None] * (b - a)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def rotation_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """(T,) angles (radians) between unit quaternions (T, 4)."""
    return 2 * np.arccos(np.minimum(np.abs(np.einsum("fk,fk->f", got, want)), 1.0))


def test_key_reduction_bounds_every_frame():
    from mmdkit.export.gltf.reduce import (LERP_L2, ROTATION_ANGLE, continuous_quaternions, joint_budgets,
                                           keep_keys)
    from mmdkit.animation.rotation import slerp_rows as _slerp

    rng = np.random.default_rng(7)
    F = 400
    time = np.arange(F) / 30.0
    walk = np.cumsum(np.cumsum(rng.normal(0, 1e-4, (F, 3, 3)), axis=0), axis=0)  # smooth: random acceleration
    axis_angle = np.cumsum(np.cumsum(rng.normal(0, 1e-4, (F, 2, 3)), axis=0), axis=0)
    # and two constant-speed turns, which slerp alone would reproduce from their two ends: 150° (the
    # lerp lags it by up to 0.2 rad in between) and 400° (past 360°: the ends' quaternions face away)
    steady = np.linspace(0, 1, F)[:, None, None] * np.radians([[0.0, 150, 0], [400, 0, 0]])
    axis_angle = np.concatenate([axis_angle, steady], axis=1)
    angle = np.linalg.norm(axis_angle, axis=2, keepdims=True)
    quat = continuous_quaternions(np.concatenate([np.sin(angle / 2) * axis_angle / np.maximum(angle, 1e-12),
                                                  np.cos(angle / 2)], axis=2))
    for values, mode, tol in ((walk, LERP_L2, np.array([1e-3, 1e-2, 0.0])),
                              (quat, ROTATION_ANGLE, np.array([1e-3, 1e-2, 1e-3, 1e-3]))):
        keep = np.empty((F, values.shape[1]), bool)
        keep_keys(time, values, tol, mode, np.ones(values.shape[2]), keep)
        for c in range(values.shape[1]):
            k = np.flatnonzero(keep[:, c])
            assert k[0] == 0 and k[-1] == F - 1
            seg = np.clip(np.searchsorted(k, np.arange(F), side="right") - 1, 0, len(k) - 2)
            a, b = k[seg], k[seg + 1]
            s = (time - time[a]) / (time[b] - time[a])
            if mode == LERP_L2:
                got = values[a, c] + s[:, None] * (values[b, c] - values[a, c])
                err = np.linalg.norm(got - values[:, c], axis=1)
            else:  # both ways players interpolate rotations: slerp (glTF, three.js) and lerp + normalise (Blender)
                err = np.maximum(rotation_error(_slerp(values[a, c], values[b, c], s), values[:, c]),
                                 rotation_error(nlerp_rows(values[a, c], values[b, c], s), values[:, c]))
                assert (np.einsum("fk,fk->f", values[a, c], values[b, c]) >= 0).all()  # one hemisphere
            assert err.max() <= tol[c] + 1e-9
            assert tol[c] == 0 or len(k) < F / 2  # and it does drop keys
    # budgets: along any root-to-leaf path the shares of the joints that move add up to ≤ the tolerance
    parent = np.array([-1, 0, 1, 2, 1, 4, -1])
    moving = np.array([True, False, True, True, True, True, True])
    t, r = joint_budgets(parent, moving, np.ones(7), 1.0)
    for leaf in (3, 5, 6):
        path, j = [], leaf
        while j >= 0:
            path.append(j)
            j = parent[j]
        assert sum(2 * t[p] for p in path if moving[p]) <= 1.0 + 1e-12  # translation half + rotation half
    np.testing.assert_allclose(r, t)  # reach 1: the rotation half is the same number of radians


def test_assimp_reads_the_export_back_and_poses_it(assets, wavefile, tmp_path):
    """Through Assimp (mmdkit.importers.assimp: the glTF read by Assimp, then import_scene), posed
    by a Character: every imported vertex lands within 1e-3 units of the engine's vertex with the
    same bind position (Assimp joins identical vertices, so the order differs; of coincident
    vertices — seams — the closest counts)."""
    from mmdkit.importers.assimp import load_assimp_scene

    mei = mmdkit.load(assets / "mei" / "Model" / "mei" / "mei.pmd")
    frames = np.arange(0.0, 31.0)
    write_gltf(mei, bake(mei, wavefile, frames, physics=False), tmp_path / "a.glb", reduce=False, warn=lambda s: None)
    model, clips = load_assimp_scene(tmp_path / "a.glb")
    bind, same = mei.vertex_position.astype(np.float64), []
    for chunk in np.array_split(model.vertex_position.astype(np.float64), 16):  # Mei's vertices at each one
        d = np.linalg.norm(chunk[:, None] - bind[None], axis=2)
        same += [np.flatnonzero(row < 1e-4) for row in d]
    assert all(len(c) for c in same)  # every imported vertex is one of Mei's (MMD units)
    engine = engine_vertices(Character(mei, wavefile), frames[[0, 15, 30]])
    got = engine_vertices(Character(model, clips[next(iter(clips))]), frames[[0, 15, 30]])
    for e, g in zip(engine, got):
        worst = max(np.linalg.norm(e[c] - g[v], axis=1).min() for v, c in enumerate(same))
        assert worst / S < 1e-3, worst / S


def _joint_worlds(a, t, rotations: str) -> np.ndarray:
    """Node world matrices (T, N, 4, 4) of clip 0 at ``t`` with rotation keys interpolated by
    slerp (``'slerp'``: the glTF spec, three.js) or component-wise then normalised (``'nlerp'``:
    Blender)."""
    from mmdkit.formats.gltf.animation import clip_node_trs
    from mmdkit.formats.gltf.scene import trs_matrices

    translation, rotation, scale = clip_node_trs(a, 0, t)
    if rotations == "nlerp":
        for ch in a.animations[0].channels:
            if ch.path == "rotation":
                kt, kv = ch.key_time.astype(np.float64), ch.key_value.astype(np.float64)
                k = np.clip(np.searchsorted(kt, t, side="right") - 1, 0, len(kt) - 2)
                s = np.clip((t - kt[k]) / (kt[k + 1] - kt[k]), 0.0, 1.0)
                rotation[:, ch.node] = nlerp_rows(kv[k], kv[k + 1], s)
    return world_matrices(a.node_parent, a.node_order, trs_matrices(translation, rotation, scale))


@pytest.fixture(scope="module")
def gene_elbows(assets, wavefile, tmp_path_factory):
    """Gene, wavefile_v2 frames 1840–1919 (the right elbow turns through large arcs), no physics,
    written reduced (default tolerance) → (model, baked, GLB path, summary)."""
    gene = mmdkit.load(assets / "gene" / "Gene.pmx")
    baked = bake(gene, wavefile, np.arange(1840.0, 1920.0), physics=False)
    path = tmp_path_factory.mktemp("elbows") / "gene.glb"
    return gene, baked, path, write_gltf(gene, baked, path, warn=lambda s: None)


@pytest.mark.parametrize("rotations", ["slerp", "nlerp"])
def test_reduced_clip_holds_its_bound_under_both_interpolations(gene_elbows, rotations):
    """Every joint and every vertex of the reduced clip stays within the tolerance (+1e-4 float32
    noise) of the unreduced bake at every frame, whether rotations are slerped (glTF, three.js) or
    lerped component-wise and normalised (Blender)."""
    gene, baked, path, stats = gene_elbows
    a = load_gltf(str(path))
    t = (baked.frames - baked.frames[0]) / 30
    world = _joint_worlds(a, t, rotations)[:, a.skins[0].joint_node]
    bones = [gene.bone_name.index(a.node_name[n]) for n in a.skins[0].joint_node]
    want = baked.bone_world_position[:, bones] * FLIP
    bound = stats["tolerance"] + 1e-4
    moved = np.linalg.norm(world[..., :3, 3] - want, axis=2).max() / S
    assert moved <= bound, (rotations, moved, bound)
    full = Path(str(path).replace(".glb", "_full.glb"))
    write_gltf(gene, baked, full, reduce=False, warn=lambda s: None)
    fa = load_gltf(str(full))
    full_world = _joint_worlds(fa, t, "slerp")[:, fa.skins[0].joint_node]
    for i in (10, 37, 61):  # vertices: against the unreduced clip skinned the same way
        got, exact = skin_asset(a, gene, t, world, i), skin_asset(fa, gene, t, full_world, i)
        drawn = ~np.isnan(got[:, 0])
        assert np.linalg.norm(got[drawn] - exact[drawn], axis=1).max() / S <= bound
    assert stats["keys"] < stats["full_keys"] / 2


def test_reduced_clip_plays_in_threejs_within_the_bound(gene_elbows):
    """three.js's GLTFLoader + AnimationMixer play the reduced clip: every joint within the
    tolerance (+1e-4 float32 noise) of the engine's pose at the frames checked."""
    gene, baked, path, stats = gene_elbows
    a = load_gltf(str(path))
    frames = np.array([0, 13, 21, 40, 55, 79])
    got = threejs_pose(path, (baked.frames[frames] - baked.frames[0]) / 30)
    joints = a.skins[0].joint_node
    world = got["position"][:, [got["nodes"].index(int(n)) for n in joints]]
    bones = [gene.bone_name.index(a.node_name[n]) for n in joints]
    want = baked.bone_world_position[frames][:, bones] * FLIP
    assert np.linalg.norm(world - want, axis=2).max() / S <= stats["tolerance"] + 1e-4
