"""Per-Model precomputation for posing: evaluation order, passes, IK paths, morph tables.

In: ``Model``. Out: ``Rig`` (``build_rig(model)``) — the read-only arrays the pose kernels use
(float64 where math happens), in the named groups the kernels take (``BoneIn``, ``IkIn``,
``MorphIn``: each field's shape, dtype and meaning declared once, below). Callers build a Rig once
and pass it on (a take's characters share one: ``runtime.take.LoadedTake.rig``); nothing is cached.
Order: stable sort by (deform layer, file index), then repaired so a parent always comes
before its child (real PMDs list some children first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmdkit.model import model as M
from mmdkit.pose.fields import Field, expose_fields, group
from mmdkit.pose.ik import _EULER_MAX
from mmdkit.pose.ik_groups import csr_rows, ik_lane_groups

IK_MAX_LOOPS = 256  # per solver and frame; larger file values are capped


def evaluation_order(parent: np.ndarray, layer: np.ndarray) -> np.ndarray:
    """(B,) int32 bone indices sorted by (layer, index), parents moved before their children.

    parent (B,) int (−1 = root), layer (B,) int: the deform layer (変形階層)."""
    B = len(parent)
    order = list(np.lexsort((np.arange(B), layer)))
    placed = np.zeros(B, bool)
    out: list[int] = []
    for b in order:  # place each bone after its unplaced ancestors (no recursion: chains may be long)
        chain = []
        b = int(b)
        while b >= 0 and not placed[b] and len(chain) <= B:
            chain.append(b)
            b = int(parent[b])
        for c in reversed(chain):
            if not placed[c]:
                placed[c] = True
                out.append(c)
    return np.asarray(out, np.int32)


def _descendants_mask(parent: np.ndarray, roots) -> np.ndarray:
    """(B,) bool: ``roots`` and every bone below them."""
    B = len(parent)
    mask = np.zeros(B, bool)
    mask[list(roots)] = True
    changed = True
    while changed:
        p = parent
        new = mask | ((p >= 0) & mask[np.clip(p, 0, B - 1)])
        changed = bool((new != mask).any())
        mask = new
    return mask


def _flatten_groups(model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups (and flips) expanded to leaf morphs: CSR start (N+1,), target, weight product.

    Each group is expanded once (memoised, depth-first without recursion), so nested groups cost
    time linear in their members however a file shares them; a member that leads back into a
    group still being expanded (a cycle) is skipped.
    """
    N = model.num_morphs
    kinds = np.asarray(model.morph_kind)
    gs, gt, gw = model.group_morph_start, model.group_morph_target, model.group_morph_weight
    is_group = np.isin(kinds, (M.MORPH_GROUP, M.MORPH_FLIP))
    leaves: list[dict | None] = [None] * N  # group → {leaf morph: summed weight product}
    state = np.zeros(N, np.int8)  # 0 not seen, 1 being expanded, 2 done
    for g0 in np.nonzero(is_group)[0]:
        stack = [(int(g0), False)]
        while stack:
            m, members_done = stack.pop()
            if not members_done:
                if state[m]:
                    continue
                state[m] = 1
                stack.append((m, True))
                stack.extend((int(t), False) for t in gt[gs[m]:gs[m + 1]] if is_group[t] and not state[t])
                continue
            acc: dict = {}
            for t, w in zip(gt[gs[m]:gs[m + 1]].tolist(), gw[gs[m]:gs[m + 1]].tolist()):
                if not is_group[t]:
                    acc[t] = acc.get(t, 0.0) + w
                elif state[t] == 2:
                    for leaf, lw in leaves[t].items():
                        acc[leaf] = acc.get(leaf, 0.0) + w * lw
            leaves[m] = acc
            state[m] = 2
    rows = [leaves[g] or {} for g in range(N)]
    start = np.zeros(N + 1, np.int32)
    start[1:] = np.cumsum([len(r) for r in rows])
    target = np.array([t for r in rows for t in r], np.int32)
    weight = np.array([w for r in rows for w in r.values()], np.float64)
    return start, target, weight


MATERIAL_MORPH_CHANNELS = {"diffuse": (0, 4), "specular": (4, 7), "specular_power": (7, 8), "ambient": (8, 11),
                           "edge_color": (11, 15), "edge_size": (15, 16), "texture": (16, 20),
                           "sphere": (20, 24), "toon": (24, 28)}
