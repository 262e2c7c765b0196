"""Importer timing: glTF file → MMD Model (warm), clip baking, and posing + CPU skinning cost of an
imported character per bone and per vertex beside the same character written as PMX + VMD and an
MMD model (Gene.pmx with a VMD).

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
from mmdkit.formats.io import parse, serialize
from mmdkit.importers import load_gltf_scene
from mmdkit.runtime import Character
from mmdkit.skinning.cpu import CpuSkinner


def pose_costs(model, motion, repeat):
    """Per frame over the motion's frames, physics off: (update ms, µs per bone, skin ms, µs per
    vertex, serial skin µs per vertex — one thread, as meshes under 16k vertices skin)."""
    ch = Character(model, motion)
    pos = np.zeros((model.num_vertices, 3), np.float32)
    nrm = np.zeros_like(pos)
    frames = np.arange(max(motion.last_frame, 1) + 1, dtype=np.float64)
    serial = CpuSkinner(model, parallel=False)
    ch.update(0)
    ch.skin(pos, nrm)  # compile / warm

    def update():
        for f in frames:
            ch.update(f)

    def skin():
        for _ in frames:
            ch.skin(pos, nrm)

    def skin_serial():
        for _ in frames:
            serial.skin(ch.bone_skin, ch.vertex_offset, pos, nrm)

    n = len(frames)
    up, sk, ser = (timed_ms(fn, repeat)[0] / n for fn in (update, skin, skin_serial))
    return up, up * 1000 / model.num_bones, sk, sk * 1000 / model.num_vertices, ser * 1000 / model.num_vertices


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
    print(f"{'model':<34}{'bones':>6}{'verts':>7}{'update':>9}{'µs/bone':>9}{'skin':>9}{'µs/vert':>9}"
          f"{'serial µs/vert':>16}")
    rows = []
    for name, clip in (("RobotExpressive.glb", "Dance"), ("Fox.glb", "Survey"), ("CesiumMan.glb", 0)):
        model, clips = load_gltf_scene(ASSETS / "gltf" / name)
        rows.append((f"{name} {clips.get_clip(clip)[0]}", model, clips.get_clip(clip)[1]))
    robot, clips = load_gltf_scene(ASSETS / "gltf" / "RobotExpressive.glb")  # the same data as MMD files
    rows.append(("RobotExpressive as .pmx + .vmd", parse(serialize(robot, ".pmx"), ".pmx"),
                 parse(serialize(clips["Dance"], ".vmd"), ".vmd")))
    gene = mmdkit.load(ASSETS / "gene" / "Gene.pmx")
    rows.append(("Gene.pmx 01_happy.vmd (MMD)", gene, mmdkit.load(ASSETS / "gene" / "motion" / "01_happy.vmd")))
    for label, model, motion in rows:
        up, per_bone, sk, per_vertex, serial = pose_costs(model, motion, max(3, a.repeat // 4))
        print(f"{label:<34}{model.num_bones:>6}{model.num_vertices:>7}{up:>7.3f}ms{per_bone:>9.3f}"
              f"{sk:>7.3f}ms{per_vertex:>9.4f}{serial:>16.4f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times grow with it; cpu less)")


if __name__ == "__main__":
    main()
