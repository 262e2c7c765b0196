"""Shared test fixtures: where the real assets live (../shared/assets beside the repo).

Without the assets, tests that need them are skipped with a hint (``assets not found at …;
set MMDKIT_ASSETS``) — both those using the ``assets`` fixture and modules that read assets
while being imported. On CI (``CI`` set in the environment) a missing folder fails instead,
so nothing is ever skipped there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

# Tests that stop a child with SIGINT need the child to take it. A shell that runs this suite as a
# background job starts it with SIGINT ignored, and children inherit an ignored signal (a caught
# one is reset to the default at exec): catch it here, so every child starts with the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("MMDKIT_ASSETS", REPO.parent / "shared" / "assets"))
ASSETS_FOUND = (ASSETS / "gene").is_dir()
HINT = f"assets not found at {ASSETS}; set MMDKIT_ASSETS"

#: How closely two different code paths (kernels compiled apart: fused vs per stage, batch vs frame
#: by frame, serial vs parallel skinning) agree on the same float quantity, on any x86-64 CPU
#: (AVX2, AVX-512, NUMBA_CPU_NAME=generic): 1e-5 of the values' size. Each path may round
#: differently (float32: 6e-8 a step; fastmath kernels reorder sums and contract to FMA; an IK
#: angle's acos near 1 turns a rounding into about its square root), while a wrong frame, stage,
#: bone or weight is off by 1e-3 or more. Only the very same code run twice is compared bit for bit.
PATHS_RTOL = 1e-5


def _missing() -> None:
    if os.environ.get("CI"):
        pytest.fail(HINT, pytrace=False)
    pytest.skip(HINT)


@pytest.fixture(scope="session")
def assets() -> Path:
    """The folder of real test files (Gene, Mei, wavefile, fixtures, ...)."""
    if not ASSETS_FOUND:
        _missing()
    return ASSETS


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test module that fails to import because it reads missing assets is skipped with the hint."""
    outcome = yield
    rep = outcome.get_result()
    if (rep.failed and not ASSETS_FOUND and not os.environ.get("CI") and isinstance(collector, pytest.Module)
            and str(ASSETS) in str(rep.longrepr)):
        rep.outcome = "skipped"
        rep.longrepr = (str(collector.path), 0, f"Skipped: {HINT}")


@pytest.fixture
def mmdkit_cli(capsys):
    """``mmdkit_cli(*args)`` runs ``mmdkit ARGS`` in this process → (exit code, stdout, stderr)."""
    from mmdkit.cli import main

    def run(*args):
        with pytest.raises(SystemExit) as e:
            main([str(a) for a in args])
        out = capsys.readouterr()
        return e.value.code, out.out, out.err

    return run


def _paths_agree(got, want, err_msg=""):
    got, want = np.asarray(got), np.asarray(want)
    if not (np.issubdtype(want.dtype, np.floating) or np.issubdtype(got.dtype, np.floating)):
        np.testing.assert_array_equal(got, want, err_msg=err_msg)  # flags, indices: no rounding
        return
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=0, atol=PATHS_RTOL * scale, err_msg=err_msg)


@pytest.fixture(scope="session")
def paths_agree():
    """``paths_agree(got, want, err_msg="")``: the same quantity from two different code paths
    agrees to ``PATHS_RTOL`` of its size (integers exactly; NaN where the other has NaN)."""
    return _paths_agree


@pytest.fixture(scope="module")
def ctx():
    """A headless OpenGL context for the renderer tests of one module."""
    from mmdkit.render.gl import create_context

    c = create_context()
    yield c
    c.release()


@pytest.fixture(scope="module")
def gene(assets):
    """Gene.pmx, loaded once per test module (a module's own ``gene`` fixture takes precedence)."""
    from mmdkit import load

    return load(assets / "gene" / "Gene.pmx")


@pytest.fixture(scope="module")
def dance(assets):
    """wavefile_v2.vmd, loaded once per test module."""
    from mmdkit import load

    return load(assets / "wavefile" / "wavefile_v2.vmd")
