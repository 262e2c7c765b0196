"""Annotated renders (#25): what the labels cost next to the RGB-only render of the same views and frames.

Usage: python3 benchmarks/bench_annotate.py [--frames 0:59] [--size 640x480] [--views 1,4] [--repeats 2]
                                             [--model PATH] [--motion PATH] [--msaa 4] [--no-ground-shadow]
For each view count, in one process, interleaved ``repeats`` times: the annotated render (``AnnotateSink``:
RGB + label pass + depth/mask/parts PNGs + keypoints, as ``mmdkit render --annotate --views N``) and the
RGB-only render of the same views in the same frame loop (the same sink with the label pass and label
files left out: the picture's PNG only). Physics on, posed once per frame. Prints output frames per
second (the sink's own clock from its open to its close: posing and physics, drawing, reading back
and writing, not loading nor compiling) and the ratios; then the CPU seconds a frame took over the
same span, the whole take (every thread: posing and physics on the driver's, GL, llvmpipe's
rasterizer threads, the writer) and the sink alone (the same less what posing and physics alone
take a frame, measured by a take with a sink that does nothing), which depend less than frames/s
on what else the machine runs; the cores kept busy (CPU s/frame × frames/s); and, per view count, where
the annotated take's CPU went a frame by thread (Linux: /proc/self/task): the driver (posing and
physics), llvmpipe's compute threads (skinning), its rasterizer threads, the GL thread (vertex stage,
triangle set-up, reads) and the writer (PNG, keypoints) — what is shared by the views of a frame and
what each view adds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
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
        self.threads0 = thread_cpu()

    def release(self) -> None:  # a picture sink's threads end here: what each spent from open on
        self.threads_end = thread_cpu()
        super().release()

    def close(self) -> dict:
        out = super().close()
        out["cpu_take"] = (time.process_time() - self.cpu0) / self.frames
        ends = getattr(self, "threads_end", None) or thread_cpu()
        out["threads"] = {(name, t): (cpu - self.threads0.get(t, (name, 0.0))[1]) / self.frames
                          for t, (name, cpu) in ends.items()}
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


def thread_cpu() -> dict:
    """{thread id: (name, CPU seconds so far)} of this process's threads (Linux' schedstat; empty
    elsewhere); named as Python names them where it does (the GL thread: mmdkit-gl…)."""
    out, root = {}, "/proc/self/task"
    named = {str(t.native_id): t.name for t in threading.enumerate()}
    for t in os.listdir(root) if os.path.isdir(root) else ():
        try:
            with open(f"{root}/{t}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"{root}/{t}/comm") as f:
                out[t] = (named.get(t, f.read().strip()), ns * 1e-9)
        except OSError:  # the thread ended meanwhile
            continue
    return out


def once(loaded, kind, out: str, size, views: int, **options) -> tuple:
    """(frames/s, CPU s a frame: whole take, sink alone = whole take − posing alone, {thread: CPU s a
    frame} of the take's threads)."""
    sink = {"annotate": Annotated, "rgb": RgbOnly}[kind](out, size=size, views=views, **options)
    got = run(loaded, [sink])[0]
    posing = run(loaded, [PoseOnly()])[0]["cpu_take"]
    return got["fps"], got["cpu_take"], got["cpu_take"] - posing, got["threads"]


def _roles(threads: dict) -> dict:
    """CPU s a frame by role: the main thread drives (posing, physics); mmdkit-gl… draws (vertex
    stages, triangle set-up, reads); mmdkit-annotate… writes (PNGs, keypoints); llvmpipe-… rasterize;
    the rest are llvmpipe's compute threads (skinning) and whatever else ran."""
    roles = {"driver": 0.0, "GL thread": 0.0, "writer": 0.0, "rasterizers": 0.0, "compute and other": 0.0}
    for (name, t), cpu in threads.items():
        role = ("driver" if t == str(os.getpid()) else "GL thread" if name.startswith("mmdkit-gl") else
                "writer" if name.startswith("mmdkit-annotate") else "rasterizers" if name.startswith("llvmpipe")
                else "compute and other")
        roles[role] += cpu
    return roles


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", default="0:59")
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--views", default="1,4")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model", default=str(ASSETS / "gene" / "Gene_light.pmx"))
    ap.add_argument("--motion", default=str(ASSETS / "gene" / "motion" / "01_happy.vmd"))
    ap.add_argument("--msaa", type=int, default=4)
    ap.add_argument("--no-ground-shadow", action="store_true")
    a = ap.parse_args()
    options = dict(msaa=a.msaa, ground_shadow=not a.no_ground_shadow)
    size = parse_size(a.size)
    loaded = Take(a.model, a.motion, frames=a.frames).validate().load()
    counts = [int(v) for v in a.views.split(",")]
    kinds = ("rgb", "annotate")
    fps = {(k, n): [] for k in kinds for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        once(loaded, "annotate", os.path.join(tmp, "warm/"), size, 1, **options)  # kernels and shaders compiled
        for r in range(a.repeats):
            for n in counts:
                for kind in kinds:
                    fps[kind, n].append(once(loaded, kind, os.path.join(tmp, f"{kind}{n}_{r}/"), size, n,
                                             **options))
    print(f"{len(loaded.frames)} frames of {Path(a.model).name} at {a.size}, physics on, MSAA {a.msaa}, ground "
          f"shadow {'off' if a.no_ground_shadow else 'on'}; frames/s (median of {a.repeats})")
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
    if len(counts) > 1:  # CPU of the whole take as shared + views × per view, from the two counts
        lo, hi = counts[0], counts[-1]
        c = {n: statistics.median(x[1] for x in fps["annotate", n]) for n in (lo, hi)}
        per_view = (c[hi] - c[lo]) / (hi - lo)
        shared = c[lo] - lo * per_view
        print(f"  annotated CPU a frame = {1e3 * shared:.1f} ms shared by the views + {1e3 * per_view:.1f} ms a view: "
              f"{hi} views are {c[hi] / c[lo]:.2f}x the work of {lo}, the ratio of frames/s where both keep the "
              f"cores equally busy")
    print("  cores busy (CPU s/frame x frames/s): " + ", ".join(
        f"{k} {n}: {statistics.median(x[0] * x[1] for x in fps[k, n]):.2f}" for n in counts for k in kinds))
    for n in counts:
        roles = [_roles(x[3]) for x in fps["annotate", n]]
        print(f"  annotated, {n} view(s), CPU ms/frame by thread: " + ", ".join(
            f"{r} {1e3 * statistics.median(x[r] for x in roles):.1f}" for r in roles[0]))
    print("  runs (frames/s):", {f"{k} {n}": [round(x[0], 2) for x in v] for (k, n), v in fps.items()})


if __name__ == "__main__":
    main()
