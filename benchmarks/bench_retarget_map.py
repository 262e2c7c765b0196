"""How long ``humanoid_map`` takes per model (the file already loaded), warm.

In: the real rigs (../shared/assets or $MMDKIT_ASSETS) and two 264-bone copies of Gene (its 224
bones plus a 40-bone chain under the head, with MMD names and with every name replaced by
bone_000…, the geometry-only worst case). Out: per model its bone count, the source of its map and the median /
largest ms of ``humanoid_map(model)`` over N calls. Target: <= 50 ms for a 250-bone model.
Run: python3 benchmarks/bench_retarget_map.py [--repeat N]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
from bench_gltf import ASSETS

from mmdkit.formats.io import load
from mmdkit.retarget import humanoid_map

RIGS = ["gene/Gene.pmx", "mei/Model/mei/mei.pmd", "mokou/mokou_A.pmd", "mokou/mokou_B.pmd",
        "rigs/humanoid/mannequiny-0.3.0.glb", "gltf/RobotExpressive.glb", "gltf/CesiumMan.glb",
        "assimp/models/BVH/01_01.bvh", "rigs/vrm0/Godette_vrm_v4.vrm", "rigs/vrm1/debug_robot.vrm"]


def gene_264(gene, renamed: bool):
    """Gene (mesh, IK, append bones kept) with a 40-bone chain added under 頭: 264 bones; ``renamed``:
    every bone called bone_000…"""
    head = gene.bone_name.index("頭")
    n, extra = gene.num_bones, 40
    fields = {}
    for f in dataclasses.fields(gene):
        v = getattr(gene, f.name)
        if f.name.startswith("bone_") and isinstance(v, np.ndarray) and len(v) == n:
            fields[f.name] = np.concatenate([v, np.repeat(v[head:head + 1], extra, axis=0)])
    fields["bone_parent"][n:] = np.r_[head, np.arange(n, n + extra - 1)]
    fields["bone_position"][n:] = gene.bone_position[head] + np.outer(np.arange(1, extra + 1), (0.01, -0.2, 0.1))
    fields["bone_tail_index"][n:] = -1
    fields["bone_ik"][n:] = -1
    names = tuple(gene.bone_name) + tuple(f"hair_{k:02d}" for k in range(extra))
    if renamed:
        names = tuple(f"bone_{b:03d}" for b in range(n + extra))
    return gene.replace(bone_name=names, bone_name_en=names, **fields)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    gene = load(ASSETS / "gene/Gene.pmx")
    models = [(rel, load(ASSETS / rel)) for rel in RIGS]
    models += [("Gene + 40 bones, MMD names", gene_264(gene, False)),
               ("Gene + 40 bones, bone_000 names", gene_264(gene, True))]
    print(f"{'model':<42} {'bones':>5} {'mapped':>6}  {'sources':<28} {'median ms':>9} {'max ms':>7}")
    for rel, model in models:
        hmap = humanoid_map(model)  # warm
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            humanoid_map(model)
            times.append((time.perf_counter() - t) * 1000)
        sources = ",".join(sorted({s.split(":")[-1] for s in hmap.humanoid_source if s}))
        print(f"{rel:<42} {model.num_bones:>5} {len(hmap.as_dict()):>6}  {sources:<28} "
              f"{statistics.median(times):>9.2f} {max(times):>7.2f}")


if __name__ == "__main__":
    main()
