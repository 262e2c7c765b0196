"""Retargeting speed: frames/s of ``retarget`` for the whole wavefile_v2 (Gene's dance) onto other models.

In: Gene.pmx + wavefile_v2.vmd and the targets mokou_A.pmd (MMD), debug_robot.vrm (VRM 1.0) and
Godette_vrm_v4.vrm (VRM 0.x) from ../shared/assets (or $MMDKIT_ASSETS), files already loaded. Out: per
target and with/without the contact pass, frames/s of the retargeting itself (``retarget`` with
the source already posed: ``source_pose=``, maps found inside) and end to end (the source posed
too, ``pose_source``: IK, append); posing alone is printed once. Times: wall clock median and the
process's CPU time, best of N warm calls (CPU time is steady on a shared machine; it sums threads,
so read it with one numba thread; map building: ``bench_retarget_map.py``). Also the
limb-direction and foot numbers docs/retarget.md quotes (``--quality``).
Run (one core): NUMBA_NUM_THREADS=1 taskset -c 1 python3 benchmarks/bench_retarget.py [--repeat N] [--quality]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench_gltf import ASSETS

from mmdkit.formats.io import load
from mmdkit.retarget import contact as C
from mmdkit.retarget import humanoid_map, retarget
from mmdkit.retarget.align import align
from mmdkit.retarget.motion import pose_source
from mmdkit.retarget.quat import angle_between, qrot

TARGETS = ["mokou/mokou_A.pmd", "rigs/vrm1/debug_robot.vrm", "rigs/vrm0/Godette_vrm_v4.vrm"]
SEGMENTS = {"arms": [("leftUpperArm", "leftLowerArm"), ("leftLowerArm", "leftHand"),
                     ("rightUpperArm", "rightLowerArm"), ("rightLowerArm", "rightHand")],
            "legs": [("leftUpperLeg", "leftLowerLeg"), ("leftLowerLeg", "leftFoot"),
                     ("rightUpperLeg", "rightLowerLeg"), ("rightLowerLeg", "rightFoot")],
            "spine": [("spine", "neck"), ("neck", "head")]}


def _timed(fn, repeat: int) -> tuple[float, float]:
    """(median wall seconds, best CPU seconds) of ``repeat`` warm calls."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), min(cpu)


def quality(gene, dance, target, out, frames) -> str:
    """Limb angles (median / 95th percentile, degrees) and feet during contacts, the target posed by mmdkit."""
    sm, tm = humanoid_map(gene), humanoid_map(target)
    al = align(gene, sm, target, tm)
    sp, _ = pose_source(gene, dance, frames)
    tp, _ = pose_source(target, out, frames)
    parts = []
    for name, segs in SEGMENTS.items():
        ang = np.concatenate([np.degrees(angle_between(sp[:, sm[b]] - sp[:, sm[a]],
                                                       qrot(al.facing_q, tp[:, tm[b]] - tp[:, tm[a]])))
                              for a, b in segs])
        parts.append(f"{name} {np.median(ang):.2f}/{np.percentile(ang, 95):.2f}°")
    rest_s, rest_t = np.asarray(gene.bone_position), np.asarray(target.bone_position)
    worst_h = worst_v = low = 0.0
    for side in ("left", "right"):
        sf, tf = sm[f"{side}Foot"], tm[f"{side}Foot"]
        on = C.contacts(sp[:, sf], rest_s[sf, 1], al.source_leg, frames)
        h = (tp[:, tf, 1] - rest_t[tf, 1]) / al.target_leg
        v = np.r_[0, np.linalg.norm(np.diff(tp[:, tf][:, [0, 2]], axis=0), axis=1)] / al.target_leg
        inside = on & np.r_[False, on[:-1]]
        worst_h, worst_v, low = max(worst_h, h[on].max()), max(worst_v, v[inside].max()), min(low, h.min())
    parts.append(f"feet in contact: height <= {worst_h:.3f} L, speed <= {worst_v:.5f} L/frame; lowest {low:.4f} L")
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quality", action="store_true")
    args = ap.parse_args()
    gene = load(ASSETS / "gene" / "Gene.pmx")
    dance = load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    frames = np.arange(0, dance.last_frame + 1)
    F = len(frames)
    posing, posing_cpu = _timed(lambda: pose_source(gene, dance, frames), args.repeat)
    print(f"wavefile_v2: {F} frames; posing Gene (IK, append) alone {posing:.3f} s wall ({F / posing:,.0f} frames/s), "
          f"{posing_cpu:.3f} s CPU")
    pose = pose_source(gene, dance, frames)
    for path in TARGETS:
        target = load(ASSETS / path)
        for contact in (False, True):
            s, c = _timed(lambda: retarget(gene, dance, target, contact=contact, source_pose=pose), args.repeat)
            e, _ = _timed(lambda: retarget(gene, dance, target, contact=contact), args.repeat)
            print(f"  -> {path:<30} contact {'on ' if contact else 'off'}  retarget {s * 1e3:6.1f} ms wall "
                  f"{F / s:8,.0f} frames/s, {c * 1e3:6.1f} ms CPU {F / c:8,.0f} frames/s; "
                  f"with posing {e:.3f} s {F / e:7,.0f} frames/s")
        if args.quality:
            print("     " + quality(gene, dance, target, retarget(gene, dance, target), frames))


if __name__ == "__main__":
    main()
