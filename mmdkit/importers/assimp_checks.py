"""Checks of what Assimp is given and what it gives back, before anything is computed from it.

In: a .x file's bytes (``check_x_skin_weights``: refused before Assimp reads it) or the bridge's
scene dict (``check_numbers``). Out: nothing, or ``FormatError`` naming the file and the place.
"""

from __future__ import annotations

import re

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.model.build import bound_detail, first_out_of_bounds

BOUND = 1e9
"""Largest magnitude of a number of the scene (file units, matrices, key values and times):
beyond it (1e30, 3.4e38 from a corrupt file) products overflow float32 and pose as NaN/inf."""

_X_MESH = re.compile(rb"Mesh\s+[^{\s]*\s*\{\s*(\d+)\s*;")
_X_SKIN = re.compile(rb'SkinWeights\s*\{\s*"([^"]*)"\s*;\s*(\d+)\s*;')
_X_SEPARATORS = bytes.maketrans(b",;", b"  ")


def check_x_skin_weights(data: bytes, path: str) -> None:
    """Text .x files whose SkinWeights name a vertex their mesh lacks crash Assimp 5.2's X reader
    (a heap overflow: malformed_skinweights_oob.x) or worse, corrupt what it reads without
    crashing; refuse them before Assimp sees them. Indices are read up to the first token that is
    not a whole number (Assimp then refuses the file with its own message)."""
    if not data.startswith(b"xof ") or data[8:12] != b"txt ":
        return
    meshes = [(m.start(), int(m.group(1))) for m in _X_MESH.finditer(data)]
    for w in _X_SKIN.finditer(data):
        owner = [n for start, n in meshes if start < w.start()]
        count = int(w.group(2))
        text = data[w.end():w.end() + 24 * count + 64].translate(_X_SEPARATORS).decode("ascii", "replace")
        ids = []
        for token in text.split()[:count]:
            if not token.isdigit():
                break
            ids.append(int(token))
        if owner and ids and max(ids) >= owner[-1]:
            raise FormatError(f"SkinWeights of bone {w.group(1).decode(errors='replace')!r} name vertex "
                              f"{max(ids)} of a mesh of {owner[-1]} vertices", path=str(path))


def _first_bad(a) -> int | None:
    a = np.asarray(a, np.float64)
    return first_out_of_bounds(a.reshape(len(a), -1), BOUND) if a.size else None


def _refuse(what: str, value, path: str) -> None:
    """FormatError naming ``what`` and its first value that is not finite or out of bounds."""
    v = np.asarray(value, np.float64).ravel()
    bad = v[~(np.abs(v) <= BOUND)][:1]
    raise FormatError(f"{what}: {bound_detail(bad, BOUND)}", path=str(path))


def check_numbers(raw: dict, path: str) -> None:
    """NaN, infinity or a magnitude beyond ``BOUND`` in a node matrix, a mesh's positions, UVs,
    bone offsets, weights or morph targets, or a clip's keys → ``FormatError`` naming the first."""
    nodes = raw["nodes"]
    i = _first_bad(nodes["local"])
    if i is not None:
        _refuse(f"node {nodes['name'][i]!r}: matrix", np.asarray(nodes["local"])[i].ravel(), path)
    for m in raw["meshes"]:
        arrays = [("vertex", "position", m["position"]), ("vertex", "UV", m["uv"]),
                  ("bone", "offset matrix", m["bone_offset"]), ("vertex", "bone weight", m["vertex_weight"])]
        arrays += [("morph target vertex", "position", t) for t in m["target_position"]]
        for item, what, a in arrays:
            i = None if a is None else _first_bad(a)
            if i is not None:
                _refuse(f"mesh {m['name']!r}: {item} {i} {what}", np.asarray(a)[i].ravel(), path)
    for anim in raw["animations"]:
        for c in anim["channels"]:
            for key in ("translation", "rotation", "scale"):
                for part in (key + "_time", key):
                    i = _first_bad(c[part])
                    if i is not None:
                        _refuse(f"clip {anim['name']!r}, node {c['node']!r}: {key} key {i}"
                                + (" time" if part.endswith("_time") else ""), np.asarray(c[part])[i], path)
        for c in anim["morph_channels"]:
            for part in ("time", "weight"):
                i = _first_bad(c[part])
                if i is not None:
                    _refuse(f"clip {anim['name']!r}, morph channel {c['name']!r}: key {i} {part}",
                            np.asarray(c[part])[i], path)
