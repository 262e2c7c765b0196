"""`mmdkit pose` as users run it: compressed output, physics default, binding report, quiet runs."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest



@pytest.fixture
def gene_dance(assets):
    return assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"


def test_pose_output_is_compressed_unless_asked(mmdkit_cli, gene_dance, tmp_path):
    sizes = {}
    for name, extra in (("packed", []), ("plain", ["--no-compress"])):
        out = tmp_path / f"{name}.npz"
        code, _, err = mmdkit_cli("pose", *gene_dance, "--frames", "0:4", "--no-physics", "--vertices",
                                  "-o", out, *extra)
        assert code == 0, err
        with zipfile.ZipFile(out) as z:
            kinds = {i.compress_type for i in z.infolist()}
        assert kinds == ({zipfile.ZIP_DEFLATED} if name == "packed" else {zipfile.ZIP_STORED})
        sizes[name] = out.stat().st_size
    a, b = np.load(tmp_path / "packed.npz"), np.load(tmp_path / "plain.npz")
    for k in ("frames", "bone_world", "morph_weight", "vertex_position"):
        np.testing.assert_array_equal(a[k], b[k])
    assert sizes["packed"] < 0.9 * sizes["plain"]


def test_physics_by_default_quiet_and_no_progress_runs_in_logs(gene_dance, tmp_path):
    """Physics is on by default (as in render); stderr that is not a terminal gets no progress bar."""
    import subprocess
    import sys

    runs = {}
    for name, extra in (("default", []), ("still", ["--no-physics", "-q"])):
        out = tmp_path / f"{name}.npz"
        r = subprocess.run([sys.executable, "-m", "mmdkit", "pose", *map(str, gene_dance), "--frames", "0:249",
                            "-o", str(out), *extra], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "\r" not in r.stderr and "posing" not in r.stderr
        runs[name] = (r, np.load(out)["bone_world"])
    assert "wrote" in runs["default"][0].stdout
    assert runs["still"][0].stdout == ""  # quiet: warnings only (wavefile is made for another model)
    assert all(x.startswith("mmdkit: warning: ") for x in runs["still"][0].stderr.splitlines())
    moved = np.abs(runs["default"][1][-1] - runs["still"][1][-1]).max(axis=(1, 2))
    assert (moved > 1e-2).sum() >= 10  # hair and skirt bones follow their rigid bodies


def test_compile_note_only_when_numba_compiles(capsys):
    from numba import njit

    from mmdkit.cli._common import compile_note

    @njit
    def one(x):
        return x + 1

    @njit
    def two(x):
        return x * 2

    with compile_note(quiet=False):
        one(1)
        two(1)
        one(2)  # compiled already: no event
    assert capsys.readouterr().err.count("compiling kernels (first run only") == 1
    with compile_note(quiet=False):
        one(3)
    with compile_note(quiet=True):
        two(2.5)  # a new signature compiles, but quietly
    assert capsys.readouterr().err == ""


def test_pose_says_how_the_motion_bound(mmdkit_cli, assets, tmp_path):
    gene_motion = assets / "gene" / "motion" / "01_happy.vmd"
    code, _, err = mmdkit_cli("pose", assets / "gene" / "Gene.pmx", gene_motion, "--frames", "0",
                              "--no-physics", "-o", tmp_path / "a.npz")
    assert code == 0 and "bound 222/222 bone tracks, 111/111 morph tracks" in err and "warning" not in err
    # a motion made for another model: a warning with the counts and the names that did not bind
    code, _, err = mmdkit_cli("pose", assets / "mokou" / "mokou_B.pmd", gene_motion, "--frames", "0",
                              "--no-physics", "-o", tmp_path / "b.npz")
    assert code == 0
    line = next(x for x in err.splitlines() if "not in the model" in x)  # one short line: counts only
    assert line.startswith("mmdkit: warning: ") and "01_happy.vmd" in line and len(line) < 220
    assert "152 motion bones and 96 motion morphs not in the model (list: -v" in line and "グルーブ" not in line
    code, _, err = mmdkit_cli("pose", assets / "mokou" / "mokou_B.pmd", gene_motion, "--frames", "0",
                              "--no-physics", "-v", "-o", tmp_path / "b.npz")  # -v: every name
    line = next(x for x in err.splitlines() if "not in the model" in x)
    assert "bound 70/222 bone tracks, 15/111 morph tracks; not in the model: bones グルーブ" in line
    assert line.count(", ") >= 152 + 96 - 2
    code, _, err = mmdkit_cli("pose", assets / "gene" / "Gene.pmx", gene_motion, "--frames", "0",
                              "--no-physics", "-q", "-o", tmp_path / "c.npz")
    assert code == 0 and err == ""
