"""Render benchmark: Gene + wavefile_v2 → MP4 at 1280x720, 4x MSAA, physics on (end-to-end fps).

Run: python3 benchmarks/bench_render.py [--frames 300] [--size 1280x720]
Prints frames/s end to end and the split: posing+physics, GL draw+readback, encode.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.physics import physics_for
from mmdkit.runtime import Character
from mmdkit.render.camera import auto_view, perspective
from mmdkit.render.gl import Renderer
from mmdkit.render.pipeline import render_motion
from mmdkit.render.video import VideoWriter

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--size", default="1280x720")
    a = ap.parse_args()
    size = tuple(int(x) for x in a.size.split("x"))
    model = mmdkit.load(ASSETS / "gene" / "Gene_light.pmx")
    motion = mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "gene.mp4")
        for shadow, self_shadow in ((True, False), (False, False), (True, True)):
            stats = render_motion(model, motion, out, frames=range(a.frames), size=size, msaa=4, physics=True,
                                  progress=False, warn=lambda m: None, ground_shadow=shadow, self_shadow=self_shadow)
            print(f"end to end: {stats['frames']} frames in {stats['seconds']:.2f} s = {stats['fps']:.1f} frames/s "
                  f"({size[0]}x{size[1]}, 4x MSAA, physics on, H.264, ground shadow {'on' if shadow else 'off'}, "
                  f"self-shadow {'on' if self_shadow else 'off'})")
        # the parts, each alone
        ch = Character(model, motion, physics_for(model))
        ren = Renderer(model, size, 4)
        lo, hi = model.vertex_position.min(0), model.vertex_position.max(0)
        view, dist = auto_view(lo, hi, 30, size[0] / size[1])
        proj = perspective(30, size[0] / size[1])
        w = VideoWriter(os.path.join(d, "parts.mp4"), size, 30)
        tp, tr, te = [], [], []
        for f in range(min(a.frames, 120)):
            t0 = time.perf_counter()
            ch.update(f)
            t1 = time.perf_counter()
            img = ren.render(ch.bone_skin, view, proj, vertex_offset=ch.vertex_offset, eye_distance=dist)
            t2 = time.perf_counter()
            w.write(img)
            t3 = time.perf_counter()
            tp.append(t1 - t0)
            tr.append(t2 - t1)
            te.append(t3 - t2)
        w.close()
        print(f"  pose+physics {np.median(tp) * 1e3:6.2f} ms/frame")
        print(f"  GL draw+read {np.median(tr) * 1e3:6.2f} ms/frame")
        print(f"  H.264 encode {np.median(te) * 1e3:6.2f} ms/frame")


if __name__ == "__main__":
    main()
