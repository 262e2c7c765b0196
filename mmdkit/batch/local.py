"""The local executor: a process pool (forkserver/spawn workers, never fork) running planned jobs.

In: planned jobs (ordered by model), the ``Store``, the number of workers. Out: one results row per
job, handed to ``on_row`` as each finishes. Each worker runs numba with cores // workers threads and
keeps one model loaded (see ``worker``). A worker that dies (killed, crashed) breaks the pool: the
jobs it was running are charged an attempt and everything unfinished runs again in a new pool; a job
whose worker died ``retries`` + 1 times fails with a one-line error. Ctrl-C stops the workers
(their temporary files are removed) and re-raises.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from mmdkit.batch import worker
from mmdkit.batch.plan import job_row

_started = None


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def _init(threads: int, started) -> None:
    global _started
    _started = started
    # OpenMP (numba's threading layer) sized like Ray does for a task: no idle threads spinning on
    # the cores the other workers need. Read when the layer starts, on the first parallel kernel.
    os.environ["OMP_NUM_THREADS"] = os.environ["NUMBA_NUM_THREADS"] = str(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides; it terminates us on Ctrl-C
    signal.signal(signal.SIGTERM, _terminated)  # unwinds through atomic writers: no temp files left
    worker.init_worker(threads)


def _run(job, store) -> dict:
    _started.put(job.name)
    return worker.run_job(job, store)


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _stop(pool) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())  # shutdown forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        p.terminate()
    for p in processes:
        p.join(10)


def _round(jobs, store, workers: int, threads: int, on_row) -> tuple[list, set]:
    """Run ``jobs`` in one pool; returns (jobs left unfinished by a broken pool, names started)."""
    ctx = _context()
    started = ctx.SimpleQueue()
    left = []
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=(threads, started))
    try:
        futures = {pool.submit(_run, j, store): j for j in jobs}
        for fut in as_completed(futures):
            try:
                on_row(fut.result())
            except BrokenProcessPool:
                left.append(futures[fut])
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    names = set()
    while not started.empty():
        names.add(started.get())
    return left, names


def run_local(jobs, store, on_row, *, workers: int | None = None, threads: int | None = None,
              retries: int = 2) -> None:
    """Run ``jobs`` on ``workers`` processes (default: the cores) with ``threads`` numba threads each
    (default: cores // workers), calling ``on_row`` per job."""
    workers = max(1, min(workers or cores(), len(jobs) or 1))
    threads = threads or max(1, cores() // workers)
    attempts = {}
    pending = list(jobs)
    while pending:
        left, started = _round(pending, store, workers, threads, on_row)
        pending = []
        suspects = {j.name for j in left if j.name in started} or {j.name for j in left}
        for job in left:
            if job.name in suspects:  # it was running when its worker died
                attempts[job.name] = attempts.get(job.name, 0) + 1
                if attempts[job.name] > retries:
                    on_row(job_row(job, "failed", attempts=attempts[job.name],
                                   error=f"{job.where}: its worker process died {attempts[job.name]} times "
                                         f"(killed, out of memory or crashed)"))
                    continue
            pending.append(job)
