"""Palette batches: ≤ P bones per batch, all triangles kept in material order, and skinning
through the batches' palettes equals skinning the whole mesh (to float32 rounding)."""

from __future__ import annotations


import numpy as np
import pytest

import mmdkit
from mmdkit.errors import BuildError
from mmdkit.model import model as M
from mmdkit.skinning.cpu import CpuSkinner
from mmdkit.skinning.palette import build_palette_batches, vertex_bone_sets

from skinning_reference import random_rigid

GEN = "fixtures/yohawing-unity-mmd-loader/Tests/Fixtures/Assets/GeneratedPmx/"


@pytest.fixture(scope="module")
def gene(assets):
    m = mmdkit.load(assets / "gene/Gene.pmx")
    return m, CpuSkinner(m)


def check_structure(m, pb):
    P = pb.palette_size
    nb = pb.num_batches
    assert pb.batch_face_start[0] == 0 and pb.batch_face_start[-1] == m.num_faces
    assert np.all(np.diff(pb.batch_face_start) > 0)
    assert np.all(np.diff(pb.batch_material) >= 0)  # materials in file order
    # every original triangle exactly once, inside its own material's batches
    assert np.array_equal(np.sort(pb.face_source), np.arange(m.num_faces))
    mat_of_face = np.repeat(np.arange(m.num_materials), np.diff(m.material_face_start))
    face_batch = np.repeat(np.arange(nb), np.diff(pb.batch_face_start))
    assert np.array_equal(mat_of_face[pb.face_source], pb.batch_material[face_batch])
    # the new triangles are the old ones through vertex_source
    assert np.array_equal(pb.vertex_source[pb.face_vertex_index], m.face_vertex_index[pb.face_source])
    # a triangle's vertices belong to its batch; each batch's palette holds ≤ P distinct bones
    assert np.array_equal(pb.vertex_batch[pb.face_vertex_index], np.repeat(face_batch[:, None], 3, 1))
    for b in range(nb):
        pal = pb.batch_palette[b]
        used = pal[pal >= 0]
        assert len(used) <= P and len(np.unique(used)) == len(used)
    # every bone a vertex needs is in its batch's palette at the slot it points to
    need = vertex_bone_sets(m)[pb.vertex_source]
    gb = pb.batch_palette[pb.vertex_batch[:, None], pb.vertex_palette_index]
    src_bi = m.vertex_bone_index[pb.vertex_source]
    for k in range(4):
        needed = (need == src_bi[:, k:k + 1]).any(1)
        assert np.array_equal(gb[needed, k], src_bi[needed, k])


def skin_through_batches(sk, pb, S):
    """Each batch skinned with only its palette's matrices and palette-local bone slots."""
    vs = pb.vertex_source
    bone = pb.vertex_palette_index.copy()
    sd = sk.vertex_deform[vs] == M.DEFORM_SDEF
    bone[sd, 2] = sk.vertex_bone[vs[sd], 2]  # SDEF table row rides in slot 2
    pm = pb.palette_matrices(S)
    p = np.full((pb.num_vertices, 3), np.nan, np.float32)
    n = np.full((pb.num_vertices, 3), np.nan, np.float32)
    for b in range(pb.num_batches):
        r = slice(pb.batch_vertex_start[b], pb.batch_vertex_start[b + 1])
        part = CpuSkinner.from_tables(pm.shape[1], sk.vertex_deform[vs[r]], bone[r], sk.vertex_weight[vs[r]],
                                      sk.bind_position[vs[r]], sk.bind_normal[vs[r]],
                                      (sk.sdef_c, sk.sdef_cr0, sk.sdef_cr1), parallel=False)
        part.skin(pm[b], None, p[r], n[r])
    return p, n


@pytest.mark.parametrize("P", [13, 36])
@pytest.mark.parametrize("keep_order", [False, True])
def test_gene_batches_skin_like_whole_mesh(gene, P, keep_order, paths_agree):
    m, sk = gene
    pb = build_palette_batches(m, P, keep_order=keep_order)
    check_structure(m, pb)
    S = random_rigid(m.num_bones, np.random.default_rng(P), angle=1.0)
    whole_p = np.empty((m.num_vertices, 3), np.float32)
    whole_n = np.empty((m.num_vertices, 3), np.float32)
    sk.skin(S, None, whole_p, whole_n)
    p, n = skin_through_batches(sk, pb, S)
    # different kernels (serial per batch, parallel over the whole mesh; fastmath): to rounding
    paths_agree(p, whole_p[pb.vertex_source])
    paths_agree(n, whole_n[pb.vertex_source])
    if keep_order:  # each batch is a run of consecutive triangles
        assert np.array_equal(pb.face_source, np.arange(m.num_faces))


def test_fewer_bones_more_batches(gene):
    m, _ = gene
    a = build_palette_batches(m, 13)
    b = build_palette_batches(m, 36)
    assert a.num_batches > b.num_batches >= m.num_materials
    assert a.num_duplicated_vertices >= b.num_duplicated_vertices >= 0
    # the greedy may move triangles between batches, so it never needs more batches than file order
    assert a.num_batches <= build_palette_batches(m, 13, keep_order=True).num_batches


def test_sdef_qdef_bdef4_fixtures(assets, paths_agree):
    for name in ("mixed-deform-types.pmx", "sdef-two-bone-elbow.pmx", "qdef-twist-cylinder.pmx",
                 "bdef4-twist-cylinder.pmx"):
        m = mmdkit.load(assets / (GEN + name))
        sk = CpuSkinner(m)
        need = (vertex_bone_sets(m) >= 0).sum(1)
        P = max(4, int(need.max()) * 3)
        pb = build_palette_batches(m, P)
        check_structure(m, pb)
        S = random_rigid(m.num_bones, np.random.default_rng(0))
        whole_p = np.empty((m.num_vertices, 3), np.float32)
        whole_n = np.empty((m.num_vertices, 3), np.float32)
        sk.skin(S, None, whole_p, whole_n)
        p, n = skin_through_batches(sk, pb, S)
        paths_agree(p, whole_p[pb.vertex_source], err_msg=name)  # kernels on other runs of vertices
        paths_agree(n, whole_n[pb.vertex_source], err_msg=name)


def test_small_palette_splits_and_too_small_palette_is_an_error(assets):
    m = mmdkit.load(assets / (GEN + "sdef-two-bone-elbow.pmx"))  # every triangle needs both bones
    with pytest.raises(BuildError, match="palette_size=1"):
        build_palette_batches(m, 1)
    m = mmdkit.load(assets / (GEN + "bdef4-twist-cylinder.pmx"))
    pb = build_palette_batches(m, 4)
    check_structure(m, pb)
    assert pb.num_batches >= 1 and (pb.batch_palette >= 0).sum(1).max() <= 4
