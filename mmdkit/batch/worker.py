"""Running one batch job inside a worker process (a local pool's or a Ray worker's).

In: a planned ``Job`` and the ``Store``; a ``Worker`` per process (its numba threads, its
``ModelCache``). Out: a results row (status ok or failed, seconds, frames, output paths and sizes (an
annotated render's folder: its keypoints.json),
warnings, the one-line error). A job runs as its Takes (``Job.takes``: the outputs sharing frames,
fps and physics in one pass) through ``mmdkit.io.run``, as ``mmdkit render``/``export`` run theirs:
the same loading (no motion: a glTF model's first clip, else the rest pose), the same errors.
Outputs are written atomically, the job record last. The cache keeps one model loaded (keyed by
path, size and mtime) and drops it when a job needs another, so memory stays flat however many jobs
a worker runs; a second cache does the same for jobs' ``source`` models (retargeting), loaded once
for all of a job's Takes.
"""

from __future__ import annotations

import gc
import os
import time

from mmdkit.batch.plan import job_row
from mmdkit.batch.store import naming
from mmdkit.errors import MmdkitError
from mmdkit.io import run as run_take
from mmdkit.model.model import Model
from mmdkit.runtime import loading
from mmdkit.threads import limit_process

SHOWN_WARNINGS = 5
"""Load warnings of one file kept in a results row; the rest are counted."""


class ModelCache:
    """The last Model loaded, kept while consecutive jobs use it (same path, size and mtime); loading
    another drops it first, so a worker holds one model at a time."""

    def __init__(self, option: str = loading.MANIFEST_NAMES["model"]):
        self._sig = None
        self._model = None
        self.option = option

    def get(self, path: str) -> Model:
        """The Model at ``path`` (an OptionError naming ``option`` unless it is one)."""
        st = os.stat(path)
        sig = (path, st.st_size, st.st_mtime_ns)
        if self._sig != sig:
            self._sig = self._model = None
            gc.collect()
            self._model = loading.load_as(path, Model, loading.MODEL_KINDS, self.option)
            self._sig = sig
        return self._model


class Worker:
    """What one worker process keeps between jobs: numba uses ``threads`` threads in it (workers ×
    threads ≤ cores; ``threads.limit_process``, before its first kernel) and a ``ModelCache``."""

    def __init__(self, threads: int):
        limit_process(threads)
        self.models = ModelCache()
        self.sources = ModelCache("source")

    def run(self, job, store) -> dict:
        return run_job(job, store, self.models, self.sources)


def one_line(e: BaseException) -> str:
    """An exception as the one line a results row reports."""
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    text = " ".join(str(e).split())
    return text if isinstance(e, MmdkitError) else f"{type(e).__name__}: {text}"


def _run(job, store, models: ModelCache, sources: ModelCache, warnings: list) -> tuple[list, int]:
    """Write every output of ``job`` (its Takes, one pass each) into its folder, then publish them."""
    warn = lambda msg: warnings.append(" ".join(str(msg).split()))  # noqa: E731
    model = models.get(job.model)
    loading.report_warnings(job.model, model.warnings, warn, SHOWN_WARNINGS)
    written = {}
    with store.job_folder(job.name) as folder:
        for take in job.takes(model, folder, sources.get(job.source) if job.source else None):
            paths = [o.path for o in take.outputs]
            with naming(", ".join(paths)):  # a write failing without a file name (a full disk) names them
                infos = run_take(take, warn=warn, shown=SHOWN_WARNINGS)
            for path, info in zip(paths, infos):
                written[os.path.basename(os.path.normpath(path))] = _written(folder, path, info)
        done = [written[f"{job.name}.{out}"] for out in job.outputs]
        store.publish(job.name, folder, [f for d in done for f in d["files"]])
    warnings[:] = dict.fromkeys(warnings)  # each Take loads the motion: its warnings once
    return done, max(d["frames"] for d in done)


def _written(folder: str, path: str, info: dict) -> dict:
    """An output written into ``folder``: its filename and size (an annotated render's folder: its
    keypoints.json, the dataset's index, stands for it), frames and every file to publish."""
    name = os.path.relpath(os.path.normpath(path), folder)
    files = [name]
    if os.path.isdir(path):
        files = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(path) for f in fs)
        name = os.path.join(name, "keypoints.json")
    return {"filename": name, "size": os.path.getsize(os.path.join(folder, name)),
            "frames": int(info.get("frames", 0)), "files": files}


def rss_mb() -> float:
    """This process's resident memory in MiB now (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def run_job(job, store, models: ModelCache | None = None, sources: ModelCache | None = None) -> dict:
    """Run ``job`` (the model from ``models``, its source model from ``sources``; default caches of
    its own); never raises for a job's own problem (a failed row names it on one line)."""
    t0, c0 = time.perf_counter(), time.process_time()
    warnings = []
    try:
        done, frames = _run(job, store, models or ModelCache(), sources or ModelCache("source"), warnings)
        seconds = time.perf_counter() - t0
        record = {"key": job.key, "name": job.name, "frames": frames, "seconds": round(seconds, 3),
                  "outputs": [{"filename": d["filename"], "size": d["size"]} for d in done]}
        store.write_record(job.name, record)
    except Exception as e:  # a job's failure (MemoryError included) is its row, never the batch's end
        return job_row(job, "failed", seconds=round(time.perf_counter() - t0, 3), warnings=warnings,
                       error=f"{one_line(e)}", pid=os.getpid(), rss_mb=round(rss_mb(), 1),
                       cpu_seconds=round(time.process_time() - c0, 3))
    return job_row(job, "ok", seconds=round(seconds, 3), frames=frames, warnings=warnings, pid=os.getpid(),
                   rss_mb=round(rss_mb(), 1), cpu_seconds=round(time.process_time() - c0, 3),
                   outputs=[{"path": store.location(job.name, d["filename"]), "size": d["size"]} for d in done])
