"""Physics sweep: every asset model with rigid bodies dances wavefile_v2 with Bullet on.

Run: python3 benchmarks/physics_sweep.py [--frames 600] [--soft-joints]
Prints per model: finite, blow-up resets, the worst stretch of joints between bodies whose bones
carry vertices (distance / (bind distance + translation-limit span + 2 units); ≤ 1 holds), how
many IK solvers physics switched off, and ms per frame (posing + physics).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.physics import MMDPhysics
from mmdkit.runtime import Character

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--soft-joints", action="store_true", help="MMDPhysics(soft_joints=True)")
    a = ap.parse_args()
    motion = mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    paths = sorted(set(ASSETS.glob("**/*.pmd")) | set(ASSETS.glob("**/*.pmx")))
    for path in paths:
        model = mmdkit.load(path)
        if not len(model.rigid_body_name):
            continue
        phys = MMDPhysics(model, soft_joints=a.soft_joints)
        ch = Character(model, motion, physics=phys)
        visible = phys.skinned_joint_mask(model)
        worst, seconds = 0.0, 0.0
        for f in range(a.frames):
            t0 = time.perf_counter()
            ch.update(f)
            seconds += time.perf_counter() - t0
            if visible.any():
                now, reach = phys.joint_reach()
                worst = max(worst, float((now / reach)[visible].max()))
        print(f"{path.relative_to(ASSETS)}: finite {bool(np.isfinite(ch.bone_world).all())}, "
              f"blow-up resets {phys.blowup_resets}, worst visible joint stretch {worst:.2f}, "
              f"IK off under physics {int(ch._ik_off_physics.sum())}, {seconds / a.frames * 1e3:.2f} ms/frame")


if __name__ == "__main__":
    main()
