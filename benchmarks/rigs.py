"""Rigs nobody tuned for: a real model with many IK chains and append (付与) bones added, for benchmarks.

In: a Model (Gene.pmx by default), the numbers of chains and appends. Out: the Model with, added after
its own bones (so its vertices, bodies and morphs keep their bone indices): ``chains`` hair/skirt
chains of ``links`` bones, each with an IK bone that pulls the chain's tip towards a point off its
rest pose (a child of the upper body, so the goal moves against the chain every frame: the solver
iterates), every other chain with Euler limits on its links (a hinge or a cone, the way riggers
limit skirts) and a ``loop`` count of 40 or 15; and ``appends`` append bones copying a share of the
rotation (and some the translation) of an arm, leg or chain bone, some on top of other appends
(twist splits, leg D-bones, skirt followers). Written as PMX with ``mmdkit.save``, so saba reads it too.

Run: python3 benchmarks/rigs.py OUT.pmx [--model Gene.pmx] [--chains 17] [--appends 46]
(``compare_saba.py --pairs heavy`` builds the default one itself.)
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.model import model as M

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))
_BONE_ROW_FIELDS = ("bone_position", "bone_parent", "bone_layer", "bone_flags", "bone_tail_index", "bone_tail_offset",
                    "bone_append_parent", "bone_append_ratio", "bone_fixed_axis", "bone_local_axis_x",
                    "bone_local_axis_z", "bone_external_key", "bone_ik")


def _first(model, *names) -> int:
    for n in names:
        if n in model.bone_name:
            return model.bone_index(n)
    return 0


class _Bones:
    """New bone rows and IK solvers, appended to a Model's by ``apply``."""

    def __init__(self, model):
        self.m = model
        self.rows = {f: [] for f in _BONE_ROW_FIELDS}
        self.names: list[str] = []
        self.iks: list[tuple] = []  # (ik bone, target, loop, limit angle, [(bone, has_limit, lower, upper)])

    def position(self, b):
        B0 = self.m.num_bones
        return self.m.bone_position[b] if b < B0 else self.rows["bone_position"][b - B0]

    def add(self, name, position, parent, flags, append_parent=-1, ratio=0.0, layer=0):
        fl = M.BONE_ENABLED | M.BONE_ROTATABLE | M.BONE_VISIBLE | flags
        r = self.rows
        r["bone_position"].append(np.asarray(position, np.float32))
        r["bone_parent"].append(parent)
        r["bone_layer"].append(layer)
        r["bone_flags"].append(fl)
        r["bone_tail_index"].append(-1)
        r["bone_tail_offset"].append(np.zeros(3, np.float32))
        r["bone_append_parent"].append(append_parent)
        r["bone_append_ratio"].append(ratio)
        for f in ("bone_fixed_axis", "bone_local_axis_x", "bone_local_axis_z"):
            r[f].append(np.zeros(3, np.float32))
        r["bone_external_key"].append(0)
        r["bone_ik"].append(-1)
        self.names.append(name)
        return self.m.num_bones + len(self.names) - 1

    def apply(self):
        m, B0, K0 = self.m, self.m.num_bones, len(self.m.ik_bone)
        new = {f: np.concatenate([getattr(m, f), np.asarray(v, getattr(m, f).dtype).reshape(-1, *getattr(m, f).shape[1:])])
               for f, v in self.rows.items()}
        bone_ik = new["bone_ik"]
        link_bone, has_limit, lower, upper, start = [m.ik_link_bone], [m.ik_link_has_limit], [m.ik_link_lower], \
            [m.ik_link_upper], list(m.ik_link_start)
        for k, (ik_bone, _, _, _, links) in enumerate(self.iks):
            bone_ik[ik_bone] = K0 + k
            new["bone_flags"][ik_bone] |= M.BONE_IK | M.BONE_TRANSLATABLE
            link_bone.append(np.asarray([x[0] for x in links], np.int32))
            has_limit.append(np.asarray([x[1] for x in links], bool))
            lower.append(np.asarray([x[2] for x in links], np.float32).reshape(-1, 3))
            upper.append(np.asarray([x[3] for x in links], np.float32).reshape(-1, 3))
            start.append(start[-1] + len(links))

        def ik(i, dt):
            return np.asarray([x[i] for x in self.iks], dt)
        return m.replace(
            bone_name=tuple(m.bone_name) + tuple(self.names), bone_name_en=tuple(m.bone_name_en) + tuple(self.names),
            **new, ik_bone=np.concatenate([m.ik_bone, ik(0, np.int32)]),
            ik_target=np.concatenate([m.ik_target, ik(1, np.int32)]),
            ik_loop_count=np.concatenate([m.ik_loop_count, ik(2, np.int32)]),
            ik_limit_angle=np.concatenate([m.ik_limit_angle, ik(3, np.float32)]),
            ik_link_start=np.asarray(start, np.int32), ik_link_bone=np.concatenate(link_bone),
            ik_link_has_limit=np.concatenate(has_limit), ik_link_lower=np.concatenate(lower),
            ik_link_upper=np.concatenate(upper))


