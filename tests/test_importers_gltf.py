"""glTF characters imported as MMD models (mmdkit.importers): bones, bind pose, clips, materials, CLI.

The reference for every pose is glTF's own skinning computed here from the asset
(Σ w·J_i(t)·IBM_i·v, unskinned meshes J_node(t)·v), converted to MMD space (z negated, 12.5 units
per metre); the model is posed through the engine (Character + CPU skinning).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import FormatError, OptionError
from mmdkit.formats.gltf import clip_node_local, clip_target_weights, load_gltf, read_gltf, world_matrices
from mmdkit.importers import clips_of, import_scene, load_gltf_scene
from mmdkit.model import model as M
from mmdkit.runtime import Character

FILES = ["CesiumMan.glb", "Fox.glb", "SimpleSkin.gltf", "RobotExpressive.glb"]
TO_MMD = np.array([12.5, 12.5, -12.5])


@pytest.fixture(scope="module")
def gltf_dir(assets):
    return assets / "gltf"


def gltf_skinning(a, clip=None, time=0.0) -> np.ndarray:
    """(V, 3) vertices of every mesh node as glTF skins them at ``time`` of ``clip`` (None: the
    rest pose, default morph weights), in MMD space, in the importer's vertex order."""
    if clip is None:
        world, weights = a.node_world.astype(np.float64), {}
    else:
        world = world_matrices(a.node_parent, a.node_order, clip_node_local(a, clip, [time]))[0]
        weights = {k: v[0] for k, v in clip_target_weights(a, clip, [time]).items()}
    out = []
    for node in np.flatnonzero(a.node_mesh >= 0):
        mesh = a.meshes[a.node_mesh[node]]
        default = mesh.target_weight if a.node_target_weight[node] is None else a.node_target_weight[node]
        w = np.asarray(weights.get(node, default), np.float64)
        for p in mesh.primitives:
            v = p.vertex_position.astype(np.float64) + np.einsum("k,kvi->vi", w, p.target_position)
            v = np.c_[v, np.ones(len(v))]
            if a.node_skin[node] >= 0:
                skin = a.skins[a.node_skin[node]]
                joint = world[skin.joint_node] @ skin.joint_inverse_bind
                m = np.einsum("vk,vkij->vij", p.vertex_weight, joint[p.vertex_joint])
                out.append(np.einsum("vij,vj->vi", m, v)[:, :3])
            else:
                out.append((v @ world[node].T)[:, :3])
    return np.concatenate(out) * TO_MMD


def engine_skinning(model, motion, frame) -> np.ndarray:
    pos = np.zeros((model.num_vertices, 3), np.float32)
    ch = Character(model, motion)
    ch.update(frame)
    ch.skin(pos, np.zeros_like(pos))
    return pos


def size_of(model) -> float:
    return float(np.ptp(model.vertex_position, axis=0).max())


def test_bones_one_per_joint_and_unskinned_mesh_node(gltf_dir):
    expect = {"CesiumMan.glb": (19, 19), "Fox.glb": (24, 24), "SimpleSkin.gltf": (2, 2),
              "RobotExpressive.glb": (58, 43)}  # Robot: 43 joints + 15 rigid parts on their own nodes
    for name, (bones, joints) in expect.items():
        a = load_gltf(gltf_dir / name)
        model, clips = import_scene(a)
        assert (model.num_bones, model.source_extras["skin_joints"]) == (bones, joints), name
        assert len(set(model.bone_name)) == model.num_bones
        assert list(clips) == [c.name or f"clip{k}" for k, c in enumerate(a.animations)]
        parents = model.bone_parent
        assert (parents < np.arange(model.num_bones)).all()  # parents first
        assert not model.vertex_bone_weight[:, 1:][model.vertex_deform == M.DEFORM_BDEF1].any()
        np.testing.assert_allclose(model.vertex_bone_weight.sum(1), 1.0, atol=1e-6)


@pytest.mark.parametrize("name", FILES)
def test_empty_motion_reproduces_the_bind_mesh(gltf_dir, name):
    a = load_gltf(gltf_dir / name)
    model, _ = import_scene(a)
    size = size_of(model)
    rest = engine_skinning(model, None, 0)
    np.testing.assert_allclose(rest, model.vertex_position, atol=1e-6 * size)
    # the bind mesh is C·v (C the skinned mesh node's world): glTF's own rest-pose skinning
    # wherever rest = bind; RobotExpressive's rest pose is not its bind pose, so there C·v directly
    if name != "RobotExpressive.glb":
        np.testing.assert_allclose(rest, gltf_skinning(a), atol=1e-5 * size)
    else:
        first = 0
        for node in np.flatnonzero(a.node_mesh >= 0):
            for p in a.meshes[a.node_mesh[node]].primitives:
                n = len(p.vertex_position)
                if a.node_skin[node] >= 0:
                    c = a.node_world[node].astype(np.float64)
                    want = (p.vertex_position @ c[:3, :3].T + c[:3, 3]) * TO_MMD
                    np.testing.assert_allclose(rest[first:first + n], want, atol=1e-5 * size)
                first += n
        assert np.abs(rest - gltf_skinning(a)).max() > 0.05 * size  # its arms hang at rest


