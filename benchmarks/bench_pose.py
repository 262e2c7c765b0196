"""Posing benchmark: Gene (or --model, or --heavy: Gene with 17 IK chains and 46 append bones added by
``rigs.heavy_rig``) + wavefile_v2, steady-state frame-by-frame and batch (no physics).

Run: taskset -c 1 python3 benchmarks/bench_pose.py [--frames 2000] [--threads N] [--model PATH | --heavy]
Prints the median ms/frame of Character.update (one core: numba kernels, nothing allocated)
and the frames/s of the batch API `mmdkit.runtime.pose` (fused kernel, frames split over cores),
with its CPU time per frame (what the frames/s would be on idle cores when the box is shared).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.runtime import Character, pose

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=0, help="numba threads for the batch (0 = all cores)")
    ap.add_argument("--model", default=str(ASSETS / "gene" / "Gene.pmx"))
    ap.add_argument("--heavy", action="store_true", help="the model with rigs.heavy_rig's chains and appends added")
    a = ap.parse_args()
    if a.threads:
        import numba

        numba.set_num_threads(a.threads)
    model = mmdkit.load(a.model)
    if a.heavy:
        from rigs import heavy_rig

        model = heavy_rig(model)
    motion = mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    ch = Character(model, motion)
    for f in range(5):
        ch.update(f)
    t = np.empty(a.frames)
    for i in range(a.frames):
        t0 = time.perf_counter()
        ch.update(5 + i % 2800)
        t[i] = time.perf_counter() - t0
    print(f"frame-by-frame: median {np.median(t) * 1e3:.4f} ms/frame, mean {t.mean() * 1e3:.4f} "
          f"({model.num_bones} bones, {len(model.ik_bone)} IK, {int((model.bone_append_parent >= 0).sum())} append, "
          f"{model.num_morphs} morphs)")
    frames = np.arange(0, 2800, 0.5)
    pose(model, motion, frames[:64])
    best, cpu = 0.0, np.inf
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        pose(model, motion, frames)
        best = max(best, len(frames) / (time.perf_counter() - t0))
        cpu = min(cpu, (time.process_time() - c0) / len(frames))
    import numba

    print(f"batch: {best:,.0f} frames/s ({len(frames)} frames, {numba.get_num_threads()} threads, best of 3); "
          f"CPU {cpu * 1e6:.1f} µs/frame summed over threads ({1 / cpu:,.0f} frames/s per busy core)")
    print("targets (issue #11): frame-by-frame <= 0.06 ms/frame on one core (saba 0.073); batch >= 30,000 frames/s")

if __name__ == "__main__":
    main()