def heavy_rig(model, chains: int = 17, appends: int = 46, links: int = 4):
    """``model`` with ``chains`` IK chains (``links`` bones each) and ``appends`` append bones added
    (see the module docstring); the IK chains hang from the head and the lower body in turn."""
    nb = _Bones(model)
    head = _first(model, "頭", "首")
    lower = _first(model, "下半身")
    upper = _first(model, "上半身2", "上半身")
    chain_bones = []
    for c in range(chains):
        root = head if c % 2 == 0 else lower
        a = 2 * math.pi * c / max(chains, 1)
        base = nb.position(root) + np.array([1.2 * math.sin(a), -0.5, 1.2 * math.cos(a)], np.float32)
        prev, bones = root, []
        for i in range(links + 1):  # links bones + the tip (the target)
            p = base + np.array([0.15 * math.sin(a) * i, -1.1 * i, 0.15 * math.cos(a) * i], np.float32)
            prev = nb.add(f"chain{c}_{i}", p, prev, 0)
            bones.append(prev)
        chain_bones.append(bones)
        tip = nb.position(bones[-1])
        goal = tip + np.array([0.8 * math.cos(a), 0.9, -0.8 * math.sin(a)], np.float32)
        ik_bone = nb.add(f"chain{c}_IK", goal, upper, M.BONE_TRANSLATABLE, layer=1)
        limited = c % 2 == 1
        rows = []
        for i, b in enumerate(reversed(bones[:-1])):
            if limited and i % 2 == 0:  # a hinge on X
                rows.append((b, True, (-1.5, 0.0, 0.0), (0.5, 0.0, 0.0)))
            elif limited:
                rows.append((b, True, (-0.7, -0.3, -0.7), (0.7, 0.3, 0.7)))
            else:
                rows.append((b, False, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
        nb.iks.append((ik_bone, bones[-1], 40 if c % 3 else 15, 0.5 if limited else 1.0, rows))
    sources = [_first(model, n) for n in ("左腕捩", "右腕捩", "左手捩", "右手捩", "左足", "右足", "左ひざ", "右ひざ",
                                           "左足首", "右足首", "左腕", "右腕")]
    sources += [b for bones in chain_bones for b in bones[:2]]
    made = []
    for i in range(appends):
        if i % 5 == 4 and made:  # an append of an append (MMD reads the source's own append)
            src = made[-1]
        else:
            src = sources[i % len(sources)]
        flags = M.BONE_APPEND_ROTATION | (M.BONE_APPEND_TRANSLATION if i % 7 == 3 else 0)
        parent = int(model.bone_parent[src]) if src < model.num_bones else src
        made.append(nb.add(f"append{i}", nb.position(src), max(parent, 0), flags, append_parent=src,
                           ratio=(0.25, 0.5, 0.75, 1.0, -0.5)[i % 5], layer=1 if i % 3 == 0 else 0))
    return nb.apply()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--model", default=str(ASSETS / "gene" / "Gene.pmx"))
    ap.add_argument("--chains", type=int, default=17)
    ap.add_argument("--appends", type=int, default=46)
    a = ap.parse_args()
    m = heavy_rig(mmdkit.load(a.model), a.chains, a.appends)
    mmdkit.save(m, a.out)
    print(f"{a.out}: {m.num_bones} bones, {len(m.ik_bone)} IK chains, {int((m.bone_append_parent >= 0).sum())} "
          "append bones")


if __name__ == "__main__":
    main()