@pytest.mark.parametrize("name", FILES)
def test_clips_skin_as_gltf_does(gltf_dir, name):
    a = load_gltf(gltf_dir / name)
    model, clips = import_scene(a)
    size = size_of(model)
    for k, clip in enumerate(clips):
        motion = clips[clip]
        assert motion.last_frame == int(np.ceil(a.animations[k].duration * 30 - 1e-6))
        for frame in np.unique(np.linspace(0, motion.last_frame, 4).round()):
            got = engine_skinning(model, motion, frame)
            want = gltf_skinning(a, k, min(frame / 30, a.animations[k].duration))
            assert np.abs(got - want).max() < 1e-4 * size, (clip, frame)


@pytest.mark.parametrize("name", ["MorphStressTest/glTF/MorphStressTest.gltf",
                                  "AnimatedMorphCube/glTF/AnimatedMorphCube.gltf", "SimpleMorph/glTF/SimpleMorph.gltf",
                                  "simple_skin/quad_skin.glb"])
def test_morph_and_node_clips_skin_as_gltf_does(assets, name):
    """Weights channels become morph keys named by target; unskinned animated nodes move their mesh."""
    a = load_gltf(assets / "assimp" / "models" / "glTF2" / name)
    model, clips = import_scene(a)
    size = size_of(model)
    np.testing.assert_allclose(engine_skinning(model, None, 0), gltf_skinning(a), atol=1e-5 * size)
    for k, clip in enumerate(clips):
        motion = clips[clip]
        for frame in np.unique(np.linspace(0, motion.last_frame, 5).round()):
            want = gltf_skinning(a, k, min(frame / 30, a.animations[k].duration))
            assert np.abs(engine_skinning(model, motion, frame) - want).max() < 1e-4 * size, (clip, frame)
    if name.startswith("MorphStress"):
        assert model.morph_name[:3] == ("Key 1", "Key 2", "Key 3")
        wave = clips["TheWave"]
        assert set(wave.morph_track_name) <= set(model.morph_name) and wave.morph_key_weight.max() > 0.5


def test_left_handed_mmd_space(gltf_dir):
    """Characters face −Z as MMD's do, their right side at −X; triangles wind as PMX files do."""
    robot = mmdkit.load(gltf_dir / "RobotExpressive.glb")
    pos = dict(zip(robot.bone_name, robot.bone_position))
    assert pos["LowerArmR"][0] < -10 and pos["LowerArmL"][0] > 10
    fox = mmdkit.load(gltf_dir / "Fox.glb")
    pos = dict(zip(fox.bone_name, fox.bone_position))
    assert pos["b_Head_05"][2] < pos["b_Tail03_014"][2] - 100  # head in front (−Z), tail behind
    for model in (robot, mmdkit.load(gltf_dir / "CesiumMan.glb")):
        p, f = model.vertex_position.astype(np.float64), model.face_vertex_index
        cross = np.cross(p[f[:, 1]] - p[f[:, 0]], p[f[:, 2]] - p[f[:, 0]])
        agree = np.sign(np.einsum("fi,fi->f", cross, model.vertex_normal[f].sum(1)))
        assert agree.mean() > 0.95


def test_materials(gltf_dir):
    fox = mmdkit.load(gltf_dir / "Fox.glb")
    assert fox.texture_path == ("Fox_image0.png",)
    assert fox.source_extras["embedded_textures"]["Fox_image0.png"][:4] == b"\x89PNG"
    assert fox.material_texture_index.tolist() == [0]
    robot = mmdkit.load(gltf_dir / "RobotExpressive.glb")
    assert robot.material_name == ("Grey", "Main", "Black")
    linear = load_gltf(gltf_dir / "RobotExpressive.glb").materials[1].base_color[:3].astype(np.float64)
    srgb = 1.055 * linear ** (1 / 2.4) - 0.055  # glTF factors are linear, MMD colours as shown
    np.testing.assert_allclose(robot.material_diffuse[1], [*srgb, 1.0], atol=1e-6)
    assert 0.75 < srgb[0] < 0.85 and srgb[2] < 0.3  # orange
    for m in (fox, robot):
        assert not (m.material_flags & M.MATERIAL_EDGE).any()
        assert not (m.material_flags & M.MATERIAL_DOUBLE_SIDED).any()


