"""The README's Python block runs as written (a new user copies it first) and writes what it says."""

import re
from pathlib import Path

import numpy as np

import mmdkit

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_block_runs(tmp_path, monkeypatch):
    block = re.search(r"## Python\n\n```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(block, str(README), "exec"), scope)
    assert np.isfinite(scope["positions"]).all() and np.abs(scope["positions"]).max() > 0
    assert scope["arrays"]["bone_world"].shape[0] == 120
    assert mmdkit.load(tmp_path / "demo.pmx").num_bones == scope["model"].num_bones
    assert (tmp_path / "demo.glb").read_bytes()[:4] == b"glTF"
