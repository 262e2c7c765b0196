"""PMX reading/writing on the real assets: counts, byte-exact round trips, quirks, errors."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import FormatError
from mmdkit.formats.pmx import read_pmx, write_pmx
from mmdkit.model import model as M
from mmdkit.model.build import build_model

QUIRK = "fixtures/yohawing-three-mmd-loader/test/fixtures/joint_orient_test.pmx"


def all_pmx(assets):
    return sorted(assets.rglob("*.pmx"))


def test_gene_counts_and_contract(assets):
    m = mmdkit.load(assets / "gene" / "Gene.pmx")
    assert (m.num_vertices, m.num_bones, m.num_morphs, m.num_rigid_bodies, m.num_joints) == (28646, 224, 184, 87, 92)
    assert m.source_format == "pmx" and m.warnings == ()
    assert m.vertex_position.shape == (28646, 3) and m.vertex_position.dtype == np.float32
    assert m.vertex_bone_index.dtype == np.int32 and m.vertex_bone_index.shape == (28646, 4)
    assert not m.vertex_position.flags.writeable and not m.bone_parent.flags.writeable
    assert m.material_face_start[-1] == m.num_faces
    # BDEF2 weights are (w, 1-w, 0, 0)
    two = m.vertex_deform == M.DEFORM_BDEF2
    assert np.allclose(m.vertex_bone_weight[two].sum(1), 1)
    # IK: 6 solvers, leg IK with a knee link limited to X
    assert len(m.ik_bone) == 6 and (m.bone_ik[m.ik_bone] == np.arange(6)).all()
    knee = m.bone_index("左ひざ")
    assert knee in m.ik_link_bone.tolist()
    assert (m.bone_flags[m.ik_bone] & M.BONE_IK).all()
    assert (m.bone_append_parent >= 0).sum() == 11
    assert m.bone_name[0] == "全ての親" and m.bone_parent[0] == -1


def test_every_pmx_round_trips(assets):
    files = all_pmx(assets)
    assert len(files) >= 40
    for p in files:
        data = p.read_bytes()
        m = build_model(read_pmx(data, str(p)))
        out = write_pmx(m)
        m2 = build_model(read_pmx(out, "again.pmx"))
        assert m2.num_vertices == m.num_vertices and m2.bone_name == m.bone_name
        assert np.array_equal(m2.vertex_bone_index, m.vertex_bone_index)
        if p.as_posix().endswith(QUIRK):
            assert out != data  # repaired: indices written as declared
        else:
            assert out == data, p


def test_quirk_declared_1_byte_bone_index_written_2(assets):
    m = mmdkit.load(assets / QUIRK)
    assert len(m.warnings) == 1 and "2-byte" in m.warnings[0]
    assert m.num_vertices == 24 and m.num_bones == 3
    assert set(np.unique(m.vertex_bone_index)) <= {0, 1, 2}
    # the rewritten file is valid as declared and reads without a warning
    m2 = build_model(read_pmx(write_pmx(m), "fixed.pmx"))
    assert m2.warnings == () and np.array_equal(m2.vertex_bone_index, m.vertex_bone_index)


def test_sdef_qdef_fixtures(assets):
    gen = assets / "fixtures/yohawing-unity-mmd-loader/Tests/Fixtures/Assets/GeneratedPmx"
    s = mmdkit.load(gen / "sdef-two-bone-elbow.pmx")
    sd = s.vertex_deform == M.DEFORM_SDEF
    assert sd.any() and np.abs(s.vertex_sdef_c[sd]).sum() > 0
    mixed = mmdkit.load(gen / "mixed-deform-types.pmx")
    assert set(mixed.vertex_deform.tolist()) == {0, 1, 2, 3, 4}


def test_trailing_bytes_kept_with_warning(assets):
    data = (assets / "fixtures/babylon-mmd/bone_flag_test.pmx").read_bytes()
    f = read_pmx(data + b"\x01\x02\x03", "t.pmx")
    assert "3 bytes after the last section" in f["warnings"][0]
    assert write_pmx(build_model(f)) == data + b"\x01\x02\x03"


def test_errors_name_file_section_offset(assets):
    data = (assets / "gene" / "Gene.pmx").read_bytes()
    with pytest.raises(FormatError) as e:
        read_pmx(data[:500_000], "cut.pmx")
    assert e.value.section == "vertices" and e.value.path == "cut.pmx" and e.value.offset is not None
    with pytest.raises(FormatError, match="not a PMX file"):
        read_pmx(b"PMD 1234" + data[8:100], "x.pmx")
    # an out-of-range bone parent is a build error naming the field and row
    f = read_pmx(data, "Gene.pmx")
    bad = f["bone_parent"].copy()
    bad[5] = 999
    f["bone_parent"] = bad
    with pytest.raises(mmdkit.BuildError, match=r"row 5.*999"):
        build_model(f)


def test_pmx21_soft_bodies_flip_impulse_round_trip():
    from mmdkit.formats.pmx import SoftBodyRecord
    from mmdkit.model.builder import ModelBuilder

    mb = ModelBuilder("soft")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("cloth")
    mb.add_mesh(mat, np.eye(3), np.eye(3), np.zeros((3, 2)), [[0, 1, 2]], [b] * 3)
    rb = mb.add_rigid_body("body", b, "sphere", (1, 0, 0), (0, 0, 0))
    mb.add_vertex_morph("v", [0], [[0, 1, 0]])
    mb.add_group_morph("flip", [0], [1.0], flip=True)
    mb.add_impulse_morph("kick", [rb], [[0, 1, 0]], [[0, 0, 1]], local=True)
    sb = SoftBodyRecord(name="skirt", name_en="skirt", shape=0, material=mat, group=2, collide_mask=0xFFFF,
                        flags=3, b_link_distance=2, cluster_count=4, total_mass=1.5, collision_margin=0.125,
                        aero_model=1, config=tuple(float(i) for i in range(12)), cluster=(1.0,) * 6,
                        iteration=(1, 2, 3, 4), material_coef=(0.5, 0.25, 0.75), anchors=((rb, 1, 1),), pins=(2,))
    m = mb.build().replace(soft_bodies=(sb,))
    data = write_pmx(m)
    f = read_pmx(data, "soft.pmx")
    assert f["source_extras"]["version"] == 2.1
    r = build_model(f)
    assert r.soft_bodies == (sb,)
    assert r.morph_kind.tolist() == [M.MORPH_VERTEX, M.MORPH_FLIP, M.MORPH_IMPULSE]
    assert r.impulse_morph_local.tolist() == [True] and np.allclose(r.impulse_morph_torque, [[0, 0, 1]])
    assert write_pmx(r) == data
    bad = m.replace(soft_bodies=(sb.__class__(**{**sb.__dict__, "pins": (99,)}),))
    with pytest.raises(mmdkit.BuildError, match="pin vertex 99"):
        build_model({k: getattr(bad, k) for k in bad.__dataclass_fields__})


def test_utf8_encoding_round_trip(assets):
    f = read_pmx((assets / "fixtures/babylon-mmd/bone_flag_test.pmx").read_bytes())
    m = build_model(f)
    f["source_extras"] = {**f["source_extras"], "encoding": "utf-8"}
    u = build_model(f)
    out = write_pmx(u)
    assert out[9] == 1
    r = build_model(read_pmx(out))
    assert r.bone_name == m.bone_name and r.source_extras["encoding"] == "utf-8"
