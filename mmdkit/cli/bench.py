"""`mmdkit bench MODEL MOTION`: per-stage ms/frame of frame-by-frame playback (medians).

In: model, motion, frames (the common --frames grammar; here a bare N = N frames), physics on/off.
Out: one line per stage (sample, morph, bones_before_physics, physics, bones_after_physics,
skinning) plus total, or one JSON object.
"""

from __future__ import annotations

import json
import time

import click
import numpy as np

from mmdkit.animation.frames import parse_frames
from mmdkit.cli._common import (FRAMES_HELP, PHYSICS_HELP, QUIET_HELP, VERBOSE_HELP, compile_note, load_as,
                                report_binding)


def _time_frames(ch, frame_list, skinning: bool, pos, nrm):
    """Play (and skin) each frame in order; per-stage seconds {stage: (F,)}, the totals (F,) and the
    numba threads used (1 with physics: numba's idle workers would spin on Bullet's cores)."""
    import numba

    from mmdkit.runtime import STAGES, play

    warm = [max(frame_list[0] - k, 0.0) for k in range(3, 0, -1)]
    for _ in play([ch], warm):  # warm-up: compile kernels, settle physics on the frames just before
        if skinning:
            ch.skin(pos, nrm)
    F = len(frame_list)
    rows = {s: np.empty(F) for s in STAGES}
    total = np.empty(F)
    t0 = time.perf_counter()
    for i, _ in play([ch], frame_list, timed=True):
        t1 = time.perf_counter()
        if skinning:
            ch.skin(pos, nrm)
        t2 = time.perf_counter()
        for s in STAGES[:-1]:
            rows[s][i] = ch.stage_seconds[s]
        rows["skinning"][i] = t2 - t1
        total[i] = t2 - t0
        threads = numba.get_num_threads()
        t0 = time.perf_counter()
    return rows, total, threads


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
    from mmdkit import Model, Motion
    from mmdkit.physics import physics_for
    from mmdkit.runtime import STAGES, Character

    with compile_note(quiet):
        model = load_as(model_path, Model, "model (.pmx/.pmd)")
        motion = load_as(motion_path, Motion, "motion (.vmd)", arg="MOTION")
        frame_list = parse_frames(frames, motion.last_frame, bare_count=True)
        report_binding(model, motion, motion_path, quiet=quiet)
        ch = Character(model, motion, physics_for(model, physics))
        V = model.num_vertices
        scratch = np.empty((V, 3), np.float32), np.empty((V, 3), np.float32)
        rows, total, threads = _time_frames(ch, frame_list, skinning, *scratch)
    result = {s: float(np.median(rows[s]) * 1e3) for s in STAGES}
    result["total"] = float(np.median(total) * 1e3)
    result.update(frames=len(frame_list), bones=model.num_bones, vertices=V, physics_enabled=ch.physics is not None,
                  numba_threads=threads)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"{model_path} + {motion_path}: {len(frame_list)} frames, median ms/frame")
    for s in (*STAGES, "total"):
        click.echo(f"  {s:22s} {result[s]:8.4f}")
