"""Physics stability sweep: every asset model with rigid bodies dances wavefile_v2 with Bullet on.

Run: python3 benchmarks/physics_sweep.py [--frames N (default: the whole dance)]
         [--joint-solver mmd|bullet] [--joint-stop-erp E] [--solver-iterations N]
         [--fixed-step S] [--max-substeps N] [--models SUBSTRING]
Prints a table, one row per model: finite, blow-up resets, the worst stretch of the visible joints
(``MMDPhysics.visible_joint_mask``: bodies on bones the mesh joins; stretch = distance / (bind
distance + translation-limit span + 2 units), ≤ 1 holds) with the frame and joint where it
happened, the worst stretch of the other joints between skinned bones (cross-links, pins), how many
IK solvers physics switched off, and ms per frame (posing + physics). Exit status 1 when a model is
non-finite or a visible joint stretches > 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.physics import physics_for
from mmdkit.runtime import Character

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def sweep_model(model, motion, frames: int, **physics_kw) -> dict:
    """One model through frames 0..frames-1 → dict(finite, resets, stretch, frame, joint, other,
    ik_off, ms)."""
    phys = physics_for(model, **physics_kw)
    ch = Character(model, motion, world=phys)
    visible = phys.visible_joint_mask(model)
    other = phys.skinned_joint_mask(model) & ~visible
    worst, at, joint, seconds, finite, worst_other = 0.0, -1, "", 0.0, True, 0.0
    for f in range(frames):
        t0 = time.perf_counter()
        ch.update(f)
        seconds += time.perf_counter() - t0
        finite = finite and bool(np.isfinite(ch.bone_world).all())
        if visible.any():
            now, reach = phys.joint_reach()
            ratio = np.where(visible, now / reach, 0.0)
            j = int(np.argmax(ratio))
            if ratio[j] > worst:
                worst, at, joint = float(ratio[j]), f, model.joint_name[phys.joint_index[j]]
            if other.any():
                worst_other = max(worst_other, float((now / reach)[other].max()))
    return dict(finite=finite, resets=phys.blowup_resets, stretch=worst, frame=at, joint=joint,
                other=worst_other, ik_off=int(ch.state.ik_disabled.sum()), ms=seconds / max(frames, 1) * 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=None, help="frames from 0 (default: the whole dance)")
    ap.add_argument("--joint-solver", default="mmd", help="MMDPhysics(joint_solver=...): mmd or bullet")
    ap.add_argument("--joint-stop-erp", type=float, default=0.0)
    ap.add_argument("--solver-iterations", type=int, default=10)
    ap.add_argument("--fixed-step", type=float, default=None, help="seconds per Bullet step")
    ap.add_argument("--max-substeps", type=int, default=None)
    ap.add_argument("--models", default="", help="only models whose path contains this")
    a = ap.parse_args()
    kw = {"joint_solver": a.joint_solver, "joint_stop_erp": a.joint_stop_erp,
          "solver_iterations": a.solver_iterations}
    if a.fixed_step:
        kw["fixed_step"] = a.fixed_step
    if a.max_substeps:
        kw["max_substeps"] = a.max_substeps
    motion = mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    frames = a.frames if a.frames is not None else int(motion.bone_key_frame.max()) + 1
    paths = sorted(set(ASSETS.glob("**/*.pmd")) | set(ASSETS.glob("**/*.pmx")))
    print(f"wavefile_v2, frames 0..{frames - 1}, {kw}")
    print(f"{'model':<44} {'finite':>6} {'resets':>6} {'stretch':>7} {'frame':>5}  {'joint':<14} {'other':>6} "
          f"{'IK off':>6} {'ms/frame':>8}")
    bad = False
    for path in paths:
        if a.models not in str(path):
            continue
        model = mmdkit.load(path)
        if not len(model.rigid_body_name):
            continue
        r = sweep_model(model, motion, frames, **kw)
        bad |= (not r["finite"]) or r["stretch"] > 1.0
        print(f"{str(path.relative_to(ASSETS)):<44} {str(r['finite']):>6} {r['resets']:>6} {r['stretch']:>7.2f} "
              f"{r['frame']:>5}  {r['joint'].strip():<14} {r['other']:>6.2f} {r['ik_off']:>6} {r['ms']:>8.2f}",
              flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
