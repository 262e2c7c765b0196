"""VRM spring-bone cost: ``SpringWorld.step(1/30)`` (two 1/60 s steps: one 30 fps frame) and a whole
``Character.update`` with and without the springs, on the rigs' VRM with spring bones.

In: the real assets (../shared/assets or $MMDKIT_ASSETS). Out: printed best-of-7 ms per frame and
the load average. Run: python3 benchmarks/bench_vrm_springs.py
"""

from __future__ import annotations

import os
import time

import numpy as np
from bench_gltf import ASSETS

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.physics import physics_for
from mmdkit.runtime import Character

FILES = ["rigs/vrm0/Godette_vrm_v4.vrm"]


def dance(model, frames: int = 240):
    """Head and hips swinging every 10 frames (the tests' dance, repeated)."""
    bones = model.source_extras["vrm_humanoid"]["bones"]
    mb = MotionBuilder(model_name=model.name)
    for f in range(0, frames + 1, 10):
        s = 1 if f // 10 % 2 else -1
        a, b = np.radians(35 * s) / 2, np.radians(40 * s) / 2
        mb.add_bone_key(model.bone_name[bones["head"]], f, rotation=(0, 0, np.sin(a), np.cos(a)))
        mb.add_bone_key(model.bone_name[bones["hips"]], f, translation=(2.0 * s, 0, 0),
                        rotation=(0, np.sin(b), 0, np.cos(b)))
    return mb.build()


def best_ms(fn, n: int, repeat: int = 7) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        for i in range(n):
            fn(i)
        out.append((time.perf_counter() - t) / n * 1e3)
    return min(out)


def main() -> None:
    for rel in FILES:
        model = mmdkit.load(ASSETS / rel)
        motion = dance(model)
        world = physics_for(model)
        ch = Character(model, motion, world)
        ch.update(0)
        pose = ch.bone_world.copy()
        step = best_ms(lambda i: world.step(1 / 30, pose), 1000)
        per = {}
        for name, w in (("with springs", physics_for(model)), ("without", None)):
            c = Character(model, motion, w)
            c.update(0)
            per[name] = best_ms(lambda i: c.update(1 + i % 239), 239)
        n = model.source_extras["vrm_springs"].num_joints
        print(f"{rel}: {n} joints — SpringWorld.step(1/30) {step:.3f} ms/frame; Character.update "
              + ", ".join(f"{k} {v:.3f} ms" for k, v in per.items()))
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
