"""Set-up and test-suite friction: setup.sh reinstalls only on change; no assets → skips with a hint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _installed_from_here() -> bool:
    import mmdkit

    return Path(mmdkit.__file__).resolve().parents[1] == REPO.resolve()


def test_setup_sh_skips_pip_when_installed_and_unchanged(tmp_path):
    log = tmp_path / "pip.log"
    fake = tmp_path / "python"  # runs everything but pip, which it only records
    fake.write_text(f'#!/bin/bash\nif [ "$1 $2" = "-m pip" ]; then echo "$@" >> "{log}"; exit 0; fi\n'
                    f'exec "{sys.executable}" "$@"\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "MMDKIT_SETUP_FORCE"}
    env.update(PYTHON=str(fake), MMDKIT_SETUP_STAMP=str(tmp_path / "stamp"))
    runs = [subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    pip_calls = log.read_text().splitlines()
    if _installed_from_here():
        assert len(pip_calls) == 1 and "install" in pip_calls[0] and " -e .[test" in pip_calls[0]  # no stamp: installs
        assert "skipping pip" in runs[1].stdout
    else:  # installed from elsewhere (or not at all): every run installs this checkout
        assert len(pip_calls) == 2
    assert (tmp_path / "stamp").read_text().strip()


def test_tests_needing_assets_skip_with_a_hint_when_assets_are_missing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["MMDKIT_ASSETS"] = str(tmp_path / "nowhere")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        "tests/test_formats_fuzz.py", "tests/test_cli_info.py"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"assets not found at {tmp_path / 'nowhere'}; set MMDKIT_ASSETS" in r.stdout
    assert "error" not in r.stdout.lower() and " skipped" in r.stdout
    env["CI"] = "1"  # on CI a missing asset folder is a failure, never a skip
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_cli_info.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "skipped" not in r.stdout
