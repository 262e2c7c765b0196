"""Export benchmark: Gene + the whole wavefile_v2 (2,809 frames) baked and written as npz, BVH, VMD.

Run: python3 benchmarks/bench_export.py [--frames N] [--no-physics] [--reduce 0.001,0.002,0.005]
Prints seconds for the bake (the full pipeline, physics included) and for each writer, and the
baked VMD's key count against one key per bone per frame for each --reduce tolerance.
Targets (issue 15): npz with --joints humanoid <= 3 s; a reduced VMD >= 10x smaller.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.export import bake, export
from mmdkit.export import bvh, npz, vmd

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def _timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=0, help="frames to export (0 = the whole motion)")
    ap.add_argument("--no-physics", action="store_true")
    ap.add_argument("--reduce", default="0.001,0.002,0.005,0.01", help="comma-separated VMD tolerances")
    a = ap.parse_args()
    physics = not a.no_physics
    model = mmdkit.load(ASSETS / "gene" / "Gene.pmx")
    motion = mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    frames = np.arange(float(a.frames or motion.last_frame + 1))
    out = Path(tempfile.mkdtemp(prefix="bench_export_"))
    warm = bake(model, motion, frames[:4], physics=physics)  # compile kernels, build the world once
    npz.write(warm, out / "warm.npz", joints="humanoid")
    vmd.write(warm, out / "warm.vmd", motion=motion, reduce=0.01, warn=lambda s: None)
    bvh.write(warm, out / "warm.bvh", joints="humanoid")
    info, t_npz = _timed(export, model, motion, out / "d.npz", frames=frames, physics=physics, joints="humanoid")
    print(f"npz --joints humanoid, end to end (bake + write): {t_npz:.2f} s for {len(frames)} frames "
          f"(physics {'on' if physics else 'off'}); target <= 3 s")
    baked, t_bake = _timed(bake, model, motion, frames, physics=physics)
    print(f"bake alone: {t_bake:.2f} s = {t_bake / len(frames) * 1e3:.3f} ms/frame ({int(baked.bone_driven.sum())} "
          "bones driven by physics)")
    _, t = _timed(npz.write, baked, out / "d2.npz", joints="humanoid")
    print(f"npz write (humanoid): {t:.3f} s; all bones: {_timed(npz.write, baked, out / 'd3.npz')[1]:.3f} s")
    _, t = _timed(bvh.write, baked, out / "d.bvh")
    print(f"bvh write (all bones): {t:.3f} s, {os.path.getsize(out / 'd.bvh') / 2**20:.1f} MiB")
    for tol in [None] + [float(x) for x in a.reduce.split(",") if x]:
        info, t = _timed(vmd.write, baked, out / "d.vmd", motion=motion, reduce=tol, warn=lambda s: None)
        print(f"vmd --reduce {tol}: {info['bone_keys']:,} bone keys vs {info['full_keys']:,} one per bone per "
              f"frame ({info['full_keys'] / max(info['bone_keys'], 1):.1f}x fewer), {t:.2f} s")


if __name__ == "__main__":
    main()
