"""glTF node hierarchy: rest TRS, local and world matrices, scenes.

In: the root JSON ``Obj``. Out: node arrays (parent, order, TRS, local/world matrices, mesh and
skin links) with the hierarchy checked (child indices in range, one parent each, no cycles).
Also the vectorised transform helpers the animation sampler and tests use:
``trs_matrices`` (T, R, S → (…, 4, 4)) and ``world_matrices`` (locals → worlds over the tree).
"""

from __future__ import annotations

import numpy as np

from mmdkit.animation.rotation import quat_matrices
from mmdkit.formats.gltf.jsonpath import Obj
from mmdkit.mathutil import qfrom_matrix3_scalar

MAX_NODES = 100_000
"""Most nodes read from one file (characters have hundreds; more is refused, not slowly read)."""
MAX_DEPTH = 1_000
"""Deepest node hierarchy read (the longest chain of parents)."""
MAX_VALUE = 1e6
"""Largest magnitude of a node's translation, scale or matrix entry (file units, usually metres)
and of a rest world matrix entry; beyond it a file is refused instead of giving inf/NaN poses."""


def trs_matrices(translation, rotation, scale) -> np.ndarray:
    """(…, 3), (…, 4) x y z w, (…, 3) → (…, 4, 4) float64 = T · R · S."""
    t = np.asarray(translation, np.float64)
    m = np.zeros(t.shape[:-1] + (4, 4))
    m[..., :3, :3] = quat_matrices(rotation) * np.asarray(scale, np.float64)[..., None, :]
    m[..., :3, 3] = t
    m[..., 3, 3] = 1.0
    return m


def node_levels(node_parent: np.ndarray, node_order: np.ndarray) -> list[np.ndarray]:
    """Nodes grouped by depth (roots first): each group's parents lie in earlier groups."""
    parent = np.asarray(node_parent)
    depth = np.zeros(len(parent), np.int64)
    order = np.asarray(node_order)
    for i in order[parent[order] >= 0]:  # parents first: a parent's depth is final before its children
        depth[i] = depth[parent[i]] + 1
    if not len(order):
        return []
    by = order[np.argsort(depth[order], kind="stable")]
    cuts = np.flatnonzero(np.diff(depth[by])) + 1
    return np.split(by, cuts)


