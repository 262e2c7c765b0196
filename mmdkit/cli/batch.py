"""`mmdkit batch MANIFEST -o OUT_DIR`: many model × motion jobs, resumable, locally or on Ray.

In: a JSON Lines or CSV manifest (or --models/--motions glob patterns), options. Out: one folder
per job under OUT_DIR, OUT_DIR/results.jsonl and results.csv; exit 0 when every job is ok or
skipped, 1 when a job failed (the batch still ran every other job), 2 for a malformed manifest or an
OUT_DIR another batch is running in, 130 on Ctrl-C (after saying how many jobs are done; the same
command resumes).
"""

from __future__ import annotations

import click

from mmdkit.cli._common import QUIET_HELP
from mmdkit.errors import OptionError


@click.command("batch")
@click.argument("manifest", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", required=True, metavar="OUT_DIR",
              help="Output folder, or an fsspec URL (s3://bucket/run, gs://..., file:///...).")
@click.option("--models", multiple=True, metavar="GLOB", help="Model files (glob, repeatable): a cross product "
              "with --motions instead of a MANIFEST.")
@click.option("--motions", multiple=True, metavar="GLOB", help="Motion files (glob, repeatable).")
@click.option("--outputs", default="npz", show_default=True,
              help="With --models: outputs per job, comma-separated (npz, glb, gltf, bvh, vmd, vrma, mp4, png, annotate).")
@click.option("--frames", default=None, help="With --models: A:B[:STEP] (B inclusive), A+N or N, as render/export "
              "take them [default: the whole motion].")
@click.option("--camera", default=None, type=click.Path(exists=True, dir_okay=False), help="With --models: a camera .vmd.")
@click.option("--audio", default=None, type=click.Path(exists=True, dir_okay=False), help="With --models: audio for mp4.")
@click.option("--physics/--no-physics", default=True, show_default=True, help="With --models: simulate physics.")
@click.option("-O", "--option", "options", multiple=True, metavar="OUTPUT.KEY=VALUE",
              help="Default option of an output for every job (a job's own value wins), e.g. -O npz.joints=humanoid "
                   "-O mp4.frames=0:300 -O mp4.size=640x360.")
@click.option("--workers", type=int, default=None, help="Local worker processes [default: the cores]; "
              "with --ray local, the CPUs of the Ray instance.")
@click.option("--threads", type=int, default=None, help="numba threads per local worker [default: cores ÷ workers].")
@click.option("--ray", "ray_address", default=None, metavar="local|auto|ADDRESS",
              help="Run the jobs as Ray tasks: 'local' starts Ray here, 'auto'/HOST:PORT join a cluster.")
@click.option("--cpus-per-job", type=float, default=1, show_default=True, help="With --ray: CPUs each task asks for.")
@click.option("--shard", default=None, metavar="I/N", help="Run only shard I of N (0-based; e.g. a Slurm array "
              "task); results go to results-I-of-N.jsonl.")
@click.option("--force", is_flag=True, help="Run every job again, even those done with the same inputs.")
@click.option("--dry-run", is_flag=True, help="Plan only: say how many jobs would run, be skipped or fail.")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
def command(manifest, out, models, motions, outputs, frames, camera, audio, physics, options, workers, threads,
            ray_address,
            cpus_per_job, shard, force, dry_run, quiet):
    """Run every job of MANIFEST (or --models × --motions) into OUT_DIR; jobs already done are skipped.

    \b
    Examples:
      mmdkit batch jobs.jsonl -o out/ --workers 2
      mmdkit batch --models 'models/*.pmx' --motions 'motions/*.vmd' --outputs npz,mp4 \\
          -O npz.joints=humanoid -O mp4.frames=0:300 -o out/
      mmdkit batch jobs.jsonl -o s3://bucket/run1 --ray auto
    \b
    A manifest line: {"model": "a.pmx", "motion": "b.vmd", "frames": "0:300", "outputs": ["npz", "mp4"],
                      "npz": {"joints": "humanoid"}, "mp4": {"size": "640x360"}}
    A model's own clip (as --clip) and VPD poses (as --vpd): {"model": "fox.glb", "clip": "Run",
    "outputs": ["npz"]}, {"model": "a.pmx", "motion": "b.vmd", "vpd": ["hands.vpd@120:0.5"], ...}.
    A line takes every option of render/export (camera, audio, frames, fps, physics, crowd; per
    output size, msaa, palette_size, ground_shadow, self_shadow, joints, scale, vertices, reduce,
    reduce_physics): docs/batch.md lists them; a bad value says what the command line says.
    One batch at a time per OUT_DIR (the shards of one manifest run side by side); Ctrl-C keeps what
    finished, and the same command resumes.
    """
    from mmdkit.batch import cross_product, option_table, plan, read_manifest, run_batch, shard as pick, Store

    defaults = option_table(options)
    if bool(manifest) == bool(models):
        raise OptionError("MANIFEST", "give a manifest file or --models (with --motions), not both or neither")
    for name, value in (("--workers", workers), ("--threads", threads)):
        if value is not None and value < 1:
            raise OptionError(name, f"must be at least 1, got {value}")
    if manifest:
        jobs = read_manifest(manifest, defaults)
    else:
        jobs = cross_product(models, motions, [o for o in outputs.replace(",", " ").split() if o], frames=frames,
                             camera=camera, audio=audio, physics=physics, defaults=defaults)
    if dry_run:
        p = plan(pick(jobs, shard), Store(out), force=force)
        click.echo(f"{p.total} jobs: {len(p.todo)} to run, {len(p.skipped)} done already, {len(p.failed)} failing "
                   f"(missing or unreadable input)")
        return
    try:
        summary = run_batch(jobs, out, workers=workers, ray=ray_address, shard_spec=shard, force=force,
                            quiet=quiet, threads=threads, cpus_per_job=cpus_per_job)
    except (KeyboardInterrupt, SystemExit) as e:  # Ctrl-C, SIGTERM: the results table lists what finished
        s = getattr(e, "batch_summary", None)
        if s is None:
            raise
        click.echo(f"mmdkit: batch: interrupted: {s.done} of {s.total} jobs done; run the same command again "
                   f"to resume", err=True)
        if isinstance(e, KeyboardInterrupt):
            click.get_current_context().exit(130)
        raise
    for row in summary.rows:
        if row["status"] == "failed":
            click.echo(f"mmdkit: batch: {row['name']} failed: {row['error']}", err=True)
    if not quiet:
        c = summary.counts
        click.echo(f"mmdkit: batch: {c['ok']} ok, {c['failed']} failed, {c['skipped']} skipped; "
                   f"results in {summary.results}", err=True)
    click.get_current_context().exit(1 if summary.counts["failed"] else 0)
