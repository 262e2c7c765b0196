"""Batch runs: many model × motion jobs → output folders and a results table, resumable.

In: jobs (``read_manifest`` for JSON Lines/CSV, ``cross_product`` for globs), an output root (folder
or fsspec URL), an executor (a local process pool, or Ray). Out: ``OUT/<job>/<job>.<ext>`` per output,
``OUT/<job>/.mmdkit-job.json`` (written last: the job is done), ``OUT/results.jsonl`` + ``.csv``.
A job whose record matches its inputs' content hash and options is skipped; see docs/batch.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmdkit.batch.manifest import OUTPUTS, Job, cross_product, option_table, read_manifest, shard
from mmdkit.batch.plan import FileHasher, Plan, plan, recorded_row
from mmdkit.batch.progress import Progress
from mmdkit.batch.results import read_results, results_name, write_results
from mmdkit.batch.store import Store

__all__ = ["run_batch", "BatchSummary", "Job", "OUTPUTS", "read_manifest", "cross_product", "option_table",
           "shard", "plan", "Plan", "FileHasher", "Store", "read_results"]


@dataclass
class BatchSummary:
    """What a batch did: rows (manifest order), counts by status, the results file, wall seconds;
    ``total``: the jobs planned (more than the rows when the batch was interrupted)."""

    rows: list
    counts: dict
    results: str
    seconds: float
    total: int = 0

    @property
    def done(self) -> int:
        """Jobs whose outputs are all there (ok or skipped)."""
        return self.counts["ok"] + self.counts["skipped"]


def run_batch(jobs, out, *, workers: int | None = None, ray: str | None = None, shard_spec: str | None = None,
              force: bool = False, quiet: bool = True, retries: int | None = None, threads: int | None = None,
              cpus_per_job: float = 1) -> BatchSummary:
    """Plan ``jobs`` against ``out`` and run what is not done, locally (``workers`` processes) or
    through Ray (``ray`` = 'local', 'auto' or an address); ``threads``: numba threads per local worker.
    The output folder is locked for the run (a second batch there gets an OptionError; the shards of
    one manifest run side by side). The results table is written even when the run is interrupted
    (KeyboardInterrupt, SystemExit): it then lists every job finished by then, and the exception
    carries the ``BatchSummary`` as ``batch_summary``."""
    import time

    t0 = time.perf_counter()
    store = Store(out)
    store.prepare()
    selected = shard(jobs, shard_spec)  # a malformed --shard is refused before anything is locked
    part = results_name(shard_spec) if shard_spec else None
    with store.lock(part):
        store.remove_leftovers(part)
        order = {j.name: i for i, j in enumerate(jobs)}
        the_plan = plan(selected, store, force=force)
        progress = Progress(the_plan.total, quiet=quiet)
        rows = {}

        def on_row(row):
            rows[row["name"]] = row
            progress.update(row)

        for row in the_plan.skipped + the_plan.failed:
            on_row(row)
        try:
            _execute(the_plan.todo, store, on_row, ray=ray, workers=workers, threads=threads, retries=retries,
                     cpus_per_job=cpus_per_job)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                for job in the_plan.todo:  # finished as the interrupt came: its record is there, its row not
                    row = None if job.name in rows else recorded_row(job, store, "ok")
                    if row:
                        on_row(row)
            progress.close()
            e.batch_summary = _summary(rows, order, store, shard_spec, the_plan.total, t0)
            raise
        progress.close()
        return _summary(rows, order, store, shard_spec, the_plan.total, t0)


def _execute(todo, store, on_row, *, ray, workers, threads, retries, cpus_per_job) -> None:
    if todo and ray:
        from mmdkit.batch.ray_exec import run_ray

        run_ray(todo, store, on_row, address=ray, num_cpus=workers, cpus_per_job=cpus_per_job,
                retries=3 if retries is None else retries)
    elif todo:
        from mmdkit.batch.local import run_local

        run_local(todo, store, on_row, workers=workers, threads=threads, retries=2 if retries is None else retries)


def _summary(rows: dict, order: dict, store, shard_spec, total: int, t0: float) -> BatchSummary:
    """Write the results table (rows in manifest order) and sum it up."""
    import time

    ordered = sorted(rows.values(), key=lambda r: order[r["name"]])
    results = write_results(store, ordered, shard_spec)
    counts = {s: sum(r["status"] == s for r in ordered) for s in ("ok", "failed", "skipped")}
    return BatchSummary(ordered, counts, results, time.perf_counter() - t0, total)
