"""BVH export: re-read the text with an independent parser + FK and compare joint world positions
with the engine's (right-handed: Z negated, scaled) within 1e-3 units; three.js's BVHLoader (Node,
tools/threejs) and Assimp re-read it and must place every joint the same.

Readers disagree on position channels under a non-zero OFFSET (three.js adds the OFFSET, Blender
and Assimp replace it), so the parser here refuses that case: every joint with position channels
must have OFFSET 0 0 0, where both readings agree."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.export import bake, export
from mmdkit.export.bvh import POSITION_TOLERANCE, ROOT_NAME, TRANSLATION_SUFFIX, bvh_names, write
from mmdkit.export.humanoid import joint_set

from helpers import threejs_pose


def _rot(axis: str, deg: np.ndarray) -> np.ndarray:
    """(F,3,3) rotation matrices about ``axis`` by ``deg`` degrees (right-handed, column vectors)."""
    a = np.radians(deg)
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    m = {"X": [[o, z, z], [z, c, -s], [z, s, c]], "Y": [[c, z, s], [z, o, z], [-s, z, c]],
         "Z": [[c, -s, z], [s, c, z], [z, z, o]]}[axis]
    return np.moveaxis(np.array(m), (0, 1), (-2, -1))


def read_bvh(path: str):
    """Parse a BVH file and run FK: (joint names, (F,J,3) world positions, frame time)."""
    tokens = open(path, encoding="utf-8").read().split()
    i = 0
    joints, parent, offset, channels, stack = [], [], [], [], []
    while tokens[i] != "MOTION":
        t = tokens[i]
        if t in ("ROOT", "JOINT"):
            joints.append(tokens[i + 1])
            parent.append(stack[-1] if stack else -1)
            offset.append(None)
            channels.append([])
            stack.append(len(joints) - 1)
            i += 2
        elif t == "End":
            depth = 0
            while True:  # skip the End Site block
                i += 1
                depth += tokens[i] == "{"
                depth -= tokens[i] == "}"
                if depth == 0 and tokens[i] == "}":
                    break
            i += 1
        elif t == "OFFSET":
            offset[stack[-1]] = np.array([float(v) for v in tokens[i + 1:i + 4]])
            i += 4
        elif t == "CHANNELS":
            n = int(tokens[i + 1])
            channels[stack[-1]] = tokens[i + 2:i + 2 + n]
            i += 2 + n
        elif t == "}":
            stack.pop()
            i += 1
        else:
            i += 1
    for j, ch in enumerate(channels):  # the one layout every reader reads the same
        assert not any(c.endswith("position") for c in ch) or not offset[j].any(), (joints[j], offset[j])
    frames = int(tokens[i + 2])
    frame_time = float(tokens[i + 5])
    values = np.array(tokens[i + 6:], float).reshape(frames, -1)
    J = len(joints)
    world_r, world_p = [None] * J, np.zeros((frames, J, 3))
    col = 0
    for j in range(J):
        local_p = np.broadcast_to(offset[j], (frames, 3)).copy()
        r = np.broadcast_to(np.eye(3), (frames, 3, 3)).copy()
        for ch in channels[j]:
            v = values[:, col]
            col += 1
            if ch.endswith("position"):
                local_p[:, "XYZ".index(ch[0])] = v
            else:
                r = r @ _rot(ch[0], v)
        p = parent[j]
        if p < 0:
            world_r[j], world_p[:, j] = r, local_p
        else:
            world_r[j] = world_r[p] @ r
            world_p[:, j] = world_p[:, p] + np.einsum("fij,fj->fi", world_r[p], local_p)
    return joints, world_p, frame_time


def check_names(names, js) -> list[str]:
    """The BVH's joint names are the joint set's, ROOT_NAME and translation joints of its joints;
    returns the joint set's names in its order."""
    want = bvh_names(js)
    extra = set(names) - set(want)
    assert extra <= {ROOT_NAME} | {n + TRANSLATION_SUFFIX for n in want}, sorted(extra)[:5]
    assert len(names) == len(set(names)) and set(want) <= set(names)
    return want


