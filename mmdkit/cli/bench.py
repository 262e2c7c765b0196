"""`mmdkit bench MODEL MOTION`: per-stage ms/frame of frame-by-frame playback (medians).

In: model, motion, frame count, physics on/off. Out: one line per stage (sample, morph,
bones_before_physics, physics, bones_after_physics, skinning) plus total, or one JSON object.
"""

from __future__ import annotations

import json
import time

import click
import numpy as np

from mmdkit.cli._common import load_as, make_physics


@click.command("bench")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("motion_path", metavar="MOTION", type=click.Path(exists=True, dir_okay=False))
@click.option("--frames", "num_frames", default=1000, show_default=True, help="Consecutive frames to run.")
@click.option("--physics/--no-physics", default=False, show_default=True, help="Include the Bullet stage.")
@click.option("--skinning/--no-skinning", default=True, show_default=True, help="Include CPU skinning.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(model_path, motion_path, num_frames, physics, skinning, as_json):
    """Run NUM frames the way playback does and print the median ms/frame of each stage.

    \b
    Example:
      mmdkit bench Gene.pmx wavefile_v2.vmd --frames 1000 --physics
    """
    from mmdkit import Model, Motion
    from mmdkit.pose import STAGES, Character

    model = load_as(model_path, Model, "model (.pmx/.pmd)")
    motion = load_as(motion_path, Motion, "motion (.vmd)")
    ch = Character(model, motion, make_physics(model, physics))
    V = model.num_vertices
    pos = np.empty((V, 3), np.float32)
    nrm = np.empty((V, 3), np.float32)
    for f in range(3):  # warm-up: compile kernels, settle physics
        ch.update(f)
        if skinning:
            ch.skin(pos, nrm)
    rows = {s: np.empty(num_frames) for s in STAGES}
    total = np.empty(num_frames)
    last = max(motion.last_frame, 1)
    for i in range(num_frames):
        t0 = time.perf_counter()
        ch.update(3 + i % last, timed=True)
        t1 = time.perf_counter()
        if skinning:
            ch.skin(pos, nrm)
        t2 = time.perf_counter()
        for s in STAGES[:-1]:
            rows[s][i] = ch.stage_seconds[s]
        rows["skinning"][i] = t2 - t1
        total[i] = t2 - t0
    result = {s: float(np.median(rows[s]) * 1e3) for s in STAGES}
    result["total"] = float(np.median(total) * 1e3)
    result.update(frames=num_frames, bones=model.num_bones, vertices=V, physics_enabled=bool(physics))
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"{model_path} + {motion_path}: {num_frames} frames, median ms/frame")
    for s in (*STAGES, "total"):
        click.echo(f"  {s:22s} {result[s]:8.4f}")
