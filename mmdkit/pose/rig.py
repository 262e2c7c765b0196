"""Per-Model precomputation for posing: evaluation order, passes, IK paths, flattened groups.

In: ``Model``. Out: ``Rig`` — read-only arrays the per-frame kernels use, built once per Model
and shared by every character of that model.
Order: stable sort by (deform layer, file index), then repaired so a parent always comes
before its child (real PMDs list some children first).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmdkit.model import model as M

IK_MAX_LOOPS = 256  # per solver and frame; larger file values are capped


def evaluation_order(parent: np.ndarray, layer: np.ndarray) -> np.ndarray:
    """Bone indices sorted by (layer, index), parents moved before their children."""
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


@dataclass(frozen=True, eq=False)
class Rig:
    """Arrays derived from a Model for the pose kernels (float64 where math happens)."""

    order: np.ndarray  # (B,) int32 all bones, evaluation order
    pass1: np.ndarray  # (P1,) int32 bones before physics, evaluation order
    pass2: np.ndarray  # (P2,) int32 after-physics bones, evaluation order
    parent: np.ndarray  # (B,) int32
    position: np.ndarray  # (B, 3) float64 rest positions
    flags: np.ndarray  # (B,) int32
    append_parent: np.ndarray
    append_ratio: np.ndarray  # (B,) float64
    fixed_axis: np.ndarray  # (B, 3) float64 unit (zeros if none)
    bone_ik: np.ndarray  # (B,) int32
    ik_target: np.ndarray
    ik_loop: np.ndarray
    ik_limit: np.ndarray  # (K,) float64
    ik_link_start: np.ndarray
    ik_link_bone: np.ndarray
    ik_link_mode: np.ndarray  # (L,) int32: 0 free, 1 euler limits, 2 X-only, 3 Y-only, 4 Z-only
    ik_link_lower: np.ndarray  # (L, 3) float64
    ik_link_upper: np.ndarray
    ik_path_start: np.ndarray  # (K+1,) int32: bones from top link down to target, top first
    ik_path_bone: np.ndarray
    ik_after_start: np.ndarray  # (K+1,) int32: descendants of the top link (eval order)
    ik_after_bone: np.ndarray
    group_start: np.ndarray  # flattened group/flip morphs
    group_target: np.ndarray
    group_weight: np.ndarray
    morph_is_leaf: np.ndarray  # (N,) bool: not a group/flip


def build_rig(model) -> Rig:
    B = model.num_bones
    parent = np.asarray(model.bone_parent, np.int32)
    layer = np.asarray(model.bone_layer, np.int64)
    order = evaluation_order(parent, layer)
    flags = np.asarray(model.bone_flags, np.int32)
    after = (flags & M.BONE_AFTER_PHYSICS) != 0
    pass1 = order[~after[order]]
    pass2 = order[after[order]]
    fixed = np.asarray(model.bone_fixed_axis, np.float64).copy()
    n = np.linalg.norm(fixed, axis=1)
    use = ((flags & M.BONE_FIXED_AXIS) != 0) & (n > 1e-8)
    fixed[use] /= n[use, None]
    fixed[~use] = 0.0

    K = len(model.ik_bone)
    rank = np.empty(B, np.int64)
    rank[order] = np.arange(B)
    lower = np.asarray(model.ik_link_lower, np.float64)
    upper = np.asarray(model.ik_link_upper, np.float64)
    has = np.asarray(model.ik_link_has_limit, bool)
    mode = np.zeros(len(model.ik_link_bone), np.int32)
    for i in range(len(mode)):
        if not has[i]:
            continue
        span = np.abs(lower[i]) + np.abs(upper[i])
        nz = np.nonzero(span > 1e-6)[0]
        mode[i] = 2 + int(nz[0]) if len(nz) == 1 else 1
    path_rows, after_rows = [], []
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

    def csr(rows):
        start = np.zeros(len(rows) + 1, np.int32)
        start[1:] = np.cumsum([len(r) for r in rows])
        flat = np.array([x for r in rows for x in r], np.int32)
        return start, flat

    ps, pb = csr(path_rows)
    as_, ab = csr(after_rows)
    gs, gt, gw = _flatten_groups(model)
    kinds = np.asarray(model.morph_kind)
    return Rig(
        order=order, pass1=pass1.astype(np.int32), pass2=pass2.astype(np.int32), parent=parent,
        position=np.asarray(model.bone_position, np.float64), flags=flags,
        append_parent=np.asarray(model.bone_append_parent, np.int32),
        append_ratio=np.asarray(model.bone_append_ratio, np.float64), fixed_axis=fixed,
        bone_ik=np.asarray(model.bone_ik, np.int32),
        ik_target=np.asarray(model.ik_target, np.int32),
        # a corrupt count must not hang posing: at most IK_MAX_LOOPS (babylon-mmd caps at 256 too)
        ik_loop=np.clip(np.asarray(model.ik_loop_count, np.int64), 0, IK_MAX_LOOPS).astype(np.int32),
        ik_limit=np.asarray(model.ik_limit_angle, np.float64),
        ik_link_start=np.asarray(model.ik_link_start, np.int32),
        ik_link_bone=np.asarray(model.ik_link_bone, np.int32), ik_link_mode=mode,
        ik_link_lower=lower, ik_link_upper=upper,
        ik_path_start=ps, ik_path_bone=pb, ik_after_start=as_, ik_after_bone=ab,
        group_start=gs, group_target=gt, group_weight=gw,
        morph_is_leaf=~np.isin(kinds, (M.MORPH_GROUP, M.MORPH_FLIP)),
    )
