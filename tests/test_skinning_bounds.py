"""Bone hit boxes: boxes contain their vertices at rest, follow rigid bones exactly, answer
point and ray queries, and the gap report shows (and the threshold option closes) joint gaps."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.model.builder import ModelBuilder
from mmdkit.skinning.bounds import BoneBoxes
from mmdkit.skinning.cpu import CpuSkinner

from skinning_reference import random_rigid, rotation_matrices, simple_fk, skin_from_world


def rest_world(m):
    W = np.tile(np.eye(4, dtype=np.float32), (m.num_bones, 1, 1))
    W[:, :3, 3] = m.bone_position
    return W


def two_blocks():
    """Two separated unit cubes of points on two unrelated bones (BDEF1)."""
    mb = ModelBuilder()
    a = mb.add_bone("a", (0, 0, 0))
    b = mb.add_bone("b", (5, 0, 0))
    mb.add_bone("empty", (9, 9, 9))
    mat = mb.add_material("m")
    g = np.stack(np.meshgrid(*[np.linspace(0, 1, 4)] * 3, indexing="ij"), -1).reshape(-1, 3)
    n = len(g)
    mb.add_mesh(mat, g, np.tile([0, 1, 0], (n, 1)), np.zeros((n, 2)), [[0, 1, 2]], [a] * n)
    mb.add_mesh(mat, g + (5, 0, 0), np.tile([0, 1, 0], (n, 1)), np.zeros((n, 2)), [[0, 1, 2]], [b] * n)
    return mb.build()


def test_rest_boxes_and_queries():
    m = two_blocks()
    bx = BoneBoxes(m)
    assert bx.valid.tolist() == [True, True, False]
    np.testing.assert_allclose(bx.rest_min[1], (5, 0, 0))
    np.testing.assert_allclose(bx.rest_max[1], (6, 1, 1))
    c, ax, h = bx.world_boxes(rest_world(m))
    np.testing.assert_allclose(c[0], (0.5, 0.5, 0.5))
    np.testing.assert_allclose(h[0], (0.5, 0.5, 0.5))
    assert bx.hit_point((0.5, 0.5, 0.5)) == 0 and bx.hit_point((5.2, 0.9, 0.1)) == 1
    assert bx.hit_point((3, 0.5, 0.5)) == -1 and bx.hit_point((9, 9, 9)) == -1
    assert bx.hit_ray((-10, 0.5, 0.5), (1, 0, 0)) == 0  # the nearer box wins
    assert bx.hit_ray((20, 0.5, 0.5), (-1, 0, 0)) == 1
    b, t = bx.hit_ray((20, 0.5, 0.5), (-1, 0, 0), return_distance=True)
    assert b == 1 and t == pytest.approx(14)
    assert bx.hit_ray((-10, 0.5, 0.5), (-1, 0, 0)) == -1  # pointing away
    assert bx.hit_ray((-10, 2, 0.5), (1, 0, 0)) == -1  # passes above
    assert bx.hit_ray((0.5, 0.5, 0.5), (0, 1, 0), return_distance=True) == (0, 0.0)  # starts inside


def test_boxes_follow_rigid_bones_exactly():
    m = two_blocks()
    bx = BoneBoxes(m)
    sk = CpuSkinner(m)
    rng = np.random.default_rng(0)
    for _ in range(5):
        W = random_rigid(3, rng, spread=4)
        p = np.empty((m.num_vertices, 3), np.float32)
        n = np.empty_like(p)
        sk.skin(skin_from_world(W, m.bone_position), None, p, n)
        c, ax, h = bx.world_boxes(W)
        np.testing.assert_allclose(ax[0] @ ax[0].T, np.eye(3), atol=1e-5)  # orthonormal axes
        for v in range(m.num_vertices):
            b = m.vertex_bone_index[v, 0]
            loc = ax[b] @ (p[v] - c[b])
            assert np.all(np.abs(loc) <= h[b] + 1e-4)
        # a ray shot at a posed box centre from far away hits that bone
        for b in (0, 1):
            o = c[b] + 50 * rng.normal(size=3)
            hit = bx.hit_ray(o, c[b] - o)
            assert hit in (0, 1) and (hit == b or bx.hit_ray(o, c[b] - o, return_distance=True)[1] < 1)
            assert bx.hit_point(c[b]) == b
        r = bx.gap_report([W])
        assert r.outside_own.tolist() == [0] and r.outside_all.tolist() == [0]


@pytest.fixture(scope="module")
def gene(assets):
    return mmdkit.load(assets / "gene/Gene.pmx")


def test_gene_rest_has_no_gaps_and_threshold_closes_posed_gaps(gene):
    m = gene
    bx = BoneBoxes(m)
    r = bx.gap_report([rest_world(m)])
    assert r.outside_own[0] == 0 and r.outside_all[0] == 0
    rng = np.random.default_rng(1)
    poses = [simple_fk(m, rotation_matrices(rng.normal(scale=0.35, size=(m.num_bones, 3))))
             for _ in range(3)]
    strongest = bx.gap_report(poses)
    closed = BoneBoxes(m, threshold=0.2).gap_report(poses)
    assert strongest.outside_own.min() > 0  # strongest-bone boxes leave gaps at the joints
    assert np.all(closed.outside_own <= strongest.outside_own)
    assert closed.fraction_all < strongest.fraction_all
    assert strongest.per_bone.sum() == strongest.outside_own.sum()
    assert "outside own box" in str(strongest)


def test_gap_report_over_real_dance(gene, assets):
    """Gene dancing wavefile_v2 (posed by mmdkit.runtime.Character): strongest-bone
    boxes leave vertices outside at the joints; boxes that also take every vertex weighted ≥ 0.2
    leave far fewer. The Character's skinned mesh equals the float64 reference."""
    from mmdkit.runtime import Character
    from skinning_reference import skin_reference

    ch = Character(gene, mmdkit.load(assets / "wavefile/wavefile_v2.vmd"))
    poses = []
    for f in (400, 800, 1200):
        ch.update(float(f))
        poses.append(ch.bone_world.copy())
    p = np.empty((gene.num_vertices, 3), np.float32)
    n = np.empty_like(p)
    ch.skin(p, n)
    ref_p, ref_n = skin_reference(gene, ch.bone_skin, ch.vertex_offset)
    np.testing.assert_allclose(p, ref_p, atol=2e-4)
    strongest = BoneBoxes(gene).gap_report(poses)
    closed = BoneBoxes(gene, threshold=0.2).gap_report(poses)
    assert strongest.outside_own.sum() > 0
    assert closed.outside_own.sum() < 0.6 * strongest.outside_own.sum()
    assert closed.outside_all.sum() < strongest.outside_all.sum()
