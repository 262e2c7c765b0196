"""VRM expressions as MMD group morphs: a VMD's あ/まばたき/... moves the VRM's bound morph targets;
first-person / look-at data kept and shown by ``mmdkit info``.

The reference for a posed expression is the file's own bind list (mesh, target, weight) applied to
the imported vertex morph of each target; the VMD goes through its bytes (written and read back).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.formats.gltf import load_gltf
from mmdkit.formats.vmd import read_vmd, write_vmd
from mmdkit.importers.vrm import MMD_NAMES
from mmdkit.model import model as M
from mmdkit.runtime import Character
from vrm_build import vrm1_bytes


@pytest.fixture(scope="module")
def godette(assets):
    return assets / "rigs" / "vrm0" / "Godette_vrm_v4.vrm"


@pytest.fixture(scope="module")
def vrm1(tmp_path_factory):
    p = tmp_path_factory.mktemp("vrm1") / "hair.vrm"
    p.write_bytes(vrm1_bytes())
    return p


def _vmd(keys: dict[str, float]):
    mb = MotionBuilder(model_name="vrm")
    for name, w in keys.items():
        mb.add_morph_key(name, 0, w)
    return read_vmd(write_vmd(mb.build()), "test.vmd")


def _target_offsets(model, name: str) -> np.ndarray:
    """(V, 3) offsets of the vertex morph ``name`` (an imported morph target) at weight 1."""
    k = model.morph_index(name)
    assert k >= 0 and model.morph_kind[k] == M.MORPH_VERTEX
    lo, hi = model.vertex_morph_start[k], model.vertex_morph_start[k + 1]
    out = np.zeros((model.num_vertices, 3))
    out[model.vertex_morph_vertex[lo:hi]] = model.vertex_morph_offset[lo:hi]
    return out


def _posed_offsets(model, keys: dict[str, float]) -> np.ndarray:
    ch = Character(model, _vmd(keys))
    ch.update(0)
    assert not ch.unbound[1], ch.unbound
    return np.asarray(ch.vertex_offset, np.float64)


@pytest.mark.parametrize("mmd, vrm0, weight", [("あ", "A", 1.0), ("お", "O", 1.0), ("まばたき", "Blink", 0.6),
                                                ("笑い", "Joy", 1.0), ("ウィンク", "Blink_L", 1.0)])
def test_vmd_morph_drives_vrm0_expression(godette, mmd, vrm0, weight):
    model = mmdkit.load(godette)
    asset = load_gltf(godette)
    expr = next(e for e in asset.vrm.expressions if e.name == vrm0)
    assert expr.binds  # the file binds morph targets to it
    want = sum(w * weight * _target_offsets(model, asset.meshes[mesh].target_name[t]) for mesh, t, w in expr.binds)
    got = _posed_offsets(model, {mmd: weight})
    assert np.abs(want).max() > 0.01  # the mouth/eyes really move (MMD units)
    np.testing.assert_allclose(got, want, atol=1e-5)
    info = model.source_extras["vrm_expressions"][vrm0]
    assert info["name"] == mmd and model.morph_name_en[info["morph"]] == vrm0


def test_vrm1_expressions_bind_by_node(vrm1):
    model = mmdkit.load(vrm1)
    a = _target_offsets(model, "mouth_a")
    np.testing.assert_allclose(_posed_offsets(model, {"あ": 1.0}), a, atol=1e-6)
    np.testing.assert_allclose(_posed_offsets(model, {"まばたき": 1.0}), 0.5 * a, atol=1e-6)
    np.testing.assert_allclose(_posed_offsets(model, {"smug": 1.0}), 0.25 * a, atol=1e-6)
    np.testing.assert_allclose(a[:2, 1], 0.01 * 12.5, atol=1e-6)  # 1 cm up, MMD units
    ex = model.source_extras["vrm_expressions"]
    assert ex["blink"]["is_binary"] and ex["blink"]["overrides"] == {"overrideMouth": "block"}
    assert ex["aa"]["preset"] == "aa" and ex["smug"]["preset"] == ""


def test_alias_table_covers_the_mouth_and_eyes():
    assert [MMD_NAMES[k] for k in ("aa", "ih", "ou", "ee", "oh", "blink", "blinkLeft", "blinkRight")] == \
        ["あ", "い", "う", "え", "お", "まばたき", "ウィンク", "ウィンク右"]


def test_vrm1_without_binds_and_name_clash(assets):
    """debug_robot's 18 presets have no binds: empty group morphs, still named for MMD motions."""
    model = mmdkit.load(assets / "rigs" / "vrm1" / "debug_robot.vrm")
    for vrm, mmd in (("aa", "あ"), ("blink", "まばたき"), ("happy", "笑い"), ("lookUp", "lookUp")):
        k = model.morph_index(mmd)
        assert k >= 0 and model.morph_kind[k] == M.MORPH_GROUP and model.morph_name_en[k] == vrm
    assert np.abs(_posed_offsets(model, {"あ": 1.0})).max() == 0.0


