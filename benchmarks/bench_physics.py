"""Physics benchmark: Gene + wavefile_v2 on Bullet at saba's settings (1/120 s step, <= 10
substeps, gravity -98) → ms/frame for the whole stage, the Bullet step alone and the bone<->body
sync (push_targets + pull_bones; MMDPhysics.step does all three in one bridge call); one
character's Bullet worlds (``setup.PHYSICS_WORLDS``) stepped on 1 thread vs 2 (``MMDPhysics(threads=)``,
interleaved frame by frame; same motion either way); then N characters (pose + physics) played on
1 thread vs 2 (``play(..., threads=2)``).

    python3 benchmarks/bench_physics.py [--frames 600] [--characters 1 2 4]
"""
import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.physics import MMDPhysics
from mmdkit.runtime import Character, play

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[1].parent / "shared" / "assets"))
FPS = 30.0


def poses(model, motion, frames):
    """(F,B,4,4) float32 before-physics bone worlds (pass 1) for frames 0..F-1."""
    ch = Character(model, motion)
    out = np.empty((frames, model.num_bones, 4, 4), np.float32)
    for f in range(frames):
        ch.update(f)
        out[f] = ch.bone_world
    return out


def bench_single(model, pose, reps):
    ph = MMDPhysics(model)
    bw = np.empty_like(pose[0])
    best_total, best_step, best_sync = [], [], []
    for _ in range(reps):
        ph.reset(pose[0])
        tot, stp, syn = [], [], []
        for f in range(1, len(pose)):
            bw[:] = pose[f]
            t0 = time.perf_counter()
            ph.push_targets(bw)
            t1 = time.perf_counter()
            ph.simulate(1 / FPS)
            t2 = time.perf_counter()
            ph.pull_bones(bw)
            t3 = time.perf_counter()
            tot.append(t3 - t0)
            stp.append(t2 - t1)
            syn.append((t1 - t0) + (t3 - t2))
        best_total.append(np.median(tot))
        best_step.append(np.median(stp))
        best_sync.append(np.median(syn))
    # the public call, as Character uses it
    ph.reset(pose[0])
    pub = []
    for f in range(1, len(pose)):
        bw[:] = pose[f]
        t0 = time.perf_counter()
        ph.step(1 / FPS, bw)
        pub.append(time.perf_counter() - t0)
    return min(best_total), min(best_step), min(best_sync), float(np.median(pub))


def bench_threads(model, pose, reps):
    """(ms/frame with 1 thread, with 2 threads, worlds, bodies per world): ``MMDPhysics.step`` of
    two worlds built alike, called alternately on each frame so both see the same machine; the
    median over frames, the best of ``reps``."""
    one, two = MMDPhysics(model, threads=1), MMDPhysics(model, threads=2)
    b1, b2 = np.empty_like(pose[0]), np.empty_like(pose[0])
    best1, best2 = [], []
    for _ in range(reps):
        one.reset(pose[0])
        two.reset(pose[0])
        t1, t2 = [], []
        for f in range(1, len(pose)):
            b1[:] = pose[f]
            b2[:] = pose[f]
            t0 = time.perf_counter()
            one.step(1 / FPS, b1)
            t = time.perf_counter()
            two.step(1 / FPS, b2)
            t1.append(t - t0)
            t2.append(time.perf_counter() - t)
        best1.append(np.median(t1))
        best2.append(np.median(t2))
    assert np.array_equal(b1, b2), "the motion must not depend on the threads"
    two.close()
    return min(best1), min(best2), len(two._parts), [int(len(p.body_world)) for p in two._parts]


def bench_many(model, motion, n, frames, threads):
    """ms/frame of ``play`` over n Gene characters with physics (each its own world) on
    ``threads`` threads: (wall time per frame, CPU time / wall time), after a 30-frame warm-up
    that includes the first settle."""
    chars = [Character(model, motion, world=MMDPhysics(model)) for _ in range(n)]
    for _ in play(chars, range(30), threads=threads):
        pass
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in play(chars, range(30, 30 + frames), threads=threads):
        pass
    wall = time.perf_counter() - t0
    return wall / frames, (time.process_time() - c0) / wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--characters", type=int, nargs="*", default=[1, 2, 4])
    a = ap.parse_args()
    model = mmdkit.load(str(ASSETS / "gene" / "Gene.pmx"))
    motion = mmdkit.load(str(ASSETS / "wavefile" / "wavefile_v2.vmd"))
    pose = poses(model, motion, a.frames)
    MMDPhysics(model).step(1 / FPS, pose[0].copy())  # numba compile
    print(f"Gene: {model.num_rigid_bodies} rigid bodies, {model.num_joints} joints; wavefile_v2 {a.frames} frames "
          f"at {FPS:g} fps; fixed step 1/120, max 10 substeps, gravity -98; cores: {os.cpu_count()}")
    tot, stp, syn, pub = bench_single(model, pose, a.reps)
    print(f"physics stage   {tot * 1e3:7.3f} ms/frame (median)")
    print(f"  Bullet step   {stp * 1e3:7.3f} ms/frame")
    print(f"  bone sync     {syn * 1e3:7.3f} ms/frame (bones->bodies, bodies->bones; target < 0.1)")
    print(f"  MMDPhysics.step() call {pub * 1e3:7.3f} ms/frame (median, incl. call overhead)")
    one, two, worlds, sizes = bench_threads(model, pose, a.reps)
    print(f"one character, {worlds} worlds ({'+'.join(map(str, sizes))} bodies): 1 thread {one * 1e3:7.3f} ms/frame, "
          f"2 threads {two * 1e3:7.3f} ms/frame, speed-up x{one / two:.2f} (same bones to the bit)")
    ch = Character(model, motion, world=MMDPhysics(model))
    stage = []
    for f in range(a.frames):
        ch.update(f, timed=True)
        stage.append(ch.stage_seconds["physics"])
    print(f"Character 'physics' stage (step + driven-bone read-back + refresh) "
          f"{np.median(stage[1:]) * 1e3:7.3f} ms/frame (median)")
    for n in a.characters:
        runs = []
        for _ in range(a.reps):  # back to back, so both see the same load
            (serial, _), (parallel, busy) = (bench_many(model, motion, n, min(a.frames, 300), t) for t in (1, 2))
            runs.append((serial, parallel))
            print(f"{n} characters (pose + physics, play): 1 thread {serial * 1e3:7.3f} ms/frame, 2 threads "
                  f"{parallel * 1e3:7.3f} ms/frame (CPU/wall {busy:.2f}), speed-up x{serial / parallel:.2f}")
        s1, s2 = min(r[0] for r in runs), min(r[1] for r in runs)
        print(f"{n} characters, fastest of {len(runs)} each (a shared host lends the second core unevenly): "
              f"1 thread {s1 * 1e3:7.3f}, 2 threads {s2 * 1e3:7.3f} ms/frame, speed-up x{s1 / s2:.2f} "
              f"(median of the rounds' speed-ups x{statistics.median(r[0] / r[1] for r in runs):.2f})")

if __name__ == "__main__":
    main()