def world_matrices(node_parent: np.ndarray, node_order: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Local matrices (…, N, 4, 4) → world matrices (…, N, 4, 4) float64 (one product per
    hierarchy level, all nodes of a level at once)."""
    world = np.array(local, np.float64)
    parent = np.asarray(node_parent)
    for level in node_levels(parent, node_order)[1:]:
        world[..., level, :, :] = world[..., parent[level], :, :] @ world[..., level, :, :]
    return world


def _decompose(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """4×4 affine → (translation, rotation xyzw, scale, exact) — exact False with shear."""
    a = m[:3, :3]
    s = np.linalg.norm(a, axis=0)
    if np.linalg.det(a) < 0:
        s[0] = -s[0]
    r = a / np.where(s == 0, 1.0, s)
    # the plain-Python body of the shared numba helper: no JIT compile (~1 s) for a few nodes
    q = np.array(qfrom_matrix3_scalar.py_func(*r.ravel().tolist()))
    exact = bool(np.allclose(trs_matrices(m[:3, 3], q, s), m, atol=1e-5 * max(1.0, np.abs(m).max())))
    return m[:3, 3], q, s, exact


def _hierarchy(nodes: list[Obj], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents (N,) int32 and a parents-first order (N,) int32; one parent each, no cycles,
    at most MAX_DEPTH levels."""
    parent = np.full(n, -1, np.int32)
    children: list[list[int]] = []
    for i, o in enumerate(nodes):
        kids = o.ints("children", n, []) if "children" in o.d else []
        for k, c in enumerate(kids):
            if parent[c] >= 0 or c == i:
                raise o.error(f"children[{k}]", f"node {c} already has parent {parent[c]}"
                              if c != i else f"node {c} is its own child")
            parent[c] = i
        children.append(kids)
    order, stack = [], [(i, 0) for i in range(n) if parent[i] < 0]
    while stack:
        i, depth = stack.pop()
        if depth >= MAX_DEPTH:
            raise nodes[i].error(None, f"lies {depth} levels deep; at most {MAX_DEPTH} levels of nodes are read")
        order.append(i)
        stack.extend((c, depth + 1) for c in children[i])
    if len(order) != n:
        cyc = sorted(set(range(n)) - set(order))[0]
        raise nodes[cyc].error(None, "is part of a cycle in the node hierarchy")
    return parent, np.array(order, np.int32)


def _unit_rotation(o: Obj) -> list[float]:
    """``rotation`` as a unit quaternion (normalised without overflow for huge components)."""
    q = np.array(o.floats("rotation", 4), np.float64)
    top = np.abs(q).max()
    if not top > 0 or (q / top) @ (q / top) < 1e-12:
        raise o.error("rotation", "has length 0 (not a quaternion)")
    q /= top
    return (q / np.sqrt(q @ q)).tolist()


def _node_transform(o: Obj, i: int, t, r, s, local, has_matrix, warnings: list[str]) -> None:
    """Rest TRS (and matrix) of ``nodes[i]`` into the arrays, each value within ±MAX_VALUE."""
    d = o.d
    if "matrix" in d:
        local[i] = np.array(o.floats("matrix", 16, bound=MAX_VALUE), np.float64).reshape(4, 4).T
        t[i], r[i], s[i], exact = _decompose(local[i])
        has_matrix[i] = True
        if not exact:
            warnings.append(f"nodes[{i}].matrix has shear; its TRS is approximate")
        return
    if "translation" in d:
        t[i] = o.floats("translation", 3, bound=MAX_VALUE)
    if "rotation" in d:
        r[i] = _unit_rotation(o)
    if "scale" in d:
        s[i] = o.floats("scale", 3, bound=MAX_VALUE)


def read_nodes(root: Obj, n_meshes: int, n_skins: int, warnings: list[str]) -> dict:
    """``nodes`` and ``scenes`` → the node_* and scene fields of ``GltfAsset``."""
    if root.count("nodes") > MAX_NODES:
        raise root.error("nodes", f"{root.count('nodes'):,} nodes; at most {MAX_NODES:,} are read")
    nodes = root.objs("nodes")
    n = len(nodes)
    t, r, s = np.zeros((n, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)), np.ones((n, 3))
    has_matrix, local = np.zeros(n, bool), np.zeros((n, 4, 4))
    mesh, skin, names, weights = np.full(n, -1, np.int32), np.full(n, -1, np.int32), [""] * n, [None] * n
    for i, o in enumerate(nodes):
        d = o.d
        if d:
            names[i] = o.str("name", "")
            mesh[i] = o.int("mesh", -1, hi=n_meshes)
            skin[i] = o.int("skin", -1, hi=n_skins)
            if isinstance(d.get("weights"), list):
                weights[i] = np.array(o.floats("weights", len(d["weights"]), bound=MAX_VALUE), np.float32)
            _node_transform(o, i, t, r, s, local, has_matrix, warnings)
    local[~has_matrix] = trs_matrices(t[~has_matrix], r[~has_matrix], s[~has_matrix])
    parent, order = _hierarchy(nodes, n)
    world = world_matrices(parent, order, local)
    big = np.flatnonzero(~(np.abs(world) <= MAX_VALUE).all(axis=(1, 2)))
    if len(big):
        raise nodes[big[0]].error(None, f"its rest world transform is beyond ±{MAX_VALUE:g} (scales multiply "
                                        "down the hierarchy)")
    scenes = tuple(np.array(sc.ints("nodes", n, []), np.int32) for sc in root.objs("scenes"))
    for k, roots in enumerate(scenes):
        bad = roots[parent[roots] >= 0] if len(roots) else roots
        if len(bad):
            raise root.error(f"scenes[{k}].nodes", f"node {bad[0]} is not a root (it has a parent)")
    default = root.int("scene", 0, hi=len(scenes)) if scenes else -1
    out = dict(node_name=tuple(names), node_parent=parent, node_order=order,
               node_translation=t.astype(np.float32), node_rotation=r.astype(np.float32),
               node_scale=s.astype(np.float32), node_has_matrix=has_matrix,
               node_local=local.astype(np.float32), node_world=world.astype(np.float32),
               node_mesh=mesh, node_skin=skin, node_target_weight=tuple(weights),
               scene_root=scenes, scene=default)
    arrays = [v for v in out.values() if isinstance(v, np.ndarray)] + list(scenes) + weights
    for a in arrays:
        if a is not None:
            a.flags.writeable = False
    return out