def _doc_with(gltf_dir, **changes) -> dict:
    doc = json.loads((gltf_dir / "SimpleSkin.gltf").read_text())
    for key, value in changes.items():
        doc[key] = value
    return doc


def _accessor(doc, arr: np.ndarray, ctype: int, typ: str) -> int:
    data = arr.tobytes()
    doc["buffers"].append({"byteLength": len(data),
                           "uri": "data:application/octet-stream;base64," + base64.b64encode(data).decode()})
    doc["bufferViews"].append({"buffer": len(doc["buffers"]) - 1, "byteLength": len(data)})
    doc["accessors"].append({"bufferView": len(doc["bufferViews"]) - 1, "componentType": ctype,
                             "count": len(arr), "type": typ})
    return len(doc["accessors"]) - 1


def test_eight_weights_keep_the_four_largest(gltf_dir):
    """JOINTS_1/WEIGHTS_1: the 4 largest weights kept and renormalised; zero-weight slots may
    hold joint indices out of range; a double-sided BLEND material keeps its alpha."""
    doc = _doc_with(gltf_dir)
    prim = doc["meshes"][0]["primitives"][0]
    n = doc["accessors"][prim["attributes"]["POSITION"]]["count"]
    j0 = np.tile(np.array([[0, 1, 0, 1]], np.uint16), (n, 1))
    j1 = np.tile(np.array([[1, 0, 9, 77]], np.uint16), (n, 1))
    w0 = np.tile(np.array([[0.05, 0.3, 0.1, 0.25]], np.float32), (n, 1))
    w1 = np.tile(np.array([[0.2, 0.1, 0.0, 0.0]], np.float32), (n, 1))
    for key, arr, ct in (("JOINTS_0", j0, 5123), ("JOINTS_1", j1, 5123), ("WEIGHTS_0", w0, 5126),
                         ("WEIGHTS_1", w1, 5126)):
        prim["attributes"][key] = _accessor(doc, arr, ct, "VEC4")
    doc["materials"] = [{"pbrMetallicRoughness": {"baseColorFactor": [1, 1, 1, 0.5]}, "alphaMode": "BLEND",
                         "doubleSided": True}]
    prim["material"] = 0
    model, _ = import_scene(read_gltf(json.dumps(doc).encode(), "eight.gltf"))
    joint_bone = [model.bone_index(doc["nodes"][j]["name"] if "name" in doc["nodes"][j] else f"node{j}")
                  for j in doc["skins"][0]["joints"]]
    np.testing.assert_allclose(model.vertex_bone_weight[0], np.array([0.3, 0.25, 0.2, 0.1]) / 0.85, rtol=1e-6)
    assert model.vertex_bone_index[0].tolist() == [joint_bone[i] for i in (1, 1, 1, 0)]
    assert model.source_extras["import_losses"][0].startswith(f"{n} vertices had more than 4 bone weights")
    assert model.material_diffuse[0, 3] == pytest.approx(0.5)
    assert model.material_flags[0] & M.MATERIAL_DOUBLE_SIDED


def test_a_zero_scale_bind_is_a_format_error(gltf_dir, tmp_path):
    doc = _doc_with(gltf_dir)
    doc["skins"][0]["inverseBindMatrices"] = _accessor(doc, np.zeros((2, 16), np.float32), 5126, "MAT4")
    with pytest.raises(FormatError, match=r"zero.gltf: skins\[0\].inverseBindMatrices\[0\] has a zero scale"):
        import_scene(read_gltf(json.dumps(doc).encode(), "zero.gltf"))
    (tmp_path / "zero.gltf").write_text(json.dumps(doc))
    r = run("info", tmp_path / "zero.gltf")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_load_and_clips_of(gltf_dir):
    model = mmdkit.load(gltf_dir / "Fox.glb")
    clips = clips_of(model)
    assert list(clips) == ["Survey", "Walk", "Run"]
    assert clips.get_clip(1)[0] == "Walk" and clips.get_clip("2")[0] == "Run"
    assert clips["Run"] is clips["Run"]  # baked once
    with pytest.raises(OptionError, match="'Trot' is not a clip of .*Fox.glb .*'Survey', 'Walk', 'Run'"):
        clips.get_clip("Trot")
    assert not clips_of(mmdkit.load(gltf_dir.parent / "gene" / "Gene.pmx"))
    again, _ = load_gltf_scene(gltf_dir / "Fox.glb")
    assert list(clips_of(again.replace(name="copy"))) == ["Survey", "Walk", "Run"]


