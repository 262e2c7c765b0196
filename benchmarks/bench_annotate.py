"""Annotated renders (#25): what the labels cost next to the RGB-only render of the same views and frames.

Usage: python3 benchmarks/bench_annotate.py [--frames 0:59] [--size 640x480] [--views 1,4] [--repeats 2]
                                             [--model PATH] [--motion PATH]
For each view count, in one process, interleaved ``repeats`` times: the annotated render (``AnnotateSink``:
RGB + label pass + depth/mask/parts PNGs + keypoints, as ``mmdkit render --annotate --views N``) and the
RGB-only render of the same views in the same frame loop (the same sink with the label pass and label
files left out: the picture's PNG only). Physics on, posed once per frame. Prints output frames per
second (the sink's own clock from its open to its close: posing and physics, drawing, reading back
and writing, not loading nor compiling) and the ratios; then the CPU seconds a frame took over the
same span, the whole take (every thread: posing and physics on the driver's, GL, llvmpipe's
rasterizer threads, the writer) and the sink alone (the same less what posing and physics alone
take a frame, measured by a take with a sink that does nothing), which depend less than frames/s
on what else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


from mmdkit.io import parse_size
from mmdkit.render.labels import dataset
from mmdkit.render.labels.sink import AnnotateSink
from mmdkit.runtime.driver import Sink, run
from mmdkit.runtime.take import Take

ASSETS = Path(__file__).resolve().parents[2] / "shared" / "assets"


class _Clocked:
    """The process's CPU seconds a frame from the end of ``open`` to ``close`` (``cpu_take``)."""

    def open(self, loaded) -> None:
        super().open(loaded)
        self.cpu0, self.frames = time.process_time(), len(loaded.frames)

    def close(self) -> dict:
        out = super().close()
        out["cpu_take"] = (time.process_time() - self.cpu0) / self.frames
        return out


class PoseOnly(_Clocked, Sink):
    """Posing and physics (with the vertex offsets a picture sink asks for) and nothing else."""

    geometry = True


class _RgbOnlyWriter(dataset.DatasetWriter):
    def write(self, i, rgb, labels, keypoints, shown, normals=None, corr=None) -> None:
        for c in range(len(self.views)):
            with open(os.path.join(self.tmp, f"view_{c:02d}", "rgb", f"{i:06d}.png"), "wb") as f:
                f.write(dataset._png_bytes(rgb[c]))


class Annotated(_Clocked, AnnotateSink):
    """The annotated render, clocked."""


class RgbOnly(_Clocked, AnnotateSink):
    """The same views and frame loop, without the label pass and label files."""

    def open(self, loaded) -> None:
        super().open(loaded)
        self.writer.abort()
        self.writer = _RgbOnlyWriter(self.output, self.views, loaded.frames, self.rig, len(self.offsets))
        self.labels.draw = lambda view, proj, values, out, *a, **k: out
        self.labels.read = lambda target, out, *a, **k: out


def once(loaded, kind, out: str, size, views: int) -> tuple:
    """(frames/s, CPU s a frame: whole take, sink alone = whole take − posing alone)."""
    sink = {"annotate": Annotated, "rgb": RgbOnly}[kind](out, size=size, views=views)
    got = run(loaded, [sink])[0]
    posing = run(loaded, [PoseOnly()])[0]["cpu_take"]
    return got["fps"], got["cpu_take"], got["cpu_take"] - posing


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
    kinds = ("rgb", "annotate")
    fps = {(k, n): [] for k in kinds for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        once(loaded, "annotate", os.path.join(tmp, "warm/"), size, 1)  # kernels and shaders compiled
        for r in range(a.repeats):
            for n in counts:
                for kind in kinds:
                    fps[kind, n].append(once(loaded, kind, os.path.join(tmp, f"{kind}{n}_{r}/"), size, n))
    print(f"{len(loaded.frames)} frames of {Path(a.model).name} at {a.size}, physics on; frames/s (median of "
          f"{a.repeats})")
    base = kinds[0]
    med = {k: statistics.median(x[0] for x in v) for k, v in fps.items()}
    for n in counts:
        print(f"  {n} view(s): {base} {med[base, n]:.2f}, annotated {med['annotate', n]:.2f} "
              f"(annotated costs {med[base, n] / med['annotate', n]:.2f}x {base})")
    if len(counts) > 1:
        lo, hi = counts[0], counts[-1]
        print(f"  {hi} views cost {med['annotate', lo] / med['annotate', hi]:.2f}x {lo} (annotated), "
              f"{med[base, lo] / med[base, hi]:.2f}x ({base})")
    for j, what in ((1, "whole take"), (2, "sink alone")):
        cpu = {k: statistics.median(x[j] for x in v) for k, v in fps.items()}
        line = f"  CPU s/frame, {what}: " + ", ".join(f"{k} {n}: {cpu[k, n]:.3f}" for n in counts for k in kinds)
        if len(counts) > 1:
            line += f"; {counts[-1]} views cost {cpu['annotate', counts[-1]] / cpu['annotate', counts[0]]:.2f}x " \
                    f"{counts[0]} (annotated)"
        print(line + "; annotated/" + base + " " + ", ".join(f"{cpu['annotate', n] / cpu[base, n]:.2f}x ({n})"
                                                               for n in counts))
    print("  runs (frames/s):", {f"{k} {n}": [round(x[0], 2) for x in v] for (k, n), v in fps.items()})


if __name__ == "__main__":
    main()
