"""Lane groups: which IK solvers of a rig ``ik_lanes.solve_lanes`` solves together, one SIMD lane each.

In: the rig's IK tables (``rig._ik_tables``: links, paths, loop counts), each solver's IK bone,
the bones' parent / append parent / owning solver, the evaluation passes. Out: the ``ik_group*``
arrays of ``Rig`` (groups as CSR rows of solvers, their IK bones, chain rows and link rows).
Also ``csr_rows``, the rows-of-ints → CSR helper the rig's tables use.
"""

from __future__ import annotations

import numpy as np


def csr_rows(rows) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ints → CSR start (R+1,) int32 and flat (sum,) int32."""
    start = np.zeros(len(rows) + 1, np.int32)
    start[1:] = np.cumsum([len(r) for r in rows])
    flat = np.array([x for r in rows for x in r], np.int32)
    return start, flat


IK_LANES = 8  # most solvers in a lane group (ik_lanes.LANES)
IK_LANE_ROWS = 31  # longest path a lane group takes (ik_lanes.MAX_ROWS, the stack buffer's rows)
IK_MIN_LANES = 3  # fewer structurally equal solvers are solved one by one
IK_FIXED = 5  # ik_link_mode of a fixed link (ik._FIXED): such solvers are solved alone


def _lane_shape(ik: dict, k: int, ik_bone: int) -> tuple | None:
    """Solver k's shape for a lane group — (loop count, (row from the target up, mode) per link) — or
    None when it does not fit ``ik_lanes``: no fixed link, every link listed once and on the path;
    the path a chain (each bone's parent the row before it, or outside the path for the first
    row and any other), no root in it, the target its last row, at most IK_LANE_ROWS rows."""
    l0, l1 = int(ik["ik_link_start"][k]), int(ik["ik_link_start"][k + 1])
    p0, p1 = int(ik["ik_path_start"][k]), int(ik["ik_path_start"][k + 1])
    n = p1 - p0
    links = ik["ik_link_bone"][l0:l1]
    if l1 == l0 or ik["ik_loop"][k] < 1 or n > IK_LANE_ROWS or ik_bone in ik["ik_path_bone"][p0:p1]:
        return None
    if (ik["ik_link_mode"][l0:l1] == IK_FIXED).any() or len(set(links.tolist())) != len(links):
        return None
    if ik["ik_target_row"][k] != p1 - 1:
        return None
    pp = ik["ik_path_parent"][p0:p1]
    if any(not (pp[r] == -1 or (r > 0 and pp[r] == r - 1)) for r in range(n)):
        return None
    rows = []
    for j in range(l0, l1):
        r = int(ik["ik_link_path"][j]) - p0
        if ik["ik_path_bone"][p0 + r] != links[j - l0]:
            return None
        rows.append((n - 1 - r, int(ik["ik_link_mode"][j])))
    return int(ik["ik_loop"][k]), tuple(rows)


def _conflicts(reads: set, writes: set, events) -> bool:
    """True when a solver reading ``reads`` and writing ``writes`` does not commute with the
    evaluation ``events`` ((reads, writes) per position): moving it past them would change a result."""
    r = set().union(*(e[0] for e in events))
    w = set().union(*(e[1] for e in events))
    return bool(writes & (r | w) or reads & w)


def ik_lane_groups(ik: dict, ik_bone, parent, append_parent, bone_ik, passes) -> dict:
    """Lane groups: solvers of one pass that ``ik_lanes.solve_lanes`` solves together.

    In: the IK tables (``_ik_tables``), ik_bone (K,) each solver's IK bone, parent / append_parent
    / bone_ik (B,), the passes (bone index arrays, evaluation order). Out: the ik_group* arrays
    (see ``Rig``). Where two members have a link j, it sits the same number of rows above the
    target and has the same mode (free, Euler limits, a hinge on X/Y/Z; the limits' values may
    differ, as may the loop counts: each lane stops after its own). A member is solved
    when the group's last IK bone is evaluated instead of at its own: only where nothing
    evaluated in between (bones — their own state, parent, append source — and other solvers,
    members included) reads or writes what it writes (its links, path and the bones below its
    top link) or writes what it reads (its IK bone, path, the path's parents, and what
    re-evaluating the bones below reads), so the results are the same as solving at its own bone."""
    K = len(ik["ik_target"])
    group = np.full(K, -1, np.int32)
    reads, writes = [], []
    for k in range(K):
        p0, p1 = ik["ik_path_start"][k], ik["ik_path_start"][k + 1]
        a0, a1 = ik["ik_after_start"][k], ik["ik_after_start"][k + 1]
        path = set(ik["ik_path_bone"][p0:p1].tolist())
        after = set(ik["ik_after_bone"][a0:a1].tolist())
        links = set(ik["ik_link_bone"][ik["ik_link_start"][k]:ik["ik_link_start"][k + 1]].tolist())
        w = links | path | after
        r = w | {int(ik_bone[k])} | {int(parent[b]) for b in path | after} | {int(append_parent[b]) for b in after}
        reads.append(r - {-1})
        writes.append(w)
    members: list[list[int]] = []
    shape_of: dict[int, tuple] = {}  # solver → its _lane_shape
    for bones in passes:
        events = []  # per position: (reads, writes) of evaluating the bone there, its solver included
        for b in bones.tolist():
            r, w = {b, int(parent[b]), int(append_parent[b])} - {-1}, {b}
            if bone_ik[b] >= 0:
                r, w = r | reads[bone_ik[b]], w | writes[bone_ik[b]]
            events.append((r, w))
        runs: list[tuple[list, list]] = []  # open groups: (members as (solver, position), [widest shape])
        for i, b in enumerate(bones.tolist()):
            k = int(bone_ik[b])
            s = _lane_shape(ik, k, int(b)) if k >= 0 else None
            if s is None:
                continue
            shape_of[k] = s
            for current, shape in runs:  # the first open group it fits, else a new one
                if len(current) < IK_LANES and all(x == y for x, y in zip(s[1], shape[0][1])) and not any(
                        _conflicts(reads[a], writes[a], events[ia + 1:i + 1]) for a, ia in current):
                    current.append((k, i))
                    if len(s[1]) > len(shape[0][1]):
                        shape[0] = s
                    break
            else:
                runs.append(([(k, i)], [s]))
        members += [[a for a, _ in current] for current, _ in runs if len(current) >= IK_MIN_LANES]
    rows, link_rows, link_modes = [], [], []
    for g, m in enumerate(members):
        group[m] = g
        rows.append(max(int(ik["ik_path_start"][k + 1] - ik["ik_path_start"][k]) for k in m))
        links = max((shape_of[k][1] for k in m), key=len)
        link_rows.append([r for r, _ in links])
        link_modes.append([mode for _, mode in links])
    gs, gm = csr_rows(members)
    ls, lr = csr_rows(link_rows)
    return dict(ik_group=group, ik_group_start=gs, ik_group_solver=gm,
                ik_group_bone=np.asarray(ik_bone, np.int32)[gm], ik_group_rows=np.asarray(rows, np.int32),
                ik_group_link_start=ls, ik_group_link_row=lr, ik_group_link_mode=csr_rows(link_modes)[1])
