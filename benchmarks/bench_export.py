"""Export benchmark: Gene + the whole wavefile_v2 (2,809 frames) baked and written as npz, BVH, VMD.

Run: python3 benchmarks/bench_export.py [--frames N] [--no-physics] [--reduce 0.001,0.002,0.005]
         [--reduce-physics 0.01,0.02,0.05,0.1,0.2] [--only-vmd]
Prints seconds for the bake (the full pipeline, physics included) and for each writer, and the
baked VMD's key count against one key per bone per frame for each --reduce tolerance (and each
--reduce-physics TOL2 with it), with the worst re-posed error (read back, posed without physics)
on the physics region (driven bones and the bones below them) and on the other bones; with
physics, the driven bones' frame-to-frame jitter in units.
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
from mmdkit.mathutil import qslerp_scalar
from mmdkit.runtime import pose

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def _timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def _jitter(baked):
    """Per driven bone and interior frame, how far its VMD key is from its neighbours' midpoint in
    the reducer's units (translation + angle × reach: what a key dropped between two kept
    neighbours errs by), and per bone a driven bone moves (its children), how far its world head is
    from its neighbours' mean."""
    key_t, key_q = vmd.bake_keys(baked)
    reach = vmd.bone_reach(baked.model)
    driven = np.nonzero(baked.bone_driven)[0]
    moved = np.nonzero(np.isin(np.asarray(baked.model.bone_parent), driven))[0]
    key, head = [], []
    p = baked.bone_world_position
    for b in driven:
        for f in range(1, len(key_t) - 1):
            m = qslerp_scalar(*key_q[f - 1, b], *key_q[f + 1, b], 0.5)
            angle = 2.0 * np.arccos(min(1.0, abs(float(np.dot(m, key_q[f, b])))))
            d = np.linalg.norm(key_t[f, b] - 0.5 * (key_t[f - 1, b] + key_t[f + 1, b]))
            key.append(d + angle * reach[b])
    for b in moved:
        head.append(np.linalg.norm(p[1:-1, b] - 0.5 * (p[:-2, b] + p[2:, b]), axis=-1))
    return np.array(key), np.stack(head) if head else np.zeros((0, 0))


def _reduced(model, motion, baked, out, region, tol, tol2):
    """One reduced VMD: its summary, seconds, and the worst re-posed error (units) on the physics
    region and on the other bones."""
    info, t = _timed(vmd.write, baked, out / "d.vmd", motion=motion, reduce=tol, reduce_physics=tol2,
                     warn=lambda s: None)
    back = pose(model, mmdkit.load(out / "d.vmd"), baked.frames)
    err = np.linalg.norm(back["bone_world"][..., :3, 3] - baked.bone_world[..., :3, 3], axis=-1).max(axis=0)
    return info, t, float(err[region].max(initial=0.0)), float(err[~region].max(initial=0.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=0, help="frames to export (0 = the whole motion)")
    ap.add_argument("--no-physics", action="store_true")
    ap.add_argument("--reduce", default="0.001,0.002,0.005,0.01", help="comma-separated VMD tolerances")
    ap.add_argument("--reduce-physics", default="", help="comma-separated VMD tolerances of the physics region, "
                                                         "each run with every --reduce TOL")
    ap.add_argument("--only-vmd", action="store_true", help="skip the npz/BVH timings")
    a = ap.parse_args()
    physics = not a.no_physics
    model = mmdkit.load(ASSETS / "gene" / "Gene.pmx")
    motion = mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    frames = np.arange(float(a.frames or motion.last_frame + 1))
    out = Path(tempfile.mkdtemp(prefix="bench_export_"))
    warm = bake(model, motion, frames[:4], physics=physics)  # compile kernels, build the world once
    vmd.write(warm, out / "warm.vmd", motion=motion, reduce=0.01, warn=lambda s: None)
    if not a.only_vmd:
        _formats(model, motion, frames, physics, out, warm)
    baked, t_bake = _timed(bake, model, motion, frames, physics=physics)
    print(f"bake alone: {t_bake:.2f} s = {t_bake / len(frames) * 1e3:.3f} ms/frame ({int(baked.bone_driven.sum())} "
          "bones driven by physics)")
    if not a.only_vmd:
        _, t = _timed(npz.write, baked, out / "d2.npz", joints="humanoid")
        print(f"npz write (humanoid): {t:.3f} s; all bones: {_timed(npz.write, baked, out / 'd3.npz')[1]:.3f} s")
        _, t = _timed(bvh.write, baked, out / "d.bvh")
        print(f"bvh write (all bones): {t:.3f} s, {os.path.getsize(out / 'd.bvh') / 2**20:.1f} MiB")
    region = vmd.physics_region(model, baked.bone_driven)
    if baked.bone_driven.any():
        key, head = _jitter(baked)
        print(f"jitter of the {int(baked.bone_driven.sum())} driven bones, key vs its neighbours' midpoint "
              f"(translation + angle x reach): median {np.median(key):.4f}, p90 {np.percentile(key, 90):.4f}, "
              f"max {key.max():.3f} units; heads of the {len(head)} bones they move vs neighbours' mean: "
              f"median {np.median(head):.4f}, "
              f"p90 {np.percentile(head, 90):.4f} units ({int(region.sum())} bones in the physics region)")
    tol2s = [None] + [float(x) for x in a.reduce_physics.split(",") if x]
    for tol in [None] + [float(x) for x in a.reduce.split(",") if x]:
        for tol2 in tol2s if tol is not None else [None]:
            info, t, e_phys, e_rest = _reduced(model, motion, baked, out, region, tol, tol2)
            print(f"vmd --reduce {tol}" + (f" --reduce-physics {tol2}" if tol2 is not None else "") +
                  f": {info['bone_keys']:,} bone keys vs {info['full_keys']:,} one per bone per frame "
                  f"({info['full_keys'] / max(info['bone_keys'], 1):.1f}x fewer), {t:.2f} s; worst re-posed "
                  f"error: physics region {e_phys:.2g}, other bones {e_rest:.2g}")


def _formats(model, motion, frames, physics, out, warm):
    npz.write(warm, out / "warm.npz", joints="humanoid")
    bvh.write(warm, out / "warm.bvh", joints="humanoid")
    info, t_npz = _timed(export, model, motion, out / "d.npz", frames=frames, physics=physics, joints="humanoid")
    print(f"npz --joints humanoid, end to end (bake + write): {t_npz:.2f} s for {len(frames)} frames "
          f"(physics {'on' if physics else 'off'}); target <= 3 s")

if __name__ == "__main__":
    main()
