"""PMD: every asset reads and writes back byte-identical; PMD → Model conversions."""

from __future__ import annotations

import math

import numpy as np

import mmdkit
from mmdkit.formats.pmd import read_pmd, write_pmd
from mmdkit.formats.pmx import read_pmx, write_pmx
from mmdkit.model import model as M
from mmdkit.model.build import build_model


def test_every_pmd_round_trips(assets):
    files = sorted(assets.rglob("*.pmd"))
    assert len(files) == 7
    for p in files:
        data = p.read_bytes()
        m = build_model(read_pmd(data, str(p)))
        assert m.warnings == ()
        assert write_pmd(m) == data, p


def test_gene_pmd_matches_gene_pmx(assets):
    d = mmdkit.load(assets / "gene" / "Gene.pmd")
    x = mmdkit.load(assets / "gene" / "Gene.pmx")
    assert (d.num_vertices, d.num_bones, d.num_rigid_bodies, d.num_joints) == (28646, 224, 87, 92)
    assert d.num_morphs == 177  # the base morph is folded into vertex indices
    assert d.name_en == "CHMSgeneric.model.v"  # English extension (cut at 20 bytes)
    assert d.bone_name_en[d.bone_index("センター")] != ""
    # rigid bodies are model-space after adding the bone position
    assert np.allclose(d.rigid_body_position, x.rigid_body_position, atol=1e-5)
    # IK unit angle ×4 gives the PMX value
    assert np.allclose(d.ik_limit_angle, x.ik_limit_angle)
    # type 9 (回転連動) → append rotation, ratio = IK field / 100 (negative allowed)
    ratio = {d.bone_name[b]: float(d.bone_append_ratio[b]) for b in np.flatnonzero(d.bone_append_parent >= 0)}
    assert math.isclose(ratio["左目"], 0.15, abs_tol=1e-6) and math.isclose(ratio["横クローク5_1"], -0.5, abs_tol=1e-6)
    eye = d.bone_index("左目")
    assert d.bone_name[d.bone_append_parent[eye]] == "両目" and d.bone_flags[eye] & M.BONE_APPEND_ROTATION
    # type 8 twist → fixed axis along the child
    tw = d.bone_index("左腕捩")
    assert d.bone_flags[tw] & M.BONE_FIXED_AXIS
    assert np.allclose(d.bone_fixed_axis[tw], x.bone_fixed_axis[x.bone_index("左腕捩")], atol=1e-3)
    # knees limited to X, child 0 → -1
    knee_links = [i for i, b in enumerate(d.ik_link_bone) if "ひざ" in d.bone_name[b]]
    assert knee_links and d.ik_link_has_limit[knee_links].all()
    assert (d.ik_link_upper[knee_links, 0] < 0).all() and (d.ik_link_lower[knee_links, 1:] == 0).all()
    assert (d.bone_tail_index >= -1).all() and (d.bone_tail_index != 0).all()


def test_type5_and_toons(assets):
    m = mmdkit.load(assets / "mokou" / "mokou_A.pmd")
    raw = read_pmd((assets / "mokou" / "mokou_A.pmd").read_bytes())["source_extras"]["bone_type"]
    t5 = np.flatnonzero(raw == 5)
    assert len(t5) == 2
    assert (m.bone_append_ratio[t5] == 1).all() and (m.bone_append_parent[t5] >= 0).all()
    # a custom toon (toonH1.bmp) becomes a texture, defaults stay shared
    assert "toonH1.bmp" in m.texture_path
    custom = ~m.material_toon_shared & (m.material_toon_index >= 0)
    assert custom.any() and m.texture_path[m.material_toon_index[custom][0]].startswith("toon")


def test_pmd_to_pmx_carries_everything(assets, tmp_path):
    src = assets / "mei" / "Model" / "mei" / "mei.pmd"
    d = mmdkit.load(src)
    out = tmp_path / "mei.pmx"
    mmdkit.save(d, out)
    x = mmdkit.load(out)
    assert x.source_format == "pmx"
    for k in ("bone_flags", "bone_parent", "bone_append_parent", "ik_bone", "ik_target", "ik_link_bone",
              "ik_link_has_limit", "ik_limit_angle", "rigid_body_position", "rigid_body_shape", "joint_body_a",
              "material_toon_index", "material_toon_shared", "vertex_morph_vertex", "vertex_morph_offset",
              "vertex_bone_weight", "vertex_edge_scale"):
        assert np.array_equal(getattr(d, k), getattr(x, k)), k
    assert x.texture_path == d.texture_path and x.bone_name_en == d.bone_name_en
    # and back to PMD keeps the PMD semantics
    back = build_model(read_pmd(write_pmd(build_model(read_pmx(write_pmx(d))))))
    for k in ("bone_flags", "bone_append_ratio", "ik_limit_angle", "vertex_morph_vertex", "material_toon_index"):
        assert np.array_equal(getattr(d, k), getattr(back, k)), k


