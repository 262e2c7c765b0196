"""A 3-minute dance onto a VRM, written as .vrma, end to end (the issue's "under 2 s, warm").

In: Gene.pmx + wavefile_v2.vmd (the dance played twice in a row, cut at 5,400 frames = 3 minutes at
30 fps) and the VRM targets from ../shared/assets (or $MMDKIT_ASSETS), files already loaded. Out:
per target the median seconds of N warm calls of ``retarget`` (contact pass on) and of
``export(target, motion, 'x.vrma')`` (the target posed by the frame loop, the VRM Animation written),
their sum, and the file's size; then the same through the CLI in a fresh process (imports, file
loading and the numba cache included), once.
Run: python3 benchmarks/bench_retarget_vrma.py [--repeat N] [--frames F]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_gltf import ASSETS

from mmdkit.export import export
from mmdkit.formats.io import load, save
from mmdkit.retarget import retarget

TARGETS = ["rigs/vrm1/debug_robot.vrm", "rigs/vrm1/VRMC_materials_mtoon_UV_Animation_Test.vrm",
           "rigs/vrm0/Godette_vrm_v4.vrm"]


def twice(motion):
    """``motion`` followed by itself (bone and morph keys shifted by its length)."""
    n = int(motion.last_frame) + 1
    cat = np.concatenate
    bone = {k: cat([getattr(motion, k), getattr(motion, k)]) for k in (
        "bone_key_track", "bone_key_translation", "bone_key_rotation", "bone_key_interpolation", "bone_key_physics")}
    morph = {k: cat([getattr(motion, k), getattr(motion, k)]) for k in ("morph_key_track", "morph_key_weight")}
    return dataclasses.replace(motion, **bone, **morph,
                               bone_key_frame=cat([motion.bone_key_frame, motion.bone_key_frame + n]),
                               morph_key_frame=cat([motion.morph_key_frame, motion.morph_key_frame + n]))


def _median(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frames", type=int, default=5400, help="frames of the dance (5,400 = 3 minutes)")
    args = ap.parse_args()
    gene = load(ASSETS / "gene" / "Gene.pmx")
    dance = twice(load(ASSETS / "wavefile" / "wavefile_v2.vmd"))
    frames = np.arange(args.frames)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "dance.vrma")
        print(f"wavefile_v2 twice, {args.frames} frames ({args.frames / 30:.0f} s at 30 fps), Gene -> VRM -> .vrma")
        for path in TARGETS:
            target = load(ASSETS / path)
            motion = retarget(gene, dance, target, frames=frames)
            r = _median(lambda: retarget(gene, dance, target, frames=frames), args.repeat)
            w = _median(lambda: export(target, motion, out, physics=False), args.repeat)
            print(f"  {path:<52} retarget {r:.3f} s + pose & write {w:.3f} s = {r + w:.3f} s warm; "
                  f"{os.path.getsize(out) / 2**20:.1f} MiB")
        vmd = os.path.join(tmp, "dance3.vmd")
        save(dance, vmd)
        cmd = [sys.executable, "-m", "mmdkit", "retarget", vmd, "--source", str(ASSETS / "gene" / "Gene.pmx"),
               "--target", str(ASSETS / TARGETS[0]), "--frames", f"0:{args.frames - 1}", "-q", "-o", out]
        t = time.perf_counter()
        subprocess.run(cmd, check=True)
        print(f"  CLI, fresh process (imports, loading, numba cache): {time.perf_counter() - t:.2f} s  "
              f"({' '.join(os.path.basename(c) for c in cmd[1:])})")


if __name__ == "__main__":
    main()