def world_by_joint(path: str, js):
    """FK world positions (F,J,3) of the BVH at ``path`` in the order of the joint set ``js``."""
    names, world, frame_time = read_bvh(path)
    return world[:, [names.index(n) for n in check_names(names, js)]], names, frame_time


@pytest.fixture(scope="module")
def gene_baked(assets):
    model = mmdkit.load(assets / "gene" / "Gene.pmx")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    return bake(model, motion, np.arange(400.0, 460.0), physics=True)


@pytest.mark.parametrize("joints,scale", [("all", 1.0), ("humanoid", 0.08)])
def test_bvh_fk_matches_engine(gene_baked, tmp_path, joints, scale):
    path = str(tmp_path / "gene.bvh")
    info = write(gene_baked, path, joints=joints, scale=scale)
    js = joint_set(gene_baked.model, joints)
    world, names, frame_time = world_by_joint(path, js)
    assert info["frames"] == 60 and frame_time == pytest.approx(1 / 30)
    engine = gene_baked.bone_world_position[:, js.joint_bone] * np.array([1, 1, -1]) * scale
    err = np.abs(world - engine).max()
    assert err < 1e-3, err
    if joints == "humanoid":
        assert names[:3] == ["center", "lower_body", "left_leg"]  # depth first, HUMANOID order


def test_bvh_without_physics_and_fps(assets, tmp_path):
    model = mmdkit.load(assets / "low_miku" / "miku.pmd")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    path = str(tmp_path / "miku.bvh")
    info = export(model, motion, path, frames=np.arange(0, 60, 2.5), fps=12, physics=False, joints="humanoid")
    js = joint_set(model, "humanoid")
    world, _, frame_time = world_by_joint(path, js)
    assert info["frames"] == 24 and frame_time == pytest.approx(1 / 12)
    b = bake(model, motion, np.arange(0, 60, 2.5), physics=False)
    assert np.abs(world - b.bone_world_position[:, js.joint_bone] * [1, 1, -1]).max() < 1e-3


@pytest.mark.parametrize("path", ["mokou/mokou_A.pmd", "mei/Model/mei/mei.pmd", "fixtures/nanoem/test.pmx",
                                  "low_miku/miku.pmd"])
def test_bvh_other_models(assets, tmp_path, path):
    """Other skeletons, with physics; nanoem's has several root bones (a mmd_root joint above),
    low_miku a bone listed before its parent."""
    model = mmdkit.load(assets / path)
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    baked = bake(model, motion, np.arange(500.0, 520.0), physics=True)
    for joints in ("all", "humanoid"):
        write(baked, tmp_path / "m.bvh", joints=joints)
        js = joint_set(model, joints)
        world, names, _ = world_by_joint(str(tmp_path / "m.bvh"), js)
        engine = baked.bone_world_position[:, js.joint_bone] * np.array([1, 1, -1])
        assert np.abs(world - engine).max() < 1e-3, (path, joints)
        roots = int((np.asarray(model.bone_parent) < 0).sum())
        assert (names[0] == ROOT_NAME) == (joints == "all" and roots > 1)


def test_bvh_refuses_vertices_and_bad_scale(assets, tmp_path):
    model = mmdkit.load(assets / "low_miku" / "miku.pmd")
    with pytest.raises(OptionError, match="vertices"):
        export(model, None, str(tmp_path / "x.bvh"), vertices=True)
    with pytest.raises(OptionError, match="scale"):
        export(model, None, str(tmp_path / "x.bvh"), scale=-1)
    assert not list(tmp_path.iterdir())


