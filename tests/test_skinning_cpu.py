"""CPU skinning kernels: BDEF1/2/4, SDEF, QDEF against a float64 reference and MMD facts."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import mmdkit
from mmdkit.model import model as M
from mmdkit.model.builder import ModelBuilder
from mmdkit.skinning.cpu import CpuSkinner, prepare_normals

from skinning_reference import random_rigid, rotation_matrices, skin_from_world, skin_reference

GEN = "fixtures/yohawing-unity-mmd-loader/Tests/Fixtures/Assets/GeneratedPmx/"


def identity(B):
    return np.tile(np.eye(4, dtype=np.float32), (B, 1, 1))


def skin(sk, S, off=None, parallel=None):
    p = np.full((sk.num_vertices, 3), np.nan, np.float32)
    n = np.full((sk.num_vertices, 3), np.nan, np.float32)
    sk.skin(np.ascontiguousarray(S, np.float32), off, p, n, parallel=parallel)
    return p, n


def mixed_model(rng, V=3000, B=12):
    """Random vertices of every deform type (BDEF4 weights not summing to 1, zero normals)."""
    mb = ModelBuilder(name="mixed")
    for b in range(B):
        mb.add_bone(f"b{b}", rng.normal(size=3), b - 1)
    mat = mb.add_material("m")
    pos = rng.normal(size=(V, 3)).astype(np.float32)
    nrm = rng.normal(size=(V, 3)).astype(np.float32)
    nrm[::97] = 0  # zero-length file normals exist in the wild
    bi = np.stack([rng.choice(B, 4, replace=False) for _ in range(V)]).astype(np.int32)
    bw = rng.uniform(0.05, 1, size=(V, 4)).astype(np.float32)
    deform = rng.integers(0, 5, V).astype(np.uint8)
    bw[deform == M.DEFORM_BDEF4] *= 0.9  # need not sum to one
    bw[deform == M.DEFORM_QDEF] /= bw[deform == M.DEFORM_QDEF].sum(1, keepdims=True)
    faces = rng.integers(0, V, size=(V, 3))
    mb.add_mesh(mat, pos, nrm, np.zeros((V, 2)), faces, bi, bw, deform=deform)
    m = mb.build()
    sd = m.vertex_deform == M.DEFORM_SDEF
    c = np.zeros((V, 3), np.float32)
    r0 = np.zeros((V, 3), np.float32)
    r1 = np.zeros((V, 3), np.float32)
    c[sd] = rng.normal(size=(sd.sum(), 3))
    r0[sd] = c[sd] + rng.normal(scale=0.3, size=(sd.sum(), 3))
    r1[sd] = c[sd] + rng.normal(scale=0.3, size=(sd.sum(), 3))
    return m.replace(vertex_sdef_c=c, vertex_sdef_r0=r0, vertex_sdef_r1=r1)


@pytest.fixture(scope="module")
def mixed():
    m = mixed_model(np.random.default_rng(1))
    return m, CpuSkinner(m, vertex_morphable=np.ones(m.num_vertices, bool))  # offsets on every deform type


def test_identity_pose_returns_bind_mesh(mixed):
    m, sk = mixed
    for par in (False, True):
        p, n = skin(sk, identity(m.num_bones), parallel=par)
        # BDEF4 weights sum to 0.9 on purpose: the identity pose scales those by their weight sum
        w = sk.vertex_weight.sum(1)
        expect = m.vertex_position * np.where(m.vertex_deform == M.DEFORM_BDEF4, w, 1)[:, None]
        np.testing.assert_allclose(p, expect, atol=2e-6)
        np.testing.assert_allclose(n, sk.bind_normal, atol=2e-6)


def test_all_kernels_match_float64_reference(mixed):
    m, sk = mixed
    rng = np.random.default_rng(2)
    S = random_rigid(m.num_bones, rng, angle=2.5)
    off = rng.normal(scale=0.1, size=(m.num_vertices, 3)).astype(np.float32)
    for o in (None, off):
        ref_p, ref_n = skin_reference(m, S, o, bind_normal=sk.bind_normal)
        for par in (False, True):
            p, n = skin(sk, S, o, parallel=par)
            np.testing.assert_allclose(p, ref_p, atol=5e-5)
            np.testing.assert_allclose(n, ref_n, atol=5e-5)
            assert np.allclose(np.linalg.norm(n, axis=1), 1, atol=1e-5)


def test_zero_length_normals_are_repaired():
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32)
    nrm = np.array([[0, 0, 2], [0, 0, 0], [0, 0, 1], [0, 0, 0]], np.float32)  # file says +z
    faces = np.array([[0, 1, 2], [1, 3, 2]])
    n = prepare_normals(pos, nrm, faces)
    np.testing.assert_allclose(n, np.tile([0, 0, 1], (4, 1)), atol=1e-6)
    n = prepare_normals(pos, -nrm, faces)  # the other winding convention follows the file
    np.testing.assert_allclose(n, np.tile([0, 0, -1], (4, 1)), atol=1e-6)
    lonely = prepare_normals(pos, np.zeros((4, 3), np.float32), np.zeros((0, 3), int))
    assert np.isfinite(lonely).all() and np.allclose(np.linalg.norm(lonely, axis=1), 1)


def test_single_bone_vertex_moves_rigidly(mixed):
    m, sk = mixed
    rng = np.random.default_rng(3)
    S = random_rigid(m.num_bones, rng)
    p, n = skin(sk, S)
    one = m.vertex_deform == M.DEFORM_BDEF1
    A = S[m.vertex_bone_index[one, 0]].astype(np.float64)
    expect = np.einsum("vij,vj->vi", A[:, :3, :3], m.vertex_position[one]) + A[:, :3, 3]
    np.testing.assert_allclose(p[one], expect, atol=2e-5)
    # rigid: pairwise distances among vertices of one bone are kept
    b = m.vertex_bone_index[one, 0]
    sel = np.nonzero(one)[0][b == b[0]]
    d0 = np.linalg.norm(m.vertex_position[sel][:, None] - m.vertex_position[sel][None], axis=-1)
    d1 = np.linalg.norm(p[sel][:, None] - p[sel][None], axis=-1)
    np.testing.assert_allclose(d1, d0, atol=5e-5)


def test_qdef_equals_lbs_for_single_bone_and_keeps_unit_normals():
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    for b in range(3):
        mb.add_bone(f"b{b}", rng.normal(size=3), b - 1)
    mat = mb.add_material("m")
    V = 200
    pos, nrm = rng.normal(size=(V, 3)), rng.normal(size=(V, 3))
    bi = np.tile([1, 0, 2, 0], (V, 1))
    single = np.tile([1.0, 0, 0, 0], (V, 1))
    mb.add_mesh(mat, pos, nrm, np.zeros((V, 2)), [[0, 1, 2]], bi, single, deform=M.DEFORM_QDEF)
    mb.add_mesh(mat, pos, nrm, np.zeros((V, 2)), [[0, 1, 2]], bi, single, deform=M.DEFORM_BDEF1)
    mixw = np.tile([0.5, 0.2, 0.3, 0], (V, 1))
    mb.add_mesh(mat, pos, nrm, np.zeros((V, 2)), [[0, 1, 2]], bi, mixw, deform=M.DEFORM_QDEF)
    m = mb.build()
    sk = CpuSkinner(m)
    S = random_rigid(3, rng, angle=3.0, spread=3)
    p, n = skin(sk, S)
    np.testing.assert_allclose(p[:V], p[V:2 * V], atol=3e-5)
    np.testing.assert_allclose(n[:V], n[V:2 * V], atol=3e-6)
    assert np.allclose(np.linalg.norm(n, axis=1), 1, atol=1e-6)
    # blended dual quaternions are rigid: each vertex's normal is a pure rotation of its bind normal
    ref_p, ref_n = skin_reference(m, S)
    np.testing.assert_allclose(p, ref_p, atol=5e-5)


def elbow(model_path, assets, angle):
    """Bend the second bone of a two-bone model by ``angle`` about z at its own position."""
    m = mmdkit.load(assets / model_path)
    W = identity(m.num_bones).astype(np.float64)
    pivot = m.bone_position[1].astype(np.float64)
    R = rotation_matrices([[0, 0, angle]])[0]
    W[1, :3, :3] = R
    W[1, :3, 3] = pivot - R @ pivot
    return m, skin_from_world(W, m.bone_position)


def ring_radius(p, m, y):
    ring = np.isclose(m.vertex_position[:, 1], y)
    q = p[ring]
    return np.linalg.norm(q - q.mean(0), axis=1).mean()


def test_sdef_keeps_volume_where_bdef2_collapses(assets):
    m, S = elbow(GEN + "sdef-two-bone-elbow.pmx", assets, np.pi * 0.75)
    assert (m.vertex_deform == M.DEFORM_SDEF).all()
    sk = CpuSkinner(m)
    p_sdef, n_sdef = skin(sk, S)
    ref_p, ref_n = skin_reference(m, S, bind_normal=sk.bind_normal)
    np.testing.assert_allclose(p_sdef, ref_p, atol=1e-5)
    lbs = m.replace(vertex_deform=np.full(m.num_vertices, M.DEFORM_BDEF2, np.uint8))
    p_lbs, _ = skin(CpuSkinner(lbs), S)
    r_rest = ring_radius(m.vertex_position, m, 0.5)
    r_sdef = ring_radius(p_sdef, m, 0.5)
    r_lbs = ring_radius(p_lbs, m, 0.5)
    assert abs(r_sdef - r_rest) < 0.02 * r_rest  # SDEF: the mid ring keeps its radius
    assert r_lbs < 0.8 * r_rest  # linear blending pinches it (candy wrapper)
    # unweighted SDEF ends follow their bones rigidly
    assert np.allclose(p_sdef[np.isclose(m.vertex_position[:, 1], 0)],
                       m.vertex_position[np.isclose(m.vertex_position[:, 1], 0)], atol=1e-5)


def test_real_fixtures_match_reference(assets):
    rng = np.random.default_rng(5)
    for name in ("mixed-deform-types.pmx", "qdef-twist-cylinder.pmx", "bdef4-twist-cylinder.pmx",
                 "bdef2-two-bone-strip.pmx"):
        m = mmdkit.load(assets / (GEN + name))
        sk = CpuSkinner(m)
        S = random_rigid(m.num_bones, rng, angle=1.5)
        p, n = skin(sk, S)
        ref_p, ref_n = skin_reference(m, S, bind_normal=sk.bind_normal)
        np.testing.assert_allclose(p, ref_p, atol=5e-5, err_msg=name)
        np.testing.assert_allclose(n, ref_n, atol=5e-5, err_msg=name)


def test_gene_matches_reference_with_vertex_morph(assets):
    m = mmdkit.load(assets / "gene/Gene.pmx")
    sk = CpuSkinner(m)
    assert sk.parallel  # 28k vertices: threaded by default
    rng = np.random.default_rng(6)
    S = random_rigid(m.num_bones, rng, angle=0.5, spread=2)
    k = int(np.argmax(np.diff(m.vertex_morph_start)))  # the biggest vertex morph
    off = np.zeros((m.num_vertices, 3), np.float32)
    rows = slice(m.vertex_morph_start[k], m.vertex_morph_start[k + 1])
    np.add.at(off, m.vertex_morph_vertex[rows], m.vertex_morph_offset[rows])
    p, n = skin(sk, S, off)
    ref_p, ref_n = skin_reference(m, S, off, bind_normal=sk.bind_normal)
    np.testing.assert_allclose(p, ref_p, atol=2e-4)
    np.testing.assert_allclose(n, ref_n, atol=2e-5)


def test_many_characters_share_one_skinner(mixed):
    """One Model, one precomputed skinner, several characters with their own poses and outputs,
    skinned at the same time from several threads (the kernel holds no state, releases the GIL)."""
    m, sk = mixed
    rng = np.random.default_rng(7)
    poses = [random_rigid(m.num_bones, rng) for _ in range(4)]
    expect = [skin(sk, S, parallel=False) for S in poses]
    outs = [(np.zeros((m.num_vertices, 3), np.float32), np.zeros((m.num_vertices, 3), np.float32))
            for _ in poses]

    def run(i):
        for _ in range(20):
            sk.skin(poses[i], None, outs[i][0], outs[i][1], parallel=False)

    th = [threading.Thread(target=run, args=(i,)) for i in range(len(poses))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    for (p, n), (ep, en) in zip(outs, expect):
        np.testing.assert_array_equal(p, ep)
        np.testing.assert_array_equal(n, en)
    assert not np.allclose(outs[0][0], outs[1][0])  # really different poses
    assert not sk.bind_position.flags.writeable and not sk.vertex_weight.flags.writeable


def test_bad_bone_index_is_a_build_error():
    mb = ModelBuilder()
    mb.add_bone("b", (0, 0, 0))
    mat = mb.add_material("m")
    mb.add_mesh(mat, np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((3, 2)), [[0, 1, 2]], [0, 0, 0])
    m = mb.build()
    bad = m.vertex_bone_index.copy()
    bad[1, 0] = 5
    with pytest.raises(mmdkit.BuildError, match="vertex 1"):
        CpuSkinner(m.replace(vertex_bone_index=bad))


def test_offsets_are_read_only_where_a_vertex_morph_reaches(assets):
    """Vertices no vertex morph moves skip the offsets (their groups never read them)."""
    m = mmdkit.load(assets / "mei/Model/mei/mei.pmd")
    sk = CpuSkinner(m)
    S = random_rigid(m.num_bones, np.random.default_rng(8), angle=0.5)
    off = np.random.default_rng(9).normal(scale=0.1, size=(m.num_vertices, 3)).astype(np.float32)
    morphable = np.zeros(m.num_vertices, bool)
    morphable[m.vertex_morph_vertex] = True
    assert 0 < morphable.sum() < m.num_vertices
    p, _ = skin(sk, S, off)
    ref_p, _ = skin_reference(m, S, np.where(morphable[:, None], off, 0), bind_normal=sk.bind_normal)
    np.testing.assert_allclose(p, ref_p, atol=5e-5)
