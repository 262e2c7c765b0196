"""Shared test fixtures: where the real assets live (../shared/assets beside the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("MMDKIT_ASSETS", REPO.parent / "shared" / "assets"))


@pytest.fixture(scope="session")
def assets() -> Path:
    """The folder of real test files (Gene, Mei, wavefile, fixtures, ...)."""
    if not (ASSETS / "gene").is_dir():
        raise RuntimeError(f"test assets not found at {ASSETS}; set MMDKIT_ASSETS")
    return ASSETS
