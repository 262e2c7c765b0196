"""Importer timing: glTF file → MMD Model (warm), clip baking, and posing + CPU skinning cost of an
imported character per bone and per vertex beside an MMD model (Gene.pmx with a VMD).

In: the real assets (../shared/assets or $MMDKIT_ASSETS). Out: printed medians (wall and CPU ms),
µs per bone of ``Character.update`` and µs per vertex of ``Character.skin`` (physics off), and
the load average. Run: python3 benchmarks/bench_import.py [--repeat N]
Targets: RobotExpressive.glb and Fox.glb → Model ≤ 50 ms warm; per-bone and per-vertex costs of an
imported character like those of an MMD model.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from bench_gltf import ASSETS, timed_ms  # the same assets folder and warm median/min timer

import mmdkit
from mmdkit.importers import load_gltf_scene
from mmdkit.runtime import Character


def pose_costs(model, motion, repeat):
    """(µs per bone of update, µs per vertex of skin) over the motion's frames, physics off."""
    ch = Character(model, motion)
    pos = np.zeros((model.num_vertices, 3), np.float32)
    nrm = np.zeros_like(pos)
    frames = np.arange(max(motion.last_frame, 1) + 1, dtype=np.float64)
    ch.update(0)
    ch.skin(pos, nrm)  # compile / warm

    def update():
        for f in frames:
            ch.update(f)

    def skin():
        for _ in frames:
            ch.skin(pos, nrm)

    up, _ = timed_ms(update, repeat)
    sk, _ = timed_ms(skin, repeat)
    n = len(frames)
    return up * 1000 / n / model.num_bones, sk * 1000 / n / model.num_vertices, up / n, sk / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    print(f"{'file':<22}{'bones':>6}{'verts':>7}{'load med':>10}{'min':>8}{'cpu med':>9}{'bake clips':>12}  target")
    for name, target in (("RobotExpressive.glb", 50.0), ("Fox.glb", 50.0), ("CesiumMan.glb", None)):
        path = ASSETS / "gltf" / name
        med, mn = timed_ms(lambda: mmdkit.load(path), a.repeat)
        cpu, _ = timed_ms(lambda: mmdkit.load(path), a.repeat, time.process_time)
        model = mmdkit.load(path)

        def bake():
            clips = load_gltf_scene(path)[1]
            for c in clips:
                clips[c]
        bake_ms, _ = timed_ms(bake, max(3, a.repeat // 4))
        ok = "" if target is None else f"≤ {target:g} ms {'OK' if med <= target else 'MISSED'}"
        print(f"{name:<22}{model.num_bones:>6}{model.num_vertices:>7}{med:>8.1f}ms{mn:>6.1f}ms{cpu:>7.1f}ms"
              f"{bake_ms:>10.1f}ms  {ok}")
    print("\nposing + CPU skinning (physics off), per frame over a whole clip / motion")
    print(f"{'model':<34}{'bones':>6}{'verts':>7}{'update':>9}{'µs/bone':>9}{'skin':>9}{'µs/vert':>9}")
    rows = []
    for name, clip in (("RobotExpressive.glb", "Dance"), ("Fox.glb", "Survey"), ("CesiumMan.glb", 0)):
        model, clips = load_gltf_scene(ASSETS / "gltf" / name)
        rows.append((f"{name} {clips.get_clip(clip)[0]}", model, clips.get_clip(clip)[1]))
    gene = mmdkit.load(ASSETS / "gene" / "Gene.pmx")
    rows.append(("Gene.pmx 01_happy.vmd (MMD)", gene, mmdkit.load(ASSETS / "gene" / "motion" / "01_happy.vmd")))
    for label, model, motion in rows:
        per_bone, per_vertex, up, sk = pose_costs(model, motion, max(3, a.repeat // 4))
        print(f"{label:<34}{model.num_bones:>6}{model.num_vertices:>7}{up:>7.3f}ms{per_bone:>9.3f}"
              f"{sk:>7.3f}ms{per_vertex:>9.4f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times grow with it; cpu less)")


if __name__ == "__main__":
    main()
