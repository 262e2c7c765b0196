"""glTF reader timing: warm bytes → GltfAsset of RobotExpressive.glb and Fox.glb (and CesiumMan).

In: the real assets (../shared/assets/gltf or $MMDKIT_ASSETS). Out: printed median and minimum
wall time (ms) and median CPU time of ``read_gltf`` with the file already in memory and the reader
warm (one read before timing), the time to sample every channel of every clip at 30 fps, and the
machine's load average.
Run: python3 benchmarks/bench_gltf.py [--repeat N]
Target: RobotExpressive.glb ≤ 50 ms, Fox.glb ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from mmdkit.formats.gltf import read_gltf, sample_channel

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def timed_ms(fn, repeat, clock=time.perf_counter):
    fn()  # warm
    times = []
    for _ in range(repeat):
        t = clock()
        fn()
        times.append((clock() - t) * 1000)
    return statistics.median(times), min(times)


def sample_all(asset):
    for clip in asset.animations:
        times = np.arange(0.0, clip.duration + 1e-9, 1 / 30)
        for ch in clip.channels:
            sample_channel(ch, times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    rows = [("RobotExpressive.glb", 50.0), ("Fox.glb", 50.0), ("CesiumMan.glb", None)]
    print(f"{'file':<22}{'size':>10}{'read med':>10}{'min':>8}{'cpu med':>10}{'sample clips':>14}  target")
    for name, target in rows:
        path = ASSETS / "gltf" / name
        data = path.read_bytes()
        med, mn = timed_ms(lambda: read_gltf(data, str(path)), a.repeat)
        cpu, _ = timed_ms(lambda: read_gltf(data, str(path)), a.repeat, time.process_time)
        asset = read_gltf(data, str(path))
        smed, _ = timed_ms(lambda: sample_all(asset), max(3, a.repeat // 3))
        ok = "" if target is None else f"≤ {target:g} ms {'OK' if med <= target else 'MISSED'}"
        print(f"{name:<22}{len(data):>10,}{med:>8.2f}ms{mn:>6.2f}ms{cpu:>8.2f}ms{smed:>12.2f}ms  {ok}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times grow with it; cpu less)")


if __name__ == "__main__":
    main()