"""Columns of the packed material values (C = 28): the first 16 also have a base value per material."""

# Sizes: B bones, P1/P2 bones of the first/second pass, W bones the second pass may change, K IK
# solvers, L IK links, P path rows, Q bones below the chains, G lane groups, S their members, J their
# link rows, N morphs, Ng group-morph rows, Eb/Ev/Eu/Em bone/vertex/UV/material morph rows, M
# materials. Indices are int32, -1 = none.
BoneIn = group("BoneIn", (
    Field("bone_pass_before", ("P1",), "int32", "", "bones before physics, evaluation order"),
    Field("bone_pass_after", ("P2",), "int32", "", "after-physics bones (after_physics_mask), evaluation order"),
    Field("bone_parent", ("B",), "int32", "", "parent bone, -1 = root"),
    Field("bone_position", ("B", 3), "float64", "model", "rest positions"),
    Field("bone_flags", ("B",), "int32", "", "BONE_* bits"),
    Field("bone_append_parent", ("B",), "int32", "", "append (付与) source, -1 = none"),
    Field("bone_append_ratio", ("B",), "float64", "", "share of the source's motion"),
    Field("bone_fixed_axis", ("B", 3), "float64", "parent-local", "unit fixed axis (zeros if none)"),
    Field("bone_ik", ("B",), "int32", "", "solver whose IK bone this is, -1 = none"),
    Field("bone_rewrite_after", ("W",), "int32", "",
          "bones whose world the second pass may change (``pass_after_rows``), ascending"),
), "The bone section of a Rig: the kernels' ``bone_in`` (# Model).", __name__)

IkIn = group("IkIn", (  # solver k, link j; add new per-solver/per-link arrays here
    Field("ik_target", ("K",), "int32", "", "bone the solver pulls to its IK bone"),
    Field("ik_loop", ("K",), "int32", "", "iterations, capped at IK_MAX_LOOPS"),
    Field("ik_limit", ("K",), "float64", "", "unit angle (radians) per step"),
    Field("ik_link_start", ("K+1",), "int32", "", "CSR into the link arrays"),
    Field("ik_link_bone", ("L",), "int32", "", "link bones, nearest the target first"),
    Field("ik_link_mode", ("L",), "int32", "", "0 free, 1 Euler limits, 2/3/4 X/Y/Z-only, 5 fixed"),
    Field("ik_link_lower", ("L", 3), "float64", "parent-local", "Euler limits, radians, lower <= upper"),
    Field("ik_link_upper", ("L", 3), "float64", "parent-local", "Euler limits, radians"),
    Field("ik_link_cap", ("L", 3), "float64", "", "cos(c), sin(c/2), cos(c/2) of the step cap c (cos -2: none)"),
    Field("ik_link_inside", ("L", 10), "float64", "",
          "Euler links: the limits as the test ``ik._euler_limited`` skips its trigonometry by (``ik_inside_table``)"),
    Field("ik_link_path", ("L",), "int32", "", "index into ik_path_bone where the link's refresh starts"),
    Field("ik_link_lazy", ("L",), "uint8", "",
          "1: the target hangs below the link and no later link of the solver does"),
    Field("ik_path_start", ("K+1",), "int32", "", "CSR: bones from the top link down to the target, top first"),
    Field("ik_path_bone", ("P",), "int32", "", "the paths' bones"),
    Field("ik_after_start", ("K+1",), "int32", "", "CSR: descendants of the top link (evaluation order)"),
    Field("ik_after_bone", ("Q",), "int32", "", "the descendants' bones"),
    Field("ik_path_parent", ("P",), "int32", "",
          "row of the bone's parent in its solver's path, -1 outside it, -2 root"),
    Field("ik_target_row", ("K",), "int32", "", "index into ik_path_bone of the solver's target"),
    # lane groups (``ik_lanes``): solvers solved together, one SIMD lane each (``ik_lane_groups``)
    Field("ik_group", ("K",), "int32", "", "the solver's lane group, -1 = solved alone (``ik.solve_ik``)"),
    Field("ik_group_start", ("G+1",), "int32", "", "CSR into ik_group_solver"),
    Field("ik_group_solver", ("S",), "int32", "",
          "members in evaluation order; the last one's IK bone solves the group"),
    Field("ik_group_bone", ("S",), "int32", "", "the members' IK bones"),
    Field("ik_group_rows", ("G",), "int32", "", "the group's longest path (its lanes' paths aligned at the target)"),
    Field("ik_group_link_start", ("G+1",), "int32", "", "CSR into ik_group_link_row"),
    Field("ik_group_link_row", ("J",), "int32", "", "link j's row from the target up (0 = the target's row)"),
    Field("ik_group_link_mode", ("J",), "int32", "", "link j's ik_link_mode, the same in every member"),
), "The IK section of a Rig: the kernels' ``ik_in`` (# Model).", __name__)

