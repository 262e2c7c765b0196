"""Helpers several test modules share (plain functions; fixtures live in conftest.py).

``threejs_pose(path, times)``: three.js r187 in Node plays a BVH or glTF/GLB file once;
``wait_for(pred, timeout)``: polls ``pred`` until it holds or the time runs out;
``write_jsonl(path, entries)``: a JSONL manifest of dicts (as JSON) and strings (as they are);
``quad(mb, mat, z, bone)``: a 2×2 square facing the camera added to a ModelBuilder;
``demo_render(out, frames, **kw)``: the demo dance rendered small (32x24, no MSAA, no physics) into ``out``;
``uv_morph_quad(folder)``: a textured quad whose UV morph moves it from the red onto the blue half.
"""

from __future__ import annotations

import json
import os
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


def quad(mb, mat, z, color_bone):
    """A 2×2 square at depth ``z`` (MMD: the camera looks from −z), material ``mat``, bone ``color_bone``."""
    p = [[-1, -1, z], [1, -1, z], [1, 1, z], [-1, 1, z]]
    mb.add_mesh(mat, p, [[0, 0, -1]] * 4, [[0, 0]] * 4, [[0, 2, 1], [0, 3, 2]], [color_bone] * 4)


def demo_render(out, frames, **kw):
    """``render_motion`` of the demo dance into ``out`` at 32x24, no MSAA, no physics → its stats."""
    from mmdkit.demo import demo_model, demo_motion
    from mmdkit.render.pipeline import render_motion

    return render_motion(demo_model(), demo_motion(1.0), str(out), frames=frames, size=(32, 24), msaa=0,
                         physics=False, progress=False, **kw)


def uv_morph_quad(folder):
    """A one-quad PMX saved in ``folder`` and loaded back: texture rb.png (left half red, right half
    blue); UV (0.1..0.4, 0.1..0.9) shows red, its UV morph 'blue' shifts u by 0.5 onto blue."""
    import mmdkit
    from mmdkit.model.builder import ModelBuilder
    from PIL import Image

    Image.fromarray(np.concatenate([np.full((8, 8, 3), (230, 20, 20), np.uint8),
                                    np.full((8, 8, 3), (20, 20, 230), np.uint8)], axis=1)).save(Path(folder) / "rb.png")
    mb = ModelBuilder("uv")
    b = mb.add_bone("root", (0, 0, 0))
    mat = mb.add_material("m", diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), edge=False, double_sided=True,
                          texture="rb.png")
    p = [[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]]
    first = mb.add_mesh(mat, p, [[0, 0, -1]] * 4, [[0.1, 0.1], [0.4, 0.1], [0.4, 0.9], [0.1, 0.9]],
                        [[0, 2, 1], [0, 3, 2]], [b] * 4)
    mb.add_uv_morph("blue", np.arange(first, first + 4), [[0.5, 0, 0, 0]] * 4)
    mmdkit.save(mb.build(), Path(folder) / "uv.pmx")
    return mmdkit.load(Path(folder) / "uv.pmx")


def process_stat(pid: int):
    """(state, start time) of process ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], fields[19]


def descendants(pid: int) -> dict:
    """{pid: start time} of every process below ``pid`` now."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, ppid in parent.items():
            if ppid == p and child not in found and process_stat(child):
                found[child] = process_stat(child)[1]
                todo.append(child)
    return found
