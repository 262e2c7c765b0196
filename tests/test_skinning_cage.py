"""Triangle cages: exact nearest-triangle binding, rest pose reproduces the mesh, a rigidly moved
cage moves the mesh rigidly, and a cage bent by bones drives the mesh smoothly."""

from __future__ import annotations

import numpy as np
import pytest

from mmdkit.errors import BuildError
from mmdkit.model.builder import ModelBuilder
from mmdkit.skinning.cage import TriangleCage, point_triangle_distance
from mmdkit.skinning.cpu import CpuSkinner

from skinning_reference import random_rigid, rotation_matrices, skin_from_world


def uv_sphere(n):
    """Closed triangle sphere of radius 1: ~4n² triangles."""
    th = np.linspace(0, np.pi, n + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    m = 2 * n
    v = [[0, 0, 1]] + [[np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)] for t in th for p in ph]
    v.append([0, 0, -1])
    f = [[0, 1 + i, 1 + (i + 1) % m] for i in range(m)]
    for r in range(n - 2):
        for i in range(m):
            a, b = 1 + r * m + i, 1 + r * m + (i + 1) % m
            f += [[a, a + m, b], [b, a + m, b + m]]
    last, base = len(v) - 1, 1 + (n - 2) * m
    f += [[base + i, last, base + (i + 1) % m] for i in range(m)]
    return np.array(v, np.float64), np.array(f)


@pytest.fixture(scope="module")
def bound():
    rng = np.random.default_rng(0)
    cv, cf = uv_sphere(12)
    dv = rng.normal(size=(4000, 3))
    dv /= np.linalg.norm(dv, axis=1, keepdims=True)
    dv *= rng.uniform(0.7, 1.3, (len(dv), 1))
    dn = dv / np.linalg.norm(dv, axis=1, keepdims=True)
    return cv, cf, dv, dn, TriangleCage(cv, cf, dv, detail_normals=dn)


def test_binding_is_exact_nearest_triangles(bound):
    cv, cf, dv, dn, cage = bound
    a, b, c = cv[cf[:, 0]], cv[cf[:, 1]], cv[cf[:, 2]]
    for v in range(0, len(dv), 40):
        d = np.array([point_triangle_distance(dv[v], a[t], b[t], c[t]) for t in range(len(cf))])
        order = np.argsort(d, kind="stable")[:4]
        expect = d[[t for t in order if d[t] <= 3.0 * d[order[0]]]]
        got = cage.vertex_triangle[v][cage.vertex_triangle[v] >= 0]
        np.testing.assert_allclose(np.sort(d[got]), np.sort(expect), rtol=1e-9)
        w = cage.vertex_weight[v, :len(got)]
        np.testing.assert_allclose(w.sum(), 1, atol=1e-12)
        np.testing.assert_allclose(w * d[got], (w * d[got])[0], rtol=1e-9)  # w ∝ 1/d


def test_point_triangle_distance_regions():
    a, b, c = np.array([0.0, 0, 0]), np.array([1.0, 0, 0]), np.array([0.0, 1, 0])
    assert point_triangle_distance(np.array([0.2, 0.2, 3.0]), a, b, c) == pytest.approx(3)  # face
    assert point_triangle_distance(np.array([-1.0, -1, 0]), a, b, c) == pytest.approx(np.sqrt(2))  # vertex
    assert point_triangle_distance(np.array([0.5, -2, 0]), a, b, c) == pytest.approx(2)  # edge
    assert point_triangle_distance(np.array([1.0, 1, 0]), a, b, c) == pytest.approx(np.sqrt(0.5))  # hypotenuse


def test_rest_cage_reproduces_mesh(bound):
    cv, cf, dv, dn, cage = bound
    p = np.empty_like(dv)
    n = np.empty_like(dv)
    cage.deform(cv, p, n)
    np.testing.assert_allclose(p, dv, atol=1e-12)
    np.testing.assert_allclose(n, dn, atol=1e-12)


def test_rigidly_moved_cage_moves_mesh_rigidly(bound):
    cv, cf, dv, dn, cage = bound
    rng = np.random.default_rng(1)
    for _ in range(3):
        T = random_rigid(1, rng, spread=5)[0].astype(np.float64)
        R = rotation_matrices(rng.normal(size=(1, 3)))[0]
        t = T[:3, 3]
        p = np.empty_like(dv)
        n = np.empty_like(dv)
        cage.deform(cv @ R.T + t, p, n)
        np.testing.assert_allclose(p, dv @ R.T + t, atol=1e-9)
        np.testing.assert_allclose(n, dn @ R.T, atol=1e-9)


def test_cage_bent_by_bones(bound):
    """The cage itself is skinned by two bones (upper half turns 60°); detail vertices bound only
    to fully-turned triangles turn rigidly with them, the rest stay finite and near the cage."""
    cv, cf, dv, dn, cage = bound
    mb = ModelBuilder()
    lower = mb.add_bone("lower", (0, 0, -1))
    upper = mb.add_bone("upper", (0, 0, 0), lower)
    mat = mb.add_material("m")
    z = cv[:, 2]
    w = np.clip((z + 0.25) / 0.5, 0, 1)  # blend band around the equator
    bi = np.stack([np.full(len(cv), upper), np.full(len(cv), lower)], 1)
    mb.add_mesh(mat, cv, cv, np.zeros((len(cv), 2)), cf, bi, np.stack([w, 1 - w], 1))
    m = mb.build()
    W = np.tile(np.eye(4, dtype=np.float32), (2, 1, 1))
    W[:, :3, 3] = m.bone_position
    R = rotation_matrices([[np.pi / 3, 0, 0]])[0]
    W[1, :3, :3] = R
    cage_now = np.empty((len(cv), 3), np.float32)
    CpuSkinner(m).skin(skin_from_world(W, m.bone_position), None, cage_now, np.empty_like(cage_now))
    p = np.empty_like(dv)
    n = np.empty_like(dv)
    cage.deform(cage_now, p, n)
    assert np.isfinite(p).all() and np.allclose(np.linalg.norm(n, axis=1), 1)
    rigid_tri = (w[cf] == 1).all(1)
    tri = cage.vertex_triangle
    only_rigid = np.array([rigid_tri[r[r >= 0]].all() for r in tri])
    assert only_rigid.sum() > 100
    np.testing.assert_allclose(p[only_rigid], dv[only_rigid] @ R.T, atol=2e-5)
    still = np.array([(w[cf[r[r >= 0]]] == 0).all() for r in tri])
    np.testing.assert_allclose(p[still], dv[still], atol=2e-5)
    # the bent mesh keeps its distance to the (bent) cage's centre within the detail shell
    r = np.linalg.norm(p - np.array([0, 0, 0]), axis=1)
    assert r.max() < 1.6 and r.min() > 0.4


def test_instances_share_binding_and_bad_input(bound):
    cv, cf, dv, dn, cage = bound
    other = cage.copy_for_instance()
    assert other.vertex_local is cage.vertex_local and other.frames is not cage.frames
    p1, p2 = np.empty_like(dv), np.empty_like(dv)
    cage.deform(cv + 1.0, p1)
    other.deform(cv - 1.0, p2)
    np.testing.assert_allclose(p1 - p2, 2.0, atol=1e-9)
    with pytest.raises(BuildError):
        TriangleCage(cv, cf + len(cv), dv)
    with pytest.raises(BuildError):
        TriangleCage(np.zeros((3, 3)), [[0, 1, 2]], dv)  # only a degenerate triangle
