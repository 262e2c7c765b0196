"""numba's threads, set up in one place: how they wait for work, and how many a piece of work uses.

In: the environment (what the user set wins). Out:

- on import (``mmdkit`` imports this module before any kernel module): numba prefers its OpenMP
  layer, and OpenMP's idle threads sleep at once (``OMP_WAIT_POLICY=PASSIVE``) where libgomp
  would spin 300,000 turns (milliseconds) first. A spinning thread holds its core: with another
  process busy on one of two cores, the numba thread that shares that core stalls each parallel
  kernel for a scheduler time slice while the other spins (Gene skinning 0.07 → ~7 ms/frame, ~100x).
  Asleep, a thread leaves its core free and the stalled work moves there: one busy core then
  costs ≤ ~1.2x (``benchmarks/bench_busy_core.py``); waking the sleeping thread costs ~0.015 ms
  per parallel kernel on an idle machine. libgomp reads the variable once, when numba starts its
  threads (the first parallel kernel, or ``numba.get/set_num_threads``): it is set here, before.
  numba's ``workqueue`` layer also sleeps, but aborts the process when two Python threads launch
  parallel kernels at once (mmdkit's skinner may be called from several threads).
- ``set_threads(count)``: how many numba threads the parallel kernels launched from the calling
  thread use (clamped to 1 … ``NUMBA_NUM_THREADS``); ``using_threads(count)`` for one block.
- ``limit_process(count)``: a worker process's share of the cores (a batch pool worker): the
  threads OpenMP and numba may start at all, and ``set_threads(count)`` for the calling thread.
- ``import_numba_without_blas_probe()``: numba's array maths imported without its ~0.35 s BLAS
  probe (the CLI calls it before a command that runs kernels).

The one place numba's thread counts are set: callers say how many, this module sets them.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

#: set unless the environment already says otherwise (read once, when numba's threads start)
ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE", "NUMBA_THREADING_LAYER_PRIORITY": "omp tbb workqueue"}


def configure() -> None:
    """Put each of ``ENVIRONMENT`` into ``os.environ`` where unset (numba, if imported already,
    is told the layer priority too: it read the environment at its import)."""
    for name, value in ENVIRONMENT.items():
        if name not in os.environ:
            os.environ[name] = value
            config = sys.modules.get("numba.core.config")
            if name == "NUMBA_THREADING_LAYER_PRIORITY" and config is not None:
                config.THREADING_LAYER_PRIORITY = value.split()


def set_threads(count: int) -> None:
    """numba threads for the parallel kernels this thread launches: ``count`` clamped to 1 … the
    threads numba started (``NUMBA_NUM_THREADS``, the cores by default)."""
    import numba

    numba.set_num_threads(max(1, min(int(count), numba.config.NUMBA_NUM_THREADS)))


def limit_process(count: int) -> None:
    """This process uses at most ``count`` threads for numba's kernels: ``OMP_NUM_THREADS`` (read
    when OpenMP starts its threads) and, where numba is not imported yet, ``NUMBA_NUM_THREADS``
    (numba refuses a new value once its threads run; then ``set_threads`` caps the use), then
    ``set_threads(count)`` for the calling thread. For a pool worker, before its first kernel."""
    count = max(1, int(count))
    os.environ["OMP_NUM_THREADS"] = str(count)
    if "numba" not in sys.modules:
        os.environ["NUMBA_NUM_THREADS"] = str(count)
    set_threads(count)


@contextmanager
def using_threads(count: int | None):
    """Run the block with ``count`` numba threads on this thread (None: leave as is), then restore."""
    import numba

    old = numba.get_num_threads()
    if count is not None:
        set_threads(count)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def import_numba_without_blas_probe() -> None:
    """Import numba's array maths with its BLAS probe answered 'none'. At import it probes for a
    BLAS by importing ``scipy.linalg`` where SciPy is installed: ~0.35 s of every command that
    runs a kernel. mmdkit's kernels call no BLAS routine (numba then lowers ``np.dot`` itself);
    ``scipy.linalg`` is blocked only during this import and imports normally afterwards."""
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    sys.modules["scipy.linalg"] = None  # the probe's import fails at once: no BLAS
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        del sys.modules["scipy.linalg"]


configure()
