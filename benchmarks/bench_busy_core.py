"""Stage timings with one core busy: what another process beside mmdkit costs.

In: the real assets (../shared/assets or $MMDKIT_ASSETS): Gene + wavefile_v2, no physics.
Out: a table, per numba threading configuration: the median ms/frame of each ``mmdkit bench`` stage
(sample, morph, bones, skinning, total) and the batch posing time (``mmdkit.runtime.pose``, 1,400
frames), idle and with a CPU hog (``python3 -c 'while 1: pass'``) beside it, and their ratio.
Each cell is the range (min–max) over --repeat runs; idle and hog runs alternate, so both see the
same machine. The hog is pinned to the last core (--unpinned: the scheduler places it) and killed
when the run ends, also on Ctrl-C or an error. Each child run is bounded (--timeout).

Run: python3 benchmarks/bench_busy_core.py [--frames 300] [--repeat 3] [--configs mmdkit,spin,one]
Configurations (environment of the child process):
  mmdkit   as mmdkit sets itself up (mmdkit/threads.py: OpenMP threads sleep while they wait)
  spin     libgomp's default before: idle threads spin ~300,000 turns (GOMP_SPINCOUNT=300000)
  spin10k  a short spin before sleeping (GOMP_SPINCOUNT=10000)
  active   OMP_WAIT_POLICY=active: idle threads spin for minutes
  one      NUMBA_NUM_THREADS=1: no worker threads at all
  workqueue NUMBA_THREADING_LAYER=workqueue (numba's own pool; not safe for launches from several threads)
Target (issue 23): a busy core costs at most ~2x per stage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))
CONFIGS = {
    "mmdkit": {},
    "spin": {"GOMP_SPINCOUNT": "300000"},
    "spin10k": {"GOMP_SPINCOUNT": "10000"},
    "active": {"OMP_WAIT_POLICY": "active"},
    "one": {"NUMBA_NUM_THREADS": "1"},
    "workqueue": {"NUMBA_THREADING_LAYER": "workqueue"},
}
STAGES = ("sample", "morph", "bones_before_physics", "skinning", "total")
BATCH = """
import json, sys, time
import numpy as np
import mmdkit
from mmdkit.runtime import pose
model, motion = mmdkit.load(sys.argv[1]), mmdkit.load(sys.argv[2])
frames = np.arange(0, 2800, 2.0)
pose(model, motion, frames[:64])
ts = []
for _ in range(5):
    t = time.perf_counter()
    pose(model, motion, frames)
    ts.append(time.perf_counter() - t)
print(json.dumps({"batch_ms": float(np.median(ts) * 1e3)}))
"""


def child_env(config: str) -> dict:
    """This process's environment without any threading settings, plus the configuration's."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER",
                        "OMP_NUM_THREADS")}
    env.update(CONFIGS[config])
    return env


def measure(config: str, frames: int, timeout: float) -> dict:
    """{stage: ms/frame} of one ``mmdkit bench`` run and the batch posing ms of one child."""
    model, motion = ASSETS / "gene" / "Gene.pmx", ASSETS / "wavefile" / "wavefile_v2.vmd"
    env = child_env(config)
    bench = subprocess.run([sys.executable, "-m", "mmdkit", "bench", str(model), str(motion), "--frames",
                            f"300+{frames}", "--no-physics", "--json", "-q"],
                           capture_output=True, text=True, timeout=timeout, env=env, check=True)
    batch = subprocess.run([sys.executable, "-c", BATCH, str(model), str(motion)], capture_output=True, text=True,
                           timeout=timeout, env=env, check=True)
    return {**json.loads(bench.stdout), **json.loads(batch.stdout)}


def start_hog(pinned: bool) -> subprocess.Popen:
    hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    if pinned:
        os.sched_setaffinity(hog.pid, {max(os.sched_getaffinity(0))})
    time.sleep(0.2)
    return hog


def stop(hog: subprocess.Popen | None) -> None:
    if hog is not None and hog.poll() is None:
        hog.kill()
        hog.wait()


def cell(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.3f}" if hi - lo < 0.0005 else f"{lo:.3f}–{hi:.3f}"


def table(results: dict) -> None:
    cols = (*STAGES, "batch_ms")
    print(f"{'config':10s} {'stage':22s} {'idle ms':>15s} {'hog ms':>15s} {'hog/idle':>11s}")
    for config, runs in results.items():
        for s in cols:
            idle, hog = [r[s] for r in runs["idle"]], [r[s] for r in runs["hog"]]
            ratio = [h / i for h, i in zip(hog, idle) if i > 0]
            ratio_text = "-" if not ratio else (f"{min(ratio):.1f}x" if round(min(ratio), 1) == round(max(ratio), 1)
                                                else f"{min(ratio):.1f}–{max(ratio):.1f}x")
            name = "batch 1400 fr" if s == "batch_ms" else s
            print(f"{config:10s} {name:22s} {cell(idle):>15s} {cell(hog):>15s} {ratio_text:>11s}")
        threads = {r["numba_threads"] for r in runs["idle"]}
        print(f"{config:10s} {'(numba threads)':22s} {','.join(map(str, sorted(threads))):>15s}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=300, help="frames per bench run")
    ap.add_argument("--repeat", type=int, default=3, help="idle/hog pairs per configuration")
    ap.add_argument("--configs", default="mmdkit,spin,one", help=f"comma-separated, of {','.join(CONFIGS)}")
    ap.add_argument("--unpinned", action="store_true", help="let the scheduler place the hog")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per child run")
    a = ap.parse_args()
    configs = [c for c in a.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        ap.error(f"--configs: unknown {', '.join(unknown)} (choose from {', '.join(CONFIGS)})")
    print(f"{os.cpu_count()} cores; hog {'unpinned' if a.unpinned else 'pinned to the last core'}; "
          f"{a.frames} frames per bench run; {a.repeat} idle/hog pairs per configuration; "
          f"load average before {os.getloadavg()[0]:.1f} (other processes make 'idle' busy too)")
    for config in configs:
        measure(config, 10, a.timeout)  # compile or load the kernels' cache outside the timings
    results = {c: {"idle": [], "hog": []} for c in configs}
    hog = None
    try:
        for _ in range(a.repeat):
            for config in configs:
                results[config]["idle"].append(measure(config, a.frames, a.timeout))
                hog = start_hog(not a.unpinned)
                results[config]["hog"].append(measure(config, a.frames, a.timeout))
                stop(hog)
                hog = None
    finally:
        stop(hog)
    table(results)
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