def test_pmd_conversion_follows_pmx_editor(assets):
    """Issue #12 item 11: layers, ground shadow, double sides and BDEF1 as PMX Editor/mmd_tools."""
    from mmdkit.formats.pmd.reader import read_raw

    p = assets / "mei" / "Model" / "mei" / "mei.pmd"
    raw = read_raw(p.read_bytes())
    m = mmdkit.load(p)
    btype = raw.bones["type"]
    ik = (m.bone_flags & M.BONE_IK) != 0
    below5 = np.zeros(m.num_bones, bool)
    for b in range(m.num_bones):
        a = b
        while a >= 0 and not below5[b]:
            below5[b] = btype[a] == 5
            a = m.bone_parent[a]
    assert below5.any() and ik.any()
    assert (m.bone_layer[below5] == 2).all() and (m.bone_layer[ik & ~below5] == 1).all()
    assert (m.bone_layer[~ik & ~below5] == 0).all()
    edge = raw.materials["edge"] != 0
    assert (((m.material_flags & M.MATERIAL_GROUND_SHADOW) != 0) == edge).all() and not edge.all()
    assert (((m.material_flags & M.MATERIAL_DOUBLE_SIDED) != 0) == (raw.materials["alpha"] < 1)).all()
    vb, vw = raw.vertices["b"], raw.vertices["w"]
    one = (vb[:, 0] == vb[:, 1]) | (vw == 0) | (vw >= 100)
    assert one.any() and (~one).any()
    assert ((m.vertex_deform == M.DEFORM_BDEF1) == one).all()
    carried = np.where((vb[:, 0] == vb[:, 1]) | (vw >= 100), vb[:, 0], vb[:, 1])
    assert (m.vertex_bone_index[one, 0] == carried[one]).all() and (m.vertex_bone_weight[one, 0] == 1).all()
    assert write_pmd(m) == p.read_bytes()


def test_pmd_written_from_an_edited_model(assets):
    """Issue #12 item 11: a translatable IK link stays translatable; the IK list keeps file order."""
    from mmdkit.formats.pmd.reader import read_raw

    data = (assets / "mokou" / "mokou_A.pmd").read_bytes()
    m = mmdkit.load(assets / "mokou" / "mokou_A.pmd")
    link = int(m.ik_link_bone[0])
    assert not m.bone_flags[link] & M.BONE_TRANSLATABLE
    flags = m.bone_flags.copy()
    flags[link] |= M.BONE_TRANSLATABLE
    back = build_model(read_pmd(write_pmd(m.replace(bone_flags=flags))))
    assert back.bone_flags[link] & M.BONE_TRANSLATABLE
    # drop the last solver (in bone order): the others keep the file's order
    file_names = [m.bone_name[h["bone"]] for h, _ in read_raw(data).iks]
    K, s = len(m.ik_bone), m.ik_link_start
    last = int(m.ik_bone[-1])
    bone_ik = m.bone_ik.copy()
    bone_ik[last] = -1
    flags = m.bone_flags.copy()
    flags[last] &= np.uint16(~M.BONE_IK & 0xFFFF)
    fewer = m.replace(ik_bone=m.ik_bone[:-1], ik_target=m.ik_target[:-1], ik_loop_count=m.ik_loop_count[:-1],
                      ik_limit_angle=m.ik_limit_angle[:-1], ik_link_start=s[:-1], ik_link_bone=m.ik_link_bone[:s[-2]],
                      ik_link_has_limit=m.ik_link_has_limit[:s[-2]], ik_link_lower=m.ik_link_lower[:s[-2]],
                      ik_link_upper=m.ik_link_upper[:s[-2]], bone_ik=bone_ik, bone_flags=flags)
    names = [m.bone_name[h["bone"]] for h, _ in read_raw(write_pmd(fewer)).iks]
    assert file_names != sorted(file_names, key=m.bone_index) and len(names) == K - 1
    assert names == [n for n in file_names if n != m.bone_name[last]]
