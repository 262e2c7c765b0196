"""mmdkit.threads: the one place numba's thread counts are set."""

import os
import subprocess
import sys


def test_limit_process_caps_the_threads_a_worker_starts_and_uses():
    """A pool worker's share of the cores: OpenMP and numba start at most that many threads
    (importing mmdkit.threads does not start numba) and the worker's kernels use them."""
    code = ("import os, sys\n"
            "import mmdkit.threads as t\n"
            "fresh = 'numba' not in sys.modules\n"
            "t.limit_process(1)\n"
            "import numba\n"
            "print(fresh, os.environ['OMP_NUM_THREADS'], numba.config.NUMBA_NUM_THREADS, numba.get_num_threads())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "1", "1", "1"], run.stdout
