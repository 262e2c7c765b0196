"""A small seeded run of tools/fuzz_importers.py on the glTF reader: 100 mutated copies of the real
glTF/GLB/VRM files, each loaded and posed in a child with a 2 GiB address-space limit, all either
loaded or refused on one line — no traceback, hang, crash, NaN output or runaway memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_seeded_fuzz_run_finds_nothing(assets, tmp_path):
    env = dict(os.environ, MMDKIT_ASSETS=str(assets))
    r = subprocess.run([sys.executable, str(REPO / "tools" / "fuzz_importers.py"), "--format", "gltf", "--cases", "100",
                        "--seed", "11", "--timeout", "60", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=900)
    total = [line.split()[3:] for line in r.stdout.splitlines() if line.startswith("total (100 cases)")]
    assert r.returncode == 0 and total, r.stdout[-3000:] + r.stderr[-3000:]
    ok, error, *failures = map(int, total[0])
    assert ok + error == 100 and not any(failures), r.stdout[-3000:]
    assert ok >= 10 and error >= 10  # the mutations both keep files loadable and break them
    assert (tmp_path / "results.jsonl").read_text().count("\n") == 100
