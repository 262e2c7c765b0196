"""Shared test fixtures: where the real assets live (../shared/assets beside the repo).

Without the assets, tests that need them are skipped with a hint (``assets not found at …;
set MMDKIT_ASSETS``) — both those using the ``assets`` fixture and modules that read assets
while being imported. On CI (``CI`` set in the environment) a missing folder fails instead,
so nothing is ever skipped there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("MMDKIT_ASSETS", REPO.parent / "shared" / "assets"))
ASSETS_FOUND = (ASSETS / "gene").is_dir()
HINT = f"assets not found at {ASSETS}; set MMDKIT_ASSETS"


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
