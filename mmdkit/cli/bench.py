"""`mmdkit bench MODEL MOTION`: per-stage ms/frame of frame-by-frame playback (medians).

In: model, motion, frames (the common --frames grammar; here a bare N = N frames), physics on/off,
made into a Take and played by the one frame loop (``runtime.driver.run``, timed) into a ``BenchSink``.
Out: one line per stage (sample, morph, bones_before_physics, physics, bones_after_physics,
skinning) plus total, or one JSON object.
"""

from __future__ import annotations

import dataclasses
import json
import time

import click
import numba
import numpy as np

from mmdkit.cli._common import FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, VERBOSE_HELP, compile_note
from mmdkit.cli._take import load, make_take
from mmdkit.runtime import STAGES
from mmdkit.runtime.driver import Sink, run


class BenchSink(Sink):
    """Per-stage seconds of each frame after the first ``warm`` (compiling kernels, settling physics
    on the frames just before), the CPU skinning timed here (into buffers allocated at ``open``)."""

    def __init__(self, warm: int, skinning: bool):
        self.warm, self.skinning = warm, skinning

    def open(self, loaded) -> None:
        F, V = len(loaded.frames) - self.warm, loaded.model.num_vertices
        self.rows = {s: np.empty(F) for s in STAGES}
        self.total = np.empty(F)
        self._pos, self._nrm = np.empty((V, 3), np.float32), np.empty((V, 3), np.float32)
        self._t0 = time.perf_counter()

    def frame(self, i: int, characters) -> None:
        ch = characters[0]
        t1 = time.perf_counter()
        if self.skinning:
            ch.skin(self._pos, self._nrm)
        t2 = time.perf_counter()
        k = i - self.warm
        if k >= 0:
            for s in STAGES[:-1]:
                self.rows[s][k] = ch.stage_seconds[s]
            self.rows["skinning"][k] = t2 - t1
            self.total[k] = t2 - self._t0
            self.threads = numba.get_num_threads()
            self.world = ch.world
        self._t0 = time.perf_counter()


@click.command("bench")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="MOTION", type=click.Path(exists=True, dir_okay=False))
@click.option("--frames", default="0+1000", show_default=True,
              help=f"Frames to time, in order: {FRAMES_HELP} Here a bare N means N frames from 0 (0:N-1): "
                   "one frame measures nothing.")
@click.option("--physics/--no-physics", default=True, show_default=True, help=PHYSICS_HELP)
@click.option("--skinning/--no-skinning", default=True, show_default=True, help="Include CPU skinning.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
def command(model_path, motion_path, frames, physics, skinning, as_json, quiet, verbose):
    """Play FRAMES the way playback does and print the median ms/frame of each stage.

    \b
    Examples:
      mmdkit bench Gene.pmx wavefile_v2.vmd --frames 1000 --physics
      mmdkit bench Gene.pmx wavefile_v2.vmd --frames 300:1299
    """
    take = make_take(model_path, motion_path, frames=frames, physics=physics, rest_pose=False, bare_count=True)
    with compile_note(quiet):
        loaded = load(take, quiet=quiet)
        frame_list = loaded.frames
        warm = np.array([max(frame_list[0] - k, 0.0) for k in range(3, 0, -1)])
        loaded = dataclasses.replace(loaded, frames=np.concatenate([warm, frame_list]))
        sink = BenchSink(len(warm), skinning)
        run(loaded, [sink], timed=True)
    model = loaded.model
    result = {s: float(np.median(sink.rows[s]) * 1e3) for s in STAGES}
    result["total"] = float(np.median(sink.total) * 1e3)
    result.update(frames=len(frame_list), bones=model.num_bones, vertices=model.num_vertices,
                  physics_enabled=sink.world is not None, numba_threads=sink.threads)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"{model_path} + {motion_path}: {len(frame_list)} frames, median ms/frame")
    for s in (*STAGES, "total"):
        click.echo(f"  {s:22s} {result[s]:8.4f}")