def test_first_person_and_look_at_kept(godette, vrm1, mmdkit_cli):
    g = mmdkit.load(godette).source_extras
    assert g["vrm_first_person"]["firstPersonBone"] == 5 and g["vrm_look_at"]["lookAtTypeName"] == "BlendShape"
    v = mmdkit.load(vrm1).source_extras
    assert v["vrm_look_at"]["type"] == "bone" and v["vrm_first_person"]["meshAnnotations"][0]["type"] == "auto"
    code, out = mmdkit_cli("info", str(vrm1), "--json")[:2]
    assert code == 0
    d = json.loads(out)["vrm"]
    assert d["first_person"] and d["look_at"] and d["spring_joints"] == 2 and d["expressions"]["aa"] == "あ"
    code, out = mmdkit_cli("info", str(godette))[:2]
    assert "17 expressions as morphs, 16 spring joints in 3 chains" in out and "first-person, look-at" in out


def _mutated(path: tuple, value) -> bytes:
    """vrm1_bytes with the JSON value at ``path`` (under ``extensions``) replaced."""
    import struct

    data = vrm1_bytes()
    n = struct.unpack("<I", data[12:16])[0]
    root, rest = json.loads(data[20:20 + n]), data[20 + n:]
    o = root["extensions"]
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = value
    text = json.dumps(root).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<II", len(text), 0x4E4F534A) + text + rest
    return struct.pack("<III", 0x46546C67, 2, 12 + len(body)) + body


@pytest.mark.parametrize("path, value", [
    (("VRMC_vrm", "expressions", "preset", "aa", "morphTargetBinds"), 3),
    (("VRMC_vrm", "expressions", "preset", "aa", "morphTargetBinds", 0, "index"), None),
    (("VRMC_vrm", "expressions", "preset", "blink"), "x"),
    (("VRMC_springBone", "colliders"), 7),
    (("VRMC_springBone", "springs", 0, "joints", 1, "node"), "hair2"),
    (("VRMC_springBone", "springs", 0, "joints", 0, "stiffness"), [1]),
    (("VRMC_springBone", "colliderGroups", 0, "colliders"), [0, 99]),
])
def test_malformed_vrm_entries_are_skipped(tmp_path, path, value):
    """A bad expression, spring or collider entry is skipped (a warning where something was
    dropped); the model still loads, poses and simulates finitely."""
    from mmdkit.physics import physics_for

    p = tmp_path / "bad.vrm"
    p.write_bytes(_mutated(path, value))
    model = mmdkit.load(p)
    ch = Character(model, _vmd({"あ": 1.0}), physics_for(model))
    for f in range(3):
        ch.update(f)
    assert np.isfinite(ch.bone_world).all() and np.isfinite(ch.vertex_offset).all()
    assert model.morph_index("あ") >= 0
