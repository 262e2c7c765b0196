"""Retargeting speed: frames/s of ``retarget`` for the whole wavefile_v2 (Gene's dance) onto other models.

In: Gene.pmx + wavefile_v2.vmd and the targets mokou_A.pmd (MMD), debug_robot.vrm (VRM 1.0) and
Godette_vrm_v4.vrm (VRM 0.x) from ../shared/assets (or $MMDKIT_ASSETS), files already loaded. Out: per
target and with/without the contact pass, the median seconds of N warm calls, frames/s, and the
share of it spent posing the source (``pose_source``, IK included). Also the limb-direction and
foot numbers docs/retarget.md quotes (``--quality``).
Run: python3 benchmarks/bench_retarget.py [--repeat N] [--quality]
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


def _timed(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


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
    posing = _timed(lambda: pose_source(gene, dance, frames), args.repeat)
    print(f"wavefile_v2: {F} frames; posing Gene (IK, append) alone {posing:.3f} s ({F / posing:,.0f} frames/s)")
    for path in TARGETS:
        target = load(ASSETS / path)
        for contact in (False, True):
            s = _timed(lambda: retarget(gene, dance, target, contact=contact), args.repeat)
            print(f"  -> {path:<32} contact {'on ' if contact else 'off'}  {s:.3f} s  {F / s:8,.0f} frames/s")
        if args.quality:
            print("     " + quality(gene, dance, target, retarget(gene, dance, target), frames))


if __name__ == "__main__":
    main()
