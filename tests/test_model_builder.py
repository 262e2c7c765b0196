"""ModelBuilder / MotionBuilder: build in code, validate, save, read back the same."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import BuildError
from mmdkit.model import model as M
from mmdkit.animation.builder import MotionBuilder
from mmdkit.animation.curves import interpolation_block
from mmdkit.model.builder import ModelBuilder


def leg_model():
    mb = ModelBuilder(name="demo", name_en="demo")
    root = mb.add_bone("センター", (0, 8, 0), translatable=True)
    hip = mb.add_bone("左足", (1, 8, 0), root)
    knee = mb.add_bone("左ひざ", (1, 4, 0), hip)
    ankle = mb.add_bone("左足首", (1, 0, 0), knee)
    ik = mb.add_bone("左足ＩＫ", (1, 0, 0), root, translatable=True)
    twist = mb.add_bone("捩", (1, 6, 0), hip, fixed_axis=(1, 0, 0), append_parent=knee, append_ratio=0.5)
    mb.add_ik(ik, ankle, [(knee, (-3.1, 0, 0), (-0.01, 0, 0)), hip], loop_count=40, limit_angle=2.0)
    skin = mb.add_material("skin", diffuse=(1, .8, .7, 1), texture="skin.png", toon=1)
    cloth = mb.add_material("cloth", toon="mytoon.bmp", sphere="s.spa", sphere_mode=M.SPHERE_ADD)
    quad = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], np.float32)
    n = np.tile([0, 0, -1], (4, 1))
    uv = quad[:, :2]
    # added out of material order on purpose: faces are grouped by material at build
    v_cloth = mb.add_mesh(cloth, quad + 5, n, uv, [[0, 1, 2], [0, 2, 3]], [[hip, knee, 0, 0]] * 4,
                          [[0.7, 0.3, 0, 0]] * 4)
    v_skin = mb.add_mesh(skin, quad, n, uv, [[0, 1, 2]], [ankle] * 4)
    mb.add_vertex_morph("あ", [v_skin, v_skin + 1], [[0, 1, 0], [0, 2, 0]], panel=3)
    mb.add_uv_morph("uv", [v_cloth], [[0.1, 0, 0, 0]])
    mb.add_bone_morph("bm", [hip], [[0, 1, 0]], [[0, 0, 0, 1]])
    mb.add_material_morph("red", -1, 0, diffuse=(1, 0, 0, 1))
    mb.add_group_morph("g", [0, 3], [1.0, 0.5])
    a = mb.add_rigid_body("hip", hip, "capsule", (0.5, 2, 0), (1, 6, 0), mode=0, group=1, collide_mask=0xFFFD)
    b = mb.add_rigid_body("shin", knee, "box", (0.5, 0.5, 2), (1, 2, 0), mass=2, mode=1)
    mb.add_joint("knee", a, b, (1, 4, 0), rotation_lower=(-1, 0, 0), rotation_upper=(1, 0, 0))
    return mb.build(), dict(root=root, hip=hip, knee=knee, ankle=ankle, ik=ik, twist=twist, v_skin=v_skin)


def test_model_builder_contract():
    m, ids = leg_model()
    assert m.num_bones == 6 and m.num_vertices == 8 and m.num_faces == 3 and m.num_materials == 2
    assert m.material_face_start.tolist() == [0, 1, 3]  # skin first, then cloth
    assert m.face_vertex_index[0].tolist() == [ids["v_skin"], ids["v_skin"] + 1, ids["v_skin"] + 2]
    assert m.vertex_deform[:4].tolist() == [M.DEFORM_BDEF2] * 4 and m.vertex_deform[4:].tolist() == [0] * 4
    assert m.bone_flags[ids["ik"]] & M.BONE_IK and m.bone_ik[ids["ik"]] == 0
    assert m.ik_link_bone.tolist() == [ids["knee"], ids["hip"]] and m.ik_link_has_limit.tolist() == [True, False]
    assert m.bone_flags[ids["twist"]] & M.BONE_FIXED_AXIS and m.bone_flags[ids["twist"]] & M.BONE_APPEND_ROTATION
    assert m.material_toon_shared.tolist() == [True, False]
    assert m.texture_path[m.material_toon_index[1]] == "mytoon.bmp"
    assert m.morph_kind.tolist() == [M.MORPH_VERTEX, M.MORPH_UV, M.MORPH_BONE, M.MORPH_MATERIAL, M.MORPH_GROUP]
    assert m.vertex_morph_start.tolist() == [0, 2, 2, 2, 2, 2]
    assert m.material_morph_material.tolist() == [-1] and np.allclose(m.material_morph_specular, 1)
    assert m.rigid_body_shape.tolist() == [M.SHAPE_CAPSULE, M.SHAPE_BOX]
    assert not m.vertex_position.flags.writeable


@pytest.mark.parametrize("ext", [".pmx", ".pmd"])
def test_built_model_saves_and_reloads(tmp_path, ext):
    m, ids = leg_model()
    p = tmp_path / f"demo{ext}"
    mmdkit.save(m, p)
    r = mmdkit.load(p)
    assert r.bone_name == m.bone_name and np.array_equal(r.bone_parent, m.bone_parent)
    assert np.allclose(r.vertex_position, m.vertex_position)
    assert np.array_equal(r.ik_link_bone, m.ik_link_bone)
    assert np.allclose(r.rigid_body_position, m.rigid_body_position, atol=1e-5)
    if ext == ".pmx":
        for k in ("bone_flags", "vertex_bone_weight", "material_toon_index", "uv_morph_offset", "group_morph_weight"):
            assert np.array_equal(getattr(r, k), getattr(m, k)), k
        assert mmdkit.load(p).num_morphs == 5
    else:
        assert r.num_morphs == 1  # PMD holds vertex morphs only
        assert np.allclose(r.vertex_morph_offset, m.vertex_morph_offset)
        assert r.bone_append_parent[ids["twist"]] == ids["knee"]
        assert np.isclose(r.bone_append_ratio[ids["twist"]], 0.5)


def test_builder_errors_name_the_field():
    mb = ModelBuilder()
    mb.add_bone("a", (0, 0, 0))
    mb.add_bone("b", (0, 1, 0), parent=7)
    with pytest.raises(BuildError, match="bone_parent.*row 1"):
        mb.build()
    mb = ModelBuilder()
    mb.add_bone("a", (0, 0, 0))
    m = mb.add_material("m")
    mb.add_mesh(m, np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((3, 2)), [[0, 1, 2]], [0, 0, 5])
    with pytest.raises(BuildError, match="vertex_bone_index"):
        mb.build()
    mb = ModelBuilder()
    mb.add_bone("a", (0, 0, 0), parent=1)
    mb.add_bone("b", (0, 0, 0), parent=0)
    with pytest.raises(BuildError, match="cycle"):
        mb.build()
    with pytest.raises(BuildError):
        ModelBuilder().add_bone("x", (0, 0))


def test_motion_builder_round_trip(tmp_path):
    mo = MotionBuilder("demo")
    mo.add_bone_key("センター", 0)
    mo.add_bone_key("センター", 30, (0, 1, 0), (0, 0.7071068, 0, 0.7071068), {"r": (64, 0, 64, 127)})
    mo.add_bone_key("左足", 10, physics=False)
    mo.add_morph_key("あ", 5, 1.0)
    mo.add_camera_key(0, -45, (0, 10, 0), (0, 0, 0), fov=30)
    mo.add_light_key(0, (0.6, 0.6, 0.6), (-0.5, -1, 0.5))
    mo.add_shadow_key(0, 1, 0.01)
    mo.add_property_key(0, True, {"左足ＩＫ": False, "右足ＩＫ": True})
    m = mo.build()
    assert m.bone_track_name == ("センター", "左足") and m.bone_key_track.tolist() == [0, 0, 1]
    assert m.bone_key_physics.tolist() == [True, True, False]
    ip = m.bone_key_interpolation[1].reshape(4, 16)
    assert ip[3, [0, 4, 8, 12]].tolist() == [64, 0, 64, 127]  # rotation curve on row 3
    assert ip[0, [0, 4, 8, 12]].tolist() == [20, 20, 107, 107]  # X linear
    p = tmp_path / "m.vmd"
    mmdkit.save(m, p)
    r = mmdkit.load(p)
    for k in ("bone_key_frame", "bone_key_rotation", "bone_key_interpolation", "morph_key_weight", "camera_key_fov",
              "light_key_direction", "shadow_key_distance", "property_ik_enabled", "property_ik_start"):
        assert np.array_equal(getattr(r, k), getattr(m, k)), k
    assert r.property_ik_name == ("左足ＩＫ", "右足ＩＫ") and r.camera_key_perspective.tolist() == [0]
    assert mmdkit.save(r, p) is None and p.read_bytes() == (tmp_path / "m.vmd").read_bytes()


def test_interpolation_block_layout():
    b = interpolation_block({"x": (1, 2, 3, 4), "y": (5, 6, 7, 8), "z": (9, 10, 11, 12), "r": (13, 14, 15, 16)})
    rows = b.reshape(4, 16)
    for k, curve in enumerate([(1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16)]):
        if k == 0:
            assert rows[0, [0, 4, 8, 12]].tolist() == list(curve)
        else:
            assert rows[k, [0, 4, 8, 12]].tolist() == list(curve)
    assert rows[0, 2:4].tolist() == [0, 0]
    with pytest.raises(BuildError):
        interpolation_block({"x": (0, 0, 200, 0)})


def test_non_finite_model_values_are_refused_naming_field_row_and_item(tmp_path):
    mb = ModelBuilder()
    hip = mb.add_bone("hip", (0, 1, 0))
    mb.add_rigid_body("hip", hip, "sphere", (1, 0, 0), (0, 1, 0), mass=float("nan"))
    with pytest.raises(BuildError, match=r"rigid_body_mass.*row 0: value nan is not finite \(rigid body 'hip'\)"):
        mb.build()
    m, _ = leg_model()
    p = tmp_path / "inf.pmx"
    position = m.vertex_position.copy()
    position[2, 1] = 1234.5  # a value found once in the file
    mmdkit.save(m.replace(vertex_position=position), p)
    data = p.read_bytes()
    mark = np.float32(1234.5).tobytes()
    assert data.count(mark) == 1
    p.write_bytes(data.replace(mark, np.float32(np.inf).tobytes()))
    with pytest.raises(BuildError, match=r"inf\.pmx.*vertex_position.*row 2: value \[6\.0, inf, 5\.0\]"):
        mmdkit.load(p)
