"""Annotated renders (#25): what the labels cost next to the RGB-only render of the same views and frames.

Usage: python3 benchmarks/bench_annotate.py [--frames 0:59] [--size 640x480] [--views 1,4] [--repeats 2]
                                             [--model PATH] [--motion PATH]
For each view count, in one process, interleaved ``repeats`` times: the annotated render (``AnnotateSink``:
RGB + label pass + depth/mask/parts PNGs + keypoints, as ``mmdkit render --annotate --views N``) and the
RGB-only render of the same views in the same frame loop (the same sink with the label pass and label
files left out: the picture's PNG only). Physics on, posed once per frame. Prints output frames per
second (the sink's own clock: drawing, reading back and writing, not loading) and the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np

from mmdkit.io import parse_size
from mmdkit.render.labels import dataset
from mmdkit.render.labels.sink import AnnotateSink
from mmdkit.runtime.driver import run
from mmdkit.runtime.take import Take

ASSETS = Path(__file__).resolve().parents[2] / "shared" / "assets"


class _RgbOnlyWriter(dataset.DatasetWriter):
    def write(self, i, rgb, labels, keypoints, shown, normals=None) -> None:
        for c in range(len(self.views)):
            with open(os.path.join(self.tmp, f"view_{c:02d}", "rgb", f"{i:06d}.png"), "wb") as f:
                f.write(dataset._png_bytes(rgb[c]))


class RgbOnly(AnnotateSink):
    """The same views and frame loop, without the label pass and label files."""

    def open(self, loaded) -> None:
        super().open(loaded)
        self.writer.abort()
        self.writer = _RgbOnlyWriter(self.output, self.views, loaded.frames, self.rig, len(self.offsets))
        self.labels.draw = lambda view, proj, values, out, normals_out=None, target=0: out
        self.labels.read = lambda target, out, normals_out=None: out


def once(loaded, kind, out: str, size, views: int) -> float:
    sink = (AnnotateSink if kind == "annotate" else RgbOnly)(out, size=size, views=views)
    return run(loaded, [sink])[0]["fps"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", default="0:59")
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--views", default="1,4")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model", default=str(ASSETS / "gene" / "Gene_light.pmx"))
    ap.add_argument("--motion", default=str(ASSETS / "gene" / "motion" / "01_happy.vmd"))
    a = ap.parse_args()
    size = parse_size(a.size)
    loaded = Take(a.model, a.motion, frames=a.frames).validate().load()
    counts = [int(v) for v in a.views.split(",")]
    fps = {(k, n): [] for k in ("rgb", "annotate") for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        once(loaded, "annotate", os.path.join(tmp, "warm/"), size, 1)  # kernels and shaders compiled
        for r in range(a.repeats):
            for n in counts:
                for kind in ("rgb", "annotate"):
                    fps[kind, n].append(once(loaded, kind, os.path.join(tmp, f"{kind}{n}_{r}/"), size, n))
    print(f"{len(loaded.frames)} frames of {Path(a.model).name} at {a.size}, physics on; frames/s (median of "
          f"{a.repeats})")
    med = {k: statistics.median(v) for k, v in fps.items()}
    for n in counts:
        print(f"  {n} view(s): RGB only {med['rgb', n]:.2f}, annotated {med['annotate', n]:.2f} "
              f"(labels cost {med['rgb', n] / med['annotate', n]:.2f}x)")
    if len(counts) > 1:
        lo, hi = counts[0], counts[-1]
        print(f"  {hi} views cost {med['annotate', lo] / med['annotate', hi]:.2f}x {lo} (annotated), "
              f"{med['rgb', lo] / med['rgb', hi]:.2f}x (RGB only)")
    np.set_printoptions(precision=2)


if __name__ == "__main__":
    main()