MorphIn = group("MorphIn", (
    Field("morph_is_leaf", ("N",), "bool", "", "not a group/flip"),
    Field("morph_group_start", ("N+1",), "int32", "", "CSR of group/flip morphs expanded to leaves"),
    Field("morph_group_target", ("Ng",), "int32", "", "leaf morph"),
    Field("morph_group_weight", ("Ng",), "float64", "", "product of the weights on the way"),
    Field("morph_kind", ("N",), "int64", "", "MORPH_* kind"),
    Field("bone_morph_start", ("N+1",), "int32", "", "CSR into the bone-morph rows"),
    Field("bone_morph_bone", ("Eb",), "int32", "", "bone"),
    Field("bone_morph_translation", ("Eb", 3), "float32", "parent-local", "translation"),
    Field("bone_morph_rotation", ("Eb", 4), "float32", "parent-local", "rotation (x, y, z, w)"),
    Field("vertex_morph_start", ("N+1",), "int32", "", "CSR into the vertex-morph rows"),
    Field("vertex_morph_vertex", ("Ev",), "int32", "", "vertex"),
    Field("vertex_morph_offset", ("Ev", 3), "float32", "model", "offset"),
    Field("uv_morph_start", ("N+1",), "int32", "", "CSR into the UV-morph rows"),
    Field("uv_morph_vertex", ("Eu",), "int32", "", "vertex"),
    Field("uv_morph_offset", ("Eu", 4), "float32", "", "UV offset"),
    Field("material_morph_start", ("N+1",), "int32", "", "CSR into the material-morph rows"),
    Field("material_morph_material", ("Em",), "int32", "", "material, -1 = all"),
    Field("material_morph_op", ("Em",), "uint8", "", "0 multiply, 1 add"),
    Field("material_morph_values", ("Em", 28), "float64", "", "packed values (MATERIAL_MORPH_CHANNELS)"),
    Field("material_base", ("M", 16), "float32", "", "the materials' own first 16 channels"),
), "The morph section of a Rig: the kernels' ``morph_in`` (# Model).", __name__)

IK_FIELDS = IkIn._fields
"""The IK section's field names, in the order of ``Rig.ik_in``."""
MORPH_FIELDS = MorphIn._fields
"""The morph section's field names, in the order of ``Rig.morph_in``."""
_GROUPS = {"bone_in": BoneIn, "ik_in": IkIn, "morph_in": MorphIn}


@dataclass(frozen=True, eq=False)
class Rig:
    """Arrays derived from a Model for the pose kernels, read-only: bone_order (B,) int32 (every
    bone, evaluation order), the groups ``bone_in`` (``BoneIn``), ``ik_in`` (``IkIn``) and
    ``morph_in`` (``MorphIn``), whose fields are also attributes of the Rig (``rig.bone_parent`` is
    ``rig.bone_in.bone_parent``), and the sizes of the pose state (num_vertices, num_additional_uv).
    """

    bone_order: np.ndarray
    bone_in: BoneIn
    ik_in: IkIn
    morph_in: MorphIn
    num_vertices: int = 0
    num_additional_uv: int = 0


expose_fields(Rig, _GROUPS)


