"""Per-Model precomputation for posing: evaluation order, passes, IK paths, morph tables.

In: ``Model``. Out: ``Rig`` — the read-only arrays the pose kernels use (float64 where math
happens), grouped into the tuples the kernels take (``bone_in``, ``ik_in``, ``morph_in``).
``rig_for(model)`` shares one Rig between every user of a Model without keeping the Model alive.
Order: stable sort by (deform layer, file index), then repaired so a parent always comes
before its child (real PMDs list some children first).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mmdkit.model import model as M
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


IK_FIELDS = ("ik_target", "ik_loop", "ik_limit", "ik_link_start", "ik_link_bone", "ik_link_mode",
             "ik_link_lower", "ik_link_upper", "ik_link_cap", "ik_link_path", "ik_link_lazy", "ik_path_start",
             "ik_path_bone", "ik_after_start", "ik_after_bone", "ik_path_parent", "ik_target_row", "ik_group",
             "ik_group_start", "ik_group_solver", "ik_group_bone", "ik_group_rows", "ik_group_link_start",
             "ik_group_link_row")
"""The IK section of a Rig in the order of ``Rig.ik_in`` (unpacked by ``ik.solve_ik`` and
``ik_lanes.solve_lanes``; ``bones.solve_bones`` reads the group fields)."""

MORPH_FIELDS = ("morph_is_leaf", "morph_group_start", "morph_group_target", "morph_group_weight",
                "morph_kind", "bone_morph_start", "bone_morph_bone", "bone_morph_translation",
                "bone_morph_rotation", "vertex_morph_start", "vertex_morph_vertex", "vertex_morph_offset",
                "uv_morph_start", "uv_morph_vertex", "uv_morph_offset", "material_morph_start",
                "material_morph_material", "material_morph_op", "material_morph_values", "material_base")
"""The morph section of a Rig in the order of ``Rig.morph_in`` (unpacked by ``stages.stage_morph``)."""

MATERIAL_MORPH_CHANNELS = {"diffuse": (0, 4), "specular": (4, 7), "specular_power": (7, 8), "ambient": (8, 11),
                           "edge_color": (11, 15), "edge_size": (15, 16), "texture": (16, 20),
                           "sphere": (20, 24), "toon": (24, 28)}
"""Columns of the packed material values (C = 28): the first 16 also have a base value per material."""


@dataclass(frozen=True, eq=False)
class Rig:
    """Arrays derived from a Model for the pose kernels. Read-only; one per Model (``rig_for``).

    B bones, K IK solvers, L IK links, N morphs, V vertices, M materials, E material-morph rows.
    """

    # --- bones ------------------------------------------------------------------------------
    bone_order: np.ndarray  # (B,) int32 all bones, evaluation order
    bone_pass_before: np.ndarray  # (P1,) int32 bones before physics, evaluation order
    bone_pass_after: np.ndarray  # (P2,) int32 after-physics bones (after_physics_mask), eval order
    bone_parent: np.ndarray  # (B,) int32, -1 = root
    bone_position: np.ndarray  # (B, 3) float64 rest positions, model space
    bone_flags: np.ndarray  # (B,) int32 BONE_* bits
    bone_append_parent: np.ndarray  # (B,) int32 append (付与) source, -1 = none
    bone_append_ratio: np.ndarray  # (B,) float64
    bone_fixed_axis: np.ndarray  # (B, 3) float64 unit, parent-local (zeros if none)
    bone_ik: np.ndarray  # (B,) int32 solver whose IK bone this is, -1 = none
    # --- IK (solver k, link j): the order of IK_FIELDS; add new per-solver/per-link arrays here --
    ik_target: np.ndarray  # (K,) int32 bone the solver pulls to its IK bone
    ik_loop: np.ndarray  # (K,) int32 iterations, capped at IK_MAX_LOOPS
    ik_limit: np.ndarray  # (K,) float64 unit angle (radians) per step
    ik_link_start: np.ndarray  # (K+1,) int32 CSR into the link arrays
    ik_link_bone: np.ndarray  # (L,) int32, nearest the target first
    ik_link_mode: np.ndarray  # (L,) int32: 0 free, 1 Euler limits, 2/3/4 X/Y/Z-only, 5 fixed
    ik_link_lower: np.ndarray  # (L, 3) float64 Euler limits, radians, lower ≤ upper
    ik_link_upper: np.ndarray  # (L, 3) float64
    ik_link_cap: np.ndarray  # (L, 3) float64 cos(c), sin(c/2), cos(c/2) of the step cap c (cos -2: none)
    ik_link_path: np.ndarray  # (L,) int32 index into ik_path_bone where the link's refresh starts
    ik_link_lazy: np.ndarray  # (L,) uint8 1: the target hangs below the link and no later link of the solver does
    ik_path_start: np.ndarray  # (K+1,) int32: bones from top link down to target, top first
    ik_path_bone: np.ndarray  # (P,) int32
    ik_after_start: np.ndarray  # (K+1,) int32: descendants of the top link (eval order)
    ik_after_bone: np.ndarray  # (Q,) int32
    ik_path_parent: np.ndarray  # (P,) int32 row of the bone's parent in its solver's path, -1 outside it, -2 root
    ik_target_row: np.ndarray  # (K,) int32 index into ik_path_bone of the solver's target
    # lane groups (``ik_lanes``): solvers solved together, one SIMD lane each (``ik_lane_groups``)
    ik_group: np.ndarray  # (K,) int32 the solver's lane group, -1 = solved alone (``ik.solve_ik``)
    ik_group_start: np.ndarray  # (G+1,) int32 CSR into ik_group_solver
    ik_group_solver: np.ndarray  # (S,) int32 members in evaluation order; the last one's IK bone solves the group
    ik_group_bone: np.ndarray  # (S,) int32 the members' IK bones
    ik_group_rows: np.ndarray  # (G,) int32 the group's longest path (its lanes' paths aligned at the target)
    ik_group_link_start: np.ndarray  # (G+1,) int32 CSR into ik_group_link_row
    ik_group_link_row: np.ndarray  # (J,) int32 link j's row from the target up (0 = the target's row)
    # --- morphs: the order of MORPH_FIELDS --------------------------------------------------
    morph_is_leaf: np.ndarray  # (N,) bool: not a group/flip
    morph_group_start: np.ndarray  # (N+1,) int32 CSR of group/flip morphs expanded to leaves
    morph_group_target: np.ndarray  # (G,) int32 leaf morph
    morph_group_weight: np.ndarray  # (G,) float64 product of the weights on the way
    morph_kind: np.ndarray  # (N,) int64 MORPH_* kind
    bone_morph_start: np.ndarray  # (N+1,) CSR; rows: bone, translation (3,), rotation (4,) xyzw
    bone_morph_bone: np.ndarray
    bone_morph_translation: np.ndarray
    bone_morph_rotation: np.ndarray
    vertex_morph_start: np.ndarray  # (N+1,) CSR; rows: vertex, offset (3,) float32 model space
    vertex_morph_vertex: np.ndarray
    vertex_morph_offset: np.ndarray
    uv_morph_start: np.ndarray  # (N+1,) CSR; rows: vertex, offset (4,) float32
    uv_morph_vertex: np.ndarray
    uv_morph_offset: np.ndarray
    material_morph_start: np.ndarray  # (N+1,) CSR; rows: material (-1 = all), op (0 mul, 1 add)
    material_morph_material: np.ndarray
    material_morph_op: np.ndarray
    material_morph_values: np.ndarray  # (E, 28) float64 packed (MATERIAL_MORPH_CHANNELS)
    material_base: np.ndarray  # (M, 16) float32 the materials' own first 16 channels
    # --- sizes of the pose state -------------------------------------------------------------
    num_vertices: int = 0
    num_additional_uv: int = 0

    @cached_property
    def bone_in(self) -> tuple:
        """(bone_pass_before, bone_pass_after, bone_parent, bone_position, bone_flags,
        bone_append_parent, bone_append_ratio, bone_fixed_axis, bone_ik): kernels' bone inputs."""
        return (self.bone_pass_before, self.bone_pass_after, self.bone_parent, self.bone_position,
                self.bone_flags, self.bone_append_parent, self.bone_append_ratio, self.bone_fixed_axis,
                self.bone_ik)

    @cached_property
    def ik_in(self) -> tuple:
        """The IK arrays in the order of IK_FIELDS."""
        return tuple(getattr(self, n) for n in IK_FIELDS)

    @cached_property
    def morph_in(self) -> tuple:
        """The morph arrays in the order of MORPH_FIELDS."""
        return tuple(getattr(self, n) for n in MORPH_FIELDS)


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
    return Rig(
        bone_order=order, bone_pass_before=passes[0], bone_pass_after=passes[1], bone_parent=parent,
        bone_position=np.asarray(model.bone_position, np.float64), bone_flags=flags,
        bone_append_parent=append_parent,
        bone_append_ratio=np.asarray(model.bone_append_ratio, np.float64), bone_fixed_axis=fixed,
        bone_ik=bone_ik, **ik,
        **_morph_tables(model), num_vertices=model.num_vertices, num_additional_uv=A)


_rigs: "weakref.WeakKeyDictionary[object, Rig]" = weakref.WeakKeyDictionary()


def rig_for(model) -> Rig:
    """The Rig of a Model, built once and shared by all its users while the Model lives
    (a weak cache: it does not keep the Model, or its Rig, alive)."""
    rig = _rigs.get(model)
    if rig is None:
        rig = _rigs[model] = build_rig(model)
    return rig
