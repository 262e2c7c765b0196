"""glTF meshes: primitives (attributes, triangles, morph targets) as numpy arrays.

In: ``meshes[i]`` JSON and the document's ``Accessors``. Out: ``GltfMesh`` with one
``GltfPrimitive`` per drawable primitive. Triangles (mode 4) are kept, strips (5) and fans (6)
are triangulated (degenerate triangles dropped); points and lines (modes 0–3) cannot be skinned
surfaces and are skipped with a warning. Every attribute must have POSITION's count and every
index must address a vertex.
"""

from __future__ import annotations

import numpy as np

from mmdkit.formats.gltf.accessor import Accessors
from mmdkit.formats.gltf.asset import GltfMesh, GltfPrimitive
from mmdkit.formats.gltf.jsonpath import Obj

_MODE_NAMES = ("points", "lines", "line loop", "line strip", "triangles", "triangle strip", "triangle fan")


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def triangles(index: np.ndarray, mode: int, where: Obj, acc: Accessors | None = None) -> np.ndarray:
    """Vertex indices (n,) of mode 4/5/6 → (F, 3) uint32 triangles, counter-clockwise kept."""
    n = len(index)
    if mode == 4:
        if n % 3:
            raise where.error("indices", f"{n} indices do not make whole triangles (mode 4)")
        return index.reshape(-1, 3)
    if n < 3:
        return np.zeros((0, 3), np.uint32)
    if acc is not None:
        acc.spend(n * 48, where, "indices")  # the strip/fan's triangles and their temporaries
    i = np.arange(n - 2)
    if mode == 5:  # glTF: p_i = {v_i, v_(i+1+i%2), v_(i+2-i%2)}
        tri = np.stack([index[i], index[i + 1 + i % 2], index[i + 2 - i % 2]], 1)
    else:  # fan: p_i = {v_(i+1), v_(i+2), v_0}
        tri = np.stack([index[i + 1], index[i + 2], np.full(n - 2, index[0])], 1)
    keep = (tri[:, 0] != tri[:, 1]) & (tri[:, 1] != tri[:, 2]) & (tri[:, 0] != tri[:, 2])
    return tri[keep]


def _attribute(acc: Accessors, attrs: Obj, name: str, types: tuple[str, ...], count: int):
    """Float attribute ``name`` (count, c) or None; its count must match POSITION's."""
    if not attrs.has(name):
        return None
    arr = acc.floats(attrs.int(name), attrs, name, types)
    if len(arr) != count:
        raise attrs.error(name, f"has {len(arr)} elements, POSITION has {count}")
    return arr


def _skin_attributes(acc: Accessors, attrs: Obj, count: int):
    """JOINTS_n / WEIGHTS_n pairs side by side → (V, 4·S) uint16, (V, 4·S) float32, or None."""
    joints, weights = [], []
    while attrs.has(f"JOINTS_{len(joints)}"):
        s = len(joints)
        j = acc.read(attrs.int(f"JOINTS_{s}"), attrs, f"JOINTS_{s}", ("VEC4",))
        if j.dtype.kind != "u" or j.dtype.itemsize > 2:
            raise attrs.error(f"JOINTS_{s}", f"component type {j.dtype} is not unsigned byte/short")
        if len(j) != count:
            raise attrs.error(f"JOINTS_{s}", f"has {len(j)} elements, POSITION has {count}")
        w = _attribute(acc, attrs, f"WEIGHTS_{s}", ("VEC4",), count)
        if w is None:
            raise attrs.error(f"WEIGHTS_{s}", f"is missing although JOINTS_{s} is given")
        joints.append(j)
        weights.append(w)
    if not joints:
        return None, None
    return (_frozen(np.hstack(joints).astype(np.uint16)),
            _frozen(np.ascontiguousarray(np.hstack(weights), np.float32)))


def _targets(acc: Accessors, p: Obj, count: int):
    """Morph targets → (K, V, 3) position deltas and (K, V, 3) normal deltas or None."""
    objs = p.objs("targets")
    acc.spend(len(objs) * count * 12, p, "targets")
    pos = np.zeros((len(objs), count, 3), np.float32)
    nrm = None
    for k, t in enumerate(objs):
        d = _attribute(acc, t, "POSITION", ("VEC3",), count)
        if d is not None:
            pos[k] = d
        d = _attribute(acc, t, "NORMAL", ("VEC3",), count)
        if d is not None:
            if nrm is None:
                acc.spend(len(objs) * count * 12, p, "targets")
                nrm = np.zeros((len(objs), count, 3), np.float32)
            nrm[k] = d
    return _frozen(pos), (None if nrm is None else _frozen(nrm))


def read_primitive(p: Obj, acc: Accessors, n_materials: int, warnings: list[str]) -> GltfPrimitive | None:
    """One ``meshes[i].primitives[j]`` → ``GltfPrimitive``, or None (with a warning) for points/lines."""
    mode = p.int("mode", 4, hi=7)
    if mode < 4:
        warnings.append(f"{p.jpath}: mode {mode} ({_MODE_NAMES[mode]}) is not a surface; skipped")
        return None
    attrs = p.obj("attributes")
    position = acc.floats(attrs.int("POSITION"), attrs, "POSITION", ("VEC3",))
    count = len(position)
    color = _attribute(acc, attrs, "COLOR_0", ("VEC3", "VEC4"), count)
    if color is not None and color.shape[1] == 3:
        color = _frozen(np.hstack([color, np.ones((count, 1), np.float32)]))
    joint, weight = _skin_attributes(acc, attrs, count)
    if p.has("indices"):
        index = acc.indices(p.int("indices"), p, "indices", count)
    else:
        acc.spend(count * 4, p, "indices")
        index = np.arange(count, dtype=np.uint32)
    target_position, target_normal = _targets(acc, p, count)
    return GltfPrimitive(
        vertex_position=position,
        vertex_normal=_attribute(acc, attrs, "NORMAL", ("VEC3",), count),
        vertex_uv=_attribute(acc, attrs, "TEXCOORD_0", ("VEC2",), count),
        vertex_color=color, vertex_joint=joint, vertex_weight=weight,
        face_vertex=_frozen(np.ascontiguousarray(triangles(index, mode, p, acc), np.uint32)),
        target_position=target_position, target_normal=target_normal,
        material=p.int("material", -1, hi=n_materials), mode=mode)


def read_mesh(m: Obj, acc: Accessors, n_materials: int, warnings: list[str]) -> GltfMesh:
    """``meshes[i]`` → ``GltfMesh``; all primitives must have the same number of morph targets."""
    prims, counts = [], set()
    for p in m.objs("primitives"):
        counts.add(p.count("targets") if isinstance(p.d.get("targets"), list) else 0)
        prim = read_primitive(p, acc, n_materials, warnings)
        if prim is not None:
            prims.append(prim)
    if len(counts) > 1:
        raise m.error("primitives", f"primitives have different numbers of morph targets {sorted(counts)}")
    k = counts.pop() if counts else 0
    names = (m.d.get("extras") or {}).get("targetNames") if isinstance(m.d.get("extras"), dict) else None
    if not (isinstance(names, list) and len(names) == k and all(isinstance(x, str) for x in names)):
        names = [f"target{i}" for i in range(k)]
    return GltfMesh(name=m.str("name", ""), primitives=tuple(prims),
                    target_weight=_frozen(np.array(m.floats("weights", k, [0.0] * k), np.float32)),
                    target_name=tuple(names))
