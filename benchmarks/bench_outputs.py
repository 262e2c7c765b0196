"""One pass with three outputs vs the three single-output commands (issue #24).

Usage: python3 benchmarks/bench_outputs.py [--frames 0:299] [--repeats 2] [--model PATH] [--motion PATH]
Times, as a user runs them (each a fresh ``python3 -m mmdkit`` process, kernels already compiled):
  one pass:  mmdkit render M V --frames F -o a.mp4 -o a.glb -o a.npz
  three:     mmdkit render M V -o a.mp4; mmdkit export M V -o a.glb; mmdkit export M V -o a.npz
interleaved, ``repeats`` times; prints the medians in seconds and checks the glb/npz of the one pass
equal the single commands' (glb bytes, npz arrays).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ASSETS = Path(__file__).resolve().parents[2] / "shared" / "assets"


def mmdkit(*args) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mmdkit", *map(str, args), "-q"], check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", default="0:299")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--size", default="640x360")
    ap.add_argument("--model", default=str(ASSETS / "gene" / "Gene.pmx"))
    ap.add_argument("--motion", default=str(ASSETS / "wavefile" / "wavefile_v2.vmd"))
    a = ap.parse_args()
    common = [a.model, a.motion, "--frames", a.frames]
    with tempfile.TemporaryDirectory() as tmp:
        one, three = Path(tmp, "one"), Path(tmp, "three")
        one.mkdir(), three.mkdir()
        mmdkit("render", *common[:2], "--frames", "0+2", "--size", "64x64", "-o", one / "warm.mp4", "-o",
               one / "warm.glb", "-o", one / "warm.npz")  # compile once
        times = {"one pass (mp4 + glb + npz)": [], "three commands": []}
        for _ in range(a.repeats):
            times["one pass (mp4 + glb + npz)"].append(mmdkit("render", *common, "--size", a.size, "-o", one / "a.mp4",
                                                              "-o", one / "a.glb", "-o", one / "a.npz"))
            times["three commands"].append(mmdkit("render", *common, "--size", a.size, "-o", three / "a.mp4")
                                           + mmdkit("export", *common, "-o", three / "a.glb")
                                           + mmdkit("export", *common, "-o", three / "a.npz"))
        same_glb = (one / "a.glb").read_bytes() == (three / "a.glb").read_bytes()
        with np.load(one / "a.npz") as x, np.load(three / "a.npz") as y:
            same_npz = all(np.array_equal(x[k], y[k]) for k in x.files)
    print(f"{Path(a.model).name} + {Path(a.motion).name}, frames {a.frames}, {a.size}, physics on, "
          f"median of {a.repeats}:")
    for k, v in times.items():
        print(f"  {k:28s} {statistics.median(v):7.2f} s   (runs: {', '.join(f'{x:.2f}' for x in v)})")
    print(f"  glb bytes equal: {same_glb}; npz arrays equal: {same_npz}")


if __name__ == "__main__":
    main()