def ik_link_modes(lower, upper, has_limit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How the IK solver treats each link (nanoem and babylon-mmd decide it the same way).

    In: Euler limits lower/upper (L, 3) radians, has_limit (L,) bool. Out: mode (L,) int32 —
    0 no limits, 1 Euler limits, 2/3/4 only X/Y/Z may turn (the other four limits exactly 0:
    a hinge such as a knee), 5 every limit 0 (the link never turns) — and the limits as
    (L, 3) float64 with lower ≤ upper (files that give them the other way round are swapped).
    """
    a = np.asarray(lower, np.float64).reshape(-1, 3)
    b = np.asarray(upper, np.float64).reshape(-1, 3)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    zero = (lo == 0.0) & (hi == 0.0)  # (L, 3): this axis may not turn
    mode = np.ones(len(lo), np.int32)
    for axis in (2, 1, 0):
        others = np.delete(zero, axis, axis=1).all(axis=1)
        mode[others & ~zero[:, axis]] = 2 + axis
    mode[zero.all(axis=1)] = 5
    mode[~np.asarray(has_limit, bool)] = 0
    return mode, lo, hi


def ik_inside_table(mode, lower, upper) -> np.ndarray:
    """(L, 10) float64: per Euler-limited link (mode 1) whose limits all lie within ±90°, for the
    order ``ik._euler_limited`` picks: sin of the middle angle's limits (kept within ±88°), then
    cos, sin of the first angle's lower and upper limit and of the third's. An angle strictly
    between its limits is then told by a sine or two cross products. Other links: (2, -2, 0, ...):
    never inside."""
    out = np.zeros((len(mode), 10))
    out[:, 0], out[:, 1] = 2.0, -2.0
    half = 0.5 * math.pi
    for j in range(len(mode)):
        lx, ly, lz = (float(v) for v in lower[j])
        ux, uy, uz = (float(v) for v in upper[j])
        if mode[j] != 1 or min(lx, ly, lz) < -half or max(ux, uy, uz) > half:
            continue
        if -half < lx and ux < half:  # the order choice of ik._euler_limited
            l1, h1, l2, h2, l3, h3 = ly, uy, lx, ux, lz, uz
        elif -half < ly and uy < half:
            l1, h1, l2, h2, l3, h3 = lz, uz, ly, uy, lx, ux
        else:
            l1, h1, l2, h2, l3, h3 = lx, ux, lz, uz, ly, uy
        out[j] = (math.sin(max(l2, -_EULER_MAX)), math.sin(min(h2, _EULER_MAX)), math.cos(l1), math.sin(l1),
                  math.cos(h1), math.sin(h1), math.cos(l3), math.sin(l3), math.cos(h3), math.sin(h3))
    return out


def _ik_tables(model, parent: np.ndarray, order: np.ndarray) -> dict:
    """The IK section of a Rig: link limit modes, chain paths and the bones below each chain."""
    B = len(parent)
    K = len(model.ik_bone)
    rank = np.empty(B, np.int64)
    rank[order] = np.arange(B)
    mode, lower, upper = ik_link_modes(model.ik_link_lower, model.ik_link_upper, model.ik_link_has_limit)
    path_rows, after_rows = [], []
    ancestors = [_ancestors(parent, int(t)) for t in model.ik_target]
    for k in range(K):
        links = model.ik_link_bone[model.ik_link_start[k]:model.ik_link_start[k + 1]]
        target = int(model.ik_target[k])
        linkset = set(int(x) for x in links)
        path = [target]
        b = target
        top = int(links[-1]) if len(links) else target
        while b >= 0 and b != top and len(path) <= B:
            b = int(parent[b])
            if b < 0:
                break
            path.append(b)
        if top not in path:  # odd chain: fall back to links + target
            path = [target] + [int(x) for x in links]
        path_rows.append(sorted(set(path) | linkset, key=lambda x: rank[x]))
        desc = _descendants_mask(parent, [top] if len(links) else [target])
        after_rows.append([int(x) for x in order if desc[x]])
    ps, pb = csr_rows(path_rows)
    as_, ab = csr_rows(after_rows)
    link_path = np.zeros(len(model.ik_link_bone), np.int32)
    link_lazy = np.zeros(len(model.ik_link_bone), np.uint8)
    link_cap = np.zeros((len(model.ik_link_bone), 3))
    for k in range(K):  # the link's row in its path (the path's last row if it is not on it)
        row = path_rows[k]
        for j in range(model.ik_link_start[k], model.ik_link_start[k + 1]):
            link = int(model.ik_link_bone[j])
            link_path[j] = ps[k] + (row.index(link) if link in row else max(len(row) - 1, 0))
            later = model.ik_link_bone[j + 1:model.ik_link_start[k + 1]]
            link_lazy[j] = link in ancestors[k] and not any(link in _ancestors(parent, int(x)) for x in later)
            cap = float(model.ik_limit_angle[k]) * (j - model.ik_link_start[k] + 1)  # unit × (index + 1)
            capped = cap < math.pi
            link_cap[j] = (math.cos(cap) if capped else -2.0, math.sin(0.5 * cap), math.cos(0.5 * cap))
    path_parent = np.zeros(len(pb), np.int32)
    target_row = np.zeros(K, np.int32)
    for k in range(K):
        row = path_rows[k]
        for i, b in enumerate(row):
            p = int(parent[b])
            path_parent[ps[k] + i] = row.index(p) if p in row else (-1 if p >= 0 else -2)
        target_row[k] = ps[k] + row.index(int(model.ik_target[k]))
    return dict(
        ik_target=np.asarray(model.ik_target, np.int32),
        # a corrupt count must not hang posing: at most IK_MAX_LOOPS (babylon-mmd caps at 256 too)
        ik_loop=np.clip(np.asarray(model.ik_loop_count, np.int64), 0, IK_MAX_LOOPS).astype(np.int32),
        ik_limit=np.asarray(model.ik_limit_angle, np.float64),
        ik_link_start=np.asarray(model.ik_link_start, np.int32),
        ik_link_bone=np.asarray(model.ik_link_bone, np.int32), ik_link_mode=mode,
        ik_link_lower=lower, ik_link_upper=upper, ik_link_cap=link_cap, ik_link_path=link_path,
        ik_link_inside=ik_inside_table(mode, lower, upper),
        ik_link_lazy=link_lazy,
        ik_path_start=ps, ik_path_bone=pb, ik_after_start=as_, ik_after_bone=ab, ik_path_parent=path_parent,
        ik_target_row=target_row)


def _ancestors(parent: np.ndarray, b: int) -> set[int]:
    """Bone b and every bone above it (cycle-safe)."""
    out = set()
    while 0 <= b < len(parent) and b not in out:
        out.add(b)
        b = int(parent[b])
    return out


def _material_values(model) -> tuple[np.ndarray, np.ndarray]:
    """(E, 28) float64 packed material-morph values and (M, 16) float32 base values."""
    def col(a, n, E):
        return np.zeros((E, n), np.float32) if a is None else np.asarray(a, np.float32).reshape(E, n)

    E = 0 if model.material_morph_material is None else len(model.material_morph_material)
    vals = np.concatenate([
        col(model.material_morph_diffuse, 4, E), col(model.material_morph_specular, 3, E),
        col(model.material_morph_specular_power, 1, E), col(model.material_morph_ambient, 3, E),
        col(model.material_morph_edge_color, 4, E), col(model.material_morph_edge_size, 1, E),
        col(model.material_morph_texture_tint, 4, E), col(model.material_morph_sphere_tint, 4, E),
        col(model.material_morph_toon_tint, 4, E)], axis=1)
    Mn = model.num_materials
    base = np.concatenate([
        col(model.material_diffuse, 4, Mn), col(model.material_specular, 3, Mn),
        col(model.material_specular_power, 1, Mn), col(model.material_ambient, 3, Mn),
        col(model.material_edge_color, 4, Mn), col(model.material_edge_size, 1, Mn)], axis=1)
    return np.ascontiguousarray(vals, np.float64), base


def _morph_tables(model) -> dict:
    """The morph section of a Rig: flattened groups and the Model's per-kind tables."""
    gs, gt, gw = _flatten_groups(model)
    kinds = np.asarray(model.morph_kind)
    values, base = _material_values(model)
    m = model
    return dict(
        morph_is_leaf=~np.isin(kinds, (M.MORPH_GROUP, M.MORPH_FLIP)), morph_group_start=gs,
        morph_group_target=gt, morph_group_weight=gw, morph_kind=np.asarray(kinds, np.int64),
        bone_morph_start=m.bone_morph_start, bone_morph_bone=m.bone_morph_bone,
        bone_morph_translation=m.bone_morph_translation, bone_morph_rotation=m.bone_morph_rotation,
        vertex_morph_start=m.vertex_morph_start, vertex_morph_vertex=m.vertex_morph_vertex,
        vertex_morph_offset=m.vertex_morph_offset, uv_morph_start=m.uv_morph_start,
        uv_morph_vertex=m.uv_morph_vertex, uv_morph_offset=m.uv_morph_offset,
        material_morph_start=m.material_morph_start, material_morph_material=m.material_morph_material,
        material_morph_op=m.material_morph_op, material_morph_values=values, material_base=base)


def after_physics_mask(order: np.ndarray, parent: np.ndarray, append_parent: np.ndarray,
                       flags: np.ndarray) -> np.ndarray:
    """(B,) bool: the bones of the second pass — those flagged after-physics and every bone whose
    parent or append (付与) source is in it. Such a bone must wait for its source: evaluated in
    the first pass it would read the source's state of another frame (of the last frame posed,
    or of nothing at the start of a batch chunk)."""
    after = (flags & M.BONE_AFTER_PHYSICS) != 0
    uses_append = (flags & (M.BONE_APPEND_ROTATION | M.BONE_APPEND_TRANSLATION)) != 0
    changed = True
    while changed:  # append sources may come later in the order: repeat until nothing moves
        changed = False
        for b in order:
            if after[b]:
                continue
            p, a = parent[b], append_parent[b]
            if (p >= 0 and after[p]) or (a >= 0 and uses_append[b] and after[a]):
                after[b] = changed = True
    return after


def pass_after_rows(pass_after: np.ndarray, bone_ik: np.ndarray, ik: dict) -> np.ndarray:
    """(W,) int32 ascending: the bones whose world the second pass (``pass_after``) may change — its
    own bones, and the links, path and bones below the chain of each solver whose IK bone is in it
    (those may lie in the first pass). Without a simulator, every other bone keeps the world (and
    matrices) the first pass gave it."""
    rows = set(pass_after.tolist())
    for b in pass_after.tolist():
        k = int(bone_ik[b])
        if k < 0:
            continue
        for start, flat in (("ik_link_start", "ik_link_bone"), ("ik_path_start", "ik_path_bone"),
                            ("ik_after_start", "ik_after_bone")):
            rows.update(ik[flat][ik[start][k]:ik[start][k + 1]].tolist())
    return np.asarray(sorted(rows), np.int32)


def build_rig(model) -> Rig:
    """The Rig of ``model`` (see ``Rig``); pure, nothing cached."""
    parent = np.asarray(model.bone_parent, np.int32)
    order = evaluation_order(parent, np.asarray(model.bone_layer, np.int64))
    flags = np.asarray(model.bone_flags, np.int32)
    append_parent = np.asarray(model.bone_append_parent, np.int32)
    after = after_physics_mask(order, parent, append_parent, flags)
    fixed = np.asarray(model.bone_fixed_axis, np.float64).copy()
    n = np.linalg.norm(fixed, axis=1)
    use = ((flags & M.BONE_FIXED_AXIS) != 0) & (n > 1e-8)
    fixed[use] /= n[use, None]
    fixed[~use] = 0.0
    A = 0 if model.vertex_additional_uv is None else model.vertex_additional_uv.shape[1]
    passes = order[~after[order]].astype(np.int32), order[after[order]].astype(np.int32)
    bone_ik = np.asarray(model.bone_ik, np.int32)
    ik = _ik_tables(model, parent, order)
    ik.update(ik_lane_groups(ik, np.asarray(model.ik_bone, np.int32), parent, append_parent, bone_ik, passes))
    bone_in = BoneIn(
        bone_pass_before=passes[0], bone_pass_after=passes[1], bone_parent=parent,
        bone_position=np.asarray(model.bone_position, np.float64), bone_flags=flags,
        bone_append_parent=append_parent, bone_append_ratio=np.asarray(model.bone_append_ratio, np.float64),
        bone_fixed_axis=fixed, bone_ik=bone_ik, bone_rewrite_after=pass_after_rows(passes[1], bone_ik, ik))
    return Rig(bone_order=order, bone_in=bone_in, ik_in=IkIn(**ik), morph_in=MorphIn(**_morph_tables(model)),
               num_vertices=model.num_vertices, num_additional_uv=A)
