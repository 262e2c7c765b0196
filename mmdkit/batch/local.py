"""The local executor: a process pool (forkserver/spawn workers, never fork) running planned jobs.

In: planned jobs (ordered by model), the ``Store``, the number of workers. Out: one results row per
job, handed to ``on_row`` as each finishes. Each worker runs numba with cores // workers threads and
keeps one model loaded (see ``worker``). A worker that dies (killed, crashed) breaks the pool: the
jobs it was running are charged an attempt and everything unfinished runs again in a new pool; a job
whose worker died ``retries`` + 1 times fails with a one-line error; every row says in ``attempts``
how many times its job was started. Ctrl-C stops the workers (their temporary files are removed),
hands on the rows of jobs already finished, and re-raises. Each worker watches the driver: when the
driver dies (even killed with SIGKILL) the workers stop within about a second, and with them the
forkserver and resource tracker, which live only as long as some worker does.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from mmdkit.batch import worker
from mmdkit.batch.plan import job_row

_started = None
"""This worker's queue of the job names it starts (set by ``_init``)."""
_worker = None
"""This process's ``worker.Worker`` (its numba threads, its model cache), made by ``_init``."""
_stopping = threading.Event()
"""Set in a worker told to stop (SIGTERM, or its driver gone): it starts no other job."""
_orphaned = threading.Event()
"""Set when the driver is gone: the worker exits as soon as no job runs."""
_busy = threading.Event()
"""Set while a job runs."""


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _terminated(signum, frame):
    _stopping.set()  # the job running now unwinds; a queued one must not start after it
    raise SystemExit(128 + signum)


def _watch(driver: int, poll: float = 1.0) -> None:
    """Until the ``driver`` process ends (a pidfd turns readable; where there is none, the PID is polled);
    then stop this worker: SIGTERM unwinds the running job (its temporary files go) and the worker
    exits as soon as no job runs (at most 5 s later, whatever the job is doing)."""
    try:
        fd = os.pidfd_open(driver)
    except ProcessLookupError:
        fd = None  # gone already
    except (AttributeError, OSError):  # no pidfds (not Linux >= 5.3): poll the PID
        fd = -1
    if fd is not None and fd >= 0:
        select.select([fd], [], [])
    elif fd == -1:
        while _alive(driver):
            threading.Event().wait(poll)
    _orphaned.set()
    os.kill(os.getpid(), signal.SIGTERM)
    end = time.monotonic() + 5.0
    while _busy.is_set() and time.monotonic() < end:  # the running job unwinds (its temporary files go)
        threading.Event().wait(0.02)
    os._exit(128 + signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _init(threads: int, started, driver: int) -> None:
    global _started, _worker
    _started = started
    threading.Thread(target=_watch, args=(driver,), name="mmdkit-driver-watch", daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides; it terminates us on Ctrl-C
    signal.signal(signal.SIGTERM, _terminated)  # unwinds through atomic writers: no temp files left
    # numba (and OpenMP) sized like Ray does for a task: no idle threads on the cores the other workers need
    _worker = worker.Worker(threads)


def _run(job, store) -> dict:
    if _orphaned.is_set():  # nobody to hand a row to
        os._exit(128 + signal.SIGTERM)
    if _stopping.is_set():  # a job queued before the worker was told to stop: not started
        raise SystemExit(128 + signal.SIGTERM)
    _busy.set()
    try:
        _started.put(job.name)
        return _worker.run(job, store)
    finally:
        _busy.clear()


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
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=(threads, started, os.getpid()))
    futures, handed = {}, set()
    try:
        futures = {pool.submit(_run, j, store): j for j in jobs}
        for fut in as_completed(futures):
            handed.add(fut)
            try:
                on_row(fut.result())
            except BrokenProcessPool:
                left.append(futures[fut])
    except BaseException:
        for fut in futures:  # finished before the interrupt, not yet handed on
            if fut not in handed and fut.done() and not fut.cancelled() and fut.exception() is None:
                on_row(fut.result())
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

    def counted(row):
        on_row(dict(row, attempts=attempts.get(row["name"], 0) + 1))

    while pending:
        left, started = _round(pending, store, workers, threads, counted)
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
