"""Posing benchmark: Gene + wavefile_v2, steady-state frame-by-frame and batch (no physics).

Run: python3 benchmarks/bench_pose.py [--frames 2000] [--threads N]
Prints the median ms/frame of Character.update (one core: numba kernels, nothing allocated)
and the frames/s of the batch API `mmdkit.runtime.pose` (fused kernel, frames split over cores).
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
    a = ap.parse_args()
    if a.threads:
        import numba

        numba.set_num_threads(a.threads)
    model = mmdkit.load(ASSETS / "gene" / "Gene.pmx")
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
          f"({model.num_bones} bones, {len(model.ik_bone)} IK, {model.num_morphs} morphs)")
    frames = np.arange(0, 2800, 0.5)
    pose(model, motion, frames[:64])
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        pose(model, motion, frames)
        best = max(best, len(frames) / (time.perf_counter() - t0))
    import numba

    print(f"batch: {best:,.0f} frames/s ({len(frames)} frames, {numba.get_num_threads()} threads, best of 3)")
    print("targets: frame-by-frame <= 0.10 ms/frame on one core (saba 0.22); batch >= 20,000 frames/s")


if __name__ == "__main__":
    main()