def read_assimp(path: str, workdir) -> dict:
    """Joint world positions (F,3) by name as Assimp reads the BVH: `assimp export` to its XML
    scene dump (node tree + per-node position/rotation keys), then FK here."""
    import xml.etree.ElementTree as ET

    xml = str(workdir / "scene.assxml")
    out = subprocess.run(["assimp", "export", path, xml], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    root = ET.parse(xml).getroot()
    anims = {}
    for na in root.iter("NodeAnim"):
        pos = np.array([k.text.split() for k in na.iter("PositionKey")], float)
        rot = np.array([k.text.split() for k in na.iter("RotationKey")], float)  # x y z w
        anims[na.get("node")] = (pos, rot)
    world: dict = {}

    def visit(node, parent_r, parent_p):
        name = node.get("name")
        m = np.array(node.find("Matrix4").text.split(), float).reshape(4, 4)
        if name in anims:
            pos, q = anims[name]
            x, y, z, w = q.T
            r = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                          2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                          2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1).reshape(-1, 3, 3)
        else:
            pos, r = m[None, :3, 3], m[None, :3, :3]
        p = parent_p + np.einsum("fij,fj->fi", parent_r, pos)
        world[name] = p
        r_world = parent_r @ r
        for child in node.findall("NodeList/Node"):
            visit(child, r_world, p)

    visit(root.find("Scene/Node"), np.eye(3)[None], np.zeros((1, 3)))
    return world


@pytest.mark.parametrize("joints", ["humanoid", "all"])
def test_bvh_reads_the_same_in_assimp_when_installed(gene_baked, tmp_path, joints):
    """Assimp (optional: `apt-get install assimp-utils`) re-reads the BVH; its joint positions
    are the engine's within 1e-3 units. Without the `assimp` command only our own FK checks it."""
    path = str(tmp_path / "gene.bvh")
    write(gene_baked, path, joints=joints)
    js = joint_set(gene_baked.model, joints)
    engine = gene_baked.bone_world_position[:, js.joint_bone] * np.array([1, 1, -1])
    world, _, _ = world_by_joint(path, js)
    assert np.abs(world - engine).max() < 1e-3
    if shutil.which("assimp") is None:
        assert not os.environ.get("CI"), "the assimp command is missing: scripts/setup.sh installs assimp-utils"
        return
    by_name = read_assimp(path, tmp_path)
    for j, name in enumerate(bvh_names(js)):
        assert np.abs(by_name[name] - engine[:, j]).max() < 1e-3, name


@pytest.mark.parametrize("joints,scale", [("all", 1.0), ("humanoid", 0.08)])
def test_bvh_reads_the_same_in_threejs(gene_baked, tmp_path, joints, scale):
    """three.js's BVHLoader places every joint where the engine has it (within 1e-3 units × scale)
    on every frame checked, the translated ones (センター, IK targets, physics) included."""
    path = tmp_path / "gene.bvh"
    write(gene_baked, path, joints=joints, scale=scale)
    js = joint_set(gene_baked.model, joints)
    frames = np.array([0, 1, 17, 30, 59])
    ours, _, frame_time = world_by_joint(str(path), js)
    got = threejs_pose(path, frames * frame_time)  # key times as three.js reads them
    want = check_names(got["names"], js)
    world = got["position"][:, [got["names"].index(n) for n in want]]
    engine = gene_baked.bone_world_position[frames][:, js.joint_bone] * np.array([1, 1, -1]) * scale
    err = np.linalg.norm(world - engine, axis=2).max()
    assert err < 1e-3 * scale, err
    assert np.linalg.norm(world - ours[frames], axis=2).max() < 1e-4 * scale


def test_bvh_leaves_out_only_tiny_translations(gene_baked, tmp_path):
    """Position channels only where a joint's translation matters: the ROOT and the joints that
    move (センター, the IK targets, physics bones); left-out moves (float noise) add up to at most
    POSITION_TOLERANCE along any path, so even then each joint is within it."""
    path = tmp_path / "gene.bvh"
    write(gene_baked, path, joints="all")
    names, _, _ = read_bvh(str(path))
    moved = {n[:-len(TRANSLATION_SUFFIX)] for n in names if n.endswith(TRANSLATION_SUFFIX)}
    assert {"センター", "左足ＩＫ", "右足ＩＫ"} <= moved and "上半身" not in moved and len(moved) < 80
    js = joint_set(gene_baked.model, "all")
    world, _, _ = world_by_joint(str(path), js)
    engine = gene_baked.bone_world_position[:, js.joint_bone] * np.array([1, 1, -1])
    assert np.linalg.norm(world - engine, axis=2).max() <= POSITION_TOLERANCE + 1e-4
