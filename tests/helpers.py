"""Helpers several test modules share (plain functions; fixtures live in conftest.py).

``threejs_pose(path, times)``: three.js r187 in Node plays a BVH or glTF/GLB file once;
``wait_for(pred, timeout)``: polls ``pred`` until it holds or the time runs out;
``write_jsonl(path, entries)``: a JSONL manifest of dicts (as JSON) and strings (as they are).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

THREEJS = Path(__file__).resolve().parents[1] / "tools" / "threejs"


def threejs_pose(path, times) -> dict:
    """tools/threejs/pose.mjs in Node (BVHLoader or GLTFLoader by suffix, then AnimationMixer) at
    ``times`` (seconds) → {names, nodes (glTF node indices, glTF only), position (T, J, 3) world}."""
    assert shutil.which("node"), "node is missing: apt-get install nodejs npm (scripts/setup.sh)"
    assert (THREEJS / "node_modules" / "three").is_dir(), \
        "three.js is not installed: npm ci --prefix tools/threejs (scripts/setup.sh)"
    run = subprocess.run(["node", str(THREEJS / "pose.mjs"), str(path), ",".join(f"{t:.9g}" for t in times)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    out["position"] = np.asarray(out["position"], np.float64)
    return out


def wait_for(pred, timeout: float = 240.0) -> bool:
    """True as soon as ``pred()`` holds (polled every 50 ms), False after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def write_jsonl(path, entries):
    """``entries`` (dicts written as JSON, strings as they are), one a line → ``path``; returns ``path``."""
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return path
