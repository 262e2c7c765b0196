"""The package imports and the CLI answers --help."""

import subprocess
import sys

import mmdkit


def test_public_names():
    assert callable(mmdkit.load) and callable(mmdkit.save)
    err = mmdkit.FormatError("bad count", path="x.pmx", section="vertices", offset=12)
    assert str(err) == "x.pmx, section 'vertices', byte 12: bad count"


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "mmdkit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Usage" in out.stdout


def test_numba_threads_sleep_while_they_wait():
    """A fresh process that imports mmdkit's kernels runs numba on OpenMP whose idle threads sleep
    at once (libgomp's own report of its settings: spin count 0, where it spins 300,000 turns by
    default): with another process busy on one core, skinning then costs ~1.3x, not ~100x
    (benchmarks/bench_busy_core.py). What the user set in the environment wins."""
    import os

    code = "import numba, mmdkit.skinning.cpu\nnumba.get_num_threads()\nprint(numba.threading_layer())\n"
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OMP_", "GOMP_", "NUMBA_THREADING_LAYER", "NUMBA_NUM_THREADS"))}
    seen = {}
    for name, extra in (("mmdkit", {}), ("user", {"OMP_WAIT_POLICY": "ACTIVE"})):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env={**clean, **extra, "OMP_DISPLAY_ENV": "VERBOSE"})
        assert r.returncode == 0, r.stderr
        spin = [line.split("=")[1].strip(" '") for line in r.stderr.splitlines() if "GOMP_SPINCOUNT" in line]
        seen[name] = (r.stdout.strip(), spin)
    assert seen["mmdkit"] == ("omp", ["0"])
    assert seen["user"][0] == "omp" and int(seen["user"][1][0]) > 300_000