def test_a_model_carries_its_clips(gltf_dir, tmp_path):
    """The Clips come with the Model (and its copies): never looked up in a cache or read again
    from the file, which may have changed or gone since."""
    import shutil

    path = tmp_path / "Fox.glb"
    shutil.copy(gltf_dir / "Fox.glb", path)
    model, clips = load_gltf_scene(path)
    path.unlink()
    assert clips_of(model) is clips and clips_of(model.replace(name="copy")) is clips
    assert clips_of(model.replace(name="copy")).get_clip("Run")[1].num_bone_keys > 0


def run(*args):
    return subprocess.run([sys.executable, "-m", "mmdkit", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_cli_info_pose_convert(gltf_dir, tmp_path):
    info = json.loads(run("info", "--json", gltf_dir / "RobotExpressive.glb").stdout)
    assert (info["format"], info["bones"], info["skin_joints"], info["clips"]) == ("gltf", 58, 43, 14)
    assert info["missing_textures"] == [] and info["names"]["clips"][0] == "Dance"
    out = tmp_path / "fox.npz"
    r = run("pose", gltf_dir / "Fox.glb", "--clip", "Run", "--frames", "0:12:6", "--vertices", "-o", out)
    assert r.returncode == 0, r.stderr
    model, clips = load_gltf_scene(gltf_dir / "Fox.glb")
    got = np.load(out)["vertex_position"]
    for i, f in enumerate((0, 6, 12)):
        np.testing.assert_allclose(got[i], engine_skinning(model, clips["Run"], f), atol=1e-3)
    r = run("convert", gltf_dir / "Fox.glb", tmp_path / "fox.pmx")
    assert r.returncode == 0 and "dropped 3 clips (Survey, Walk, Run)" in r.stderr
    assert (tmp_path / "Fox_image0.png").read_bytes()[:4] == b"\x89PNG"
    assert run("convert", gltf_dir / "Fox.glb", tmp_path / "run.vmd", "--clip", "Run").returncode == 0
    pmx, vmd = mmdkit.load(tmp_path / "fox.pmx"), mmdkit.load(tmp_path / "run.vmd")
    np.testing.assert_allclose(engine_skinning(pmx, vmd, 20), engine_skinning(model, clips["Run"], 20),
                               atol=1e-3 * size_of(model))


def test_cli_refusals_are_one_line(gltf_dir, assets, tmp_path):
    glb = (gltf_dir / "Fox.glb").read_bytes()
    (tmp_path / "cut.glb").write_bytes(glb[: len(glb) // 2])
    doc = json.loads((gltf_dir / "SimpleSkin.gltf").read_text())
    doc["buffers"][0]["uri"] = "gone.bin"
    (tmp_path / "nobuf.gltf").write_text(json.dumps(doc))
    past, lies = _doc_with(gltf_dir), _doc_with(gltf_dir)
    past["accessors"][0]["byteOffset"] = 10 ** 6  # an accessor past its buffer
    lies["accessors"][0]["count"] *= 50  # a count that lies
    (tmp_path / "past.gltf").write_text(json.dumps(past))
    (tmp_path / "lies.gltf").write_text(json.dumps(lies))
    cases = [("pose", tmp_path / "cut.glb", "-o", tmp_path / "a.npz"),
             ("info", tmp_path / "nobuf.gltf"),
             ("render", tmp_path / "past.gltf", "-o", tmp_path / "past.png"),
             ("convert", tmp_path / "lies.gltf", tmp_path / "lies.pmx"),
             ("pose", gltf_dir / "Fox.glb", "--clip", "Trot", "-o", tmp_path / "b.npz"),
             ("pose", assets / "gene" / "Gene.pmx", "-o", tmp_path / "c.npz"),
             ("pose", gltf_dir / "Fox.glb", assets / "gene" / "motion" / "01_happy.vmd", "--clip", "Run", "-o",
              tmp_path / "d.npz"),
             ("convert", assets / "gene" / "Gene.pmx", tmp_path / "e.vmd", "--clip", "0")]
    for args in cases:
        r = run(*args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("mmdkit: error:"), (args, r.stderr)
    with pytest.raises(FormatError):
        mmdkit.load(tmp_path / "cut.glb")


def test_render_a_clip_frame(gltf_dir, tmp_path):
    """A frame of Fox's Run: the textured fox covers a good part of the picture in its colours."""
    from PIL import Image

    out = tmp_path / "fox.png"
    r = run("render", gltf_dir / "Fox.glb", "--clip", "Run", "--frames", "10", "--size", "160x120", "-o", out)
    assert r.returncode == 0, r.stderr
    img = np.asarray(Image.open(out).convert("RGB")).astype(int)
    orange = (img[..., 0] > 150) & (img[..., 1] > 60) & (img[..., 1] < 170) & (img[..., 2] < 90)
    assert orange.mean() > 0.005 and (img.sum(-1) < 600).mean() > 0.01
