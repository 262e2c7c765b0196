"""--frames bounded by memory, and out-of-memory lines that blame what caused them (issue #23)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

ADDRESS_SPACE = 8 * 2**30  # ulimit -v for the child: enough to start, far from 3 million frames
#: few threads in the child: thread stacks and BLAS buffers count against ulimit -v on many-core machines
FEW_THREADS = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="2")


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@pytest.mark.parametrize("output", ["p.npz", "p.glb"])
def test_millions_of_frames_are_refused_by_their_memory_estimate(assets, tmp_path, output):
    """3 million frames of an 83-bone model: ~15 GiB of pose arrays (more to export) — refused before
    posing, naming --frames and the estimate, not tried until the allocation fails."""
    command = "pose" if output.endswith(".npz") else "export"
    r = subprocess.run([sys.executable, "-m", "mmdkit", command, str(assets / "low_miku" / "miku.pmd"),
                        str(assets / "wavefile" / "wavefile_v2.vmd"), "--frames", "0:3000000", "--no-physics", "-q",
                        "-o", str(tmp_path / output)], capture_output=True, text=True, preexec_fn=_limited,
                       env=FEW_THREADS, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "warning" not in ln]
    assert len(lines) == 1 and lines[0].startswith("mmdkit: error: --frames: '0:3000000' selects 3,000,001 frames")
    assert "bytes a frame" in lines[0] and "GiB of memory this run may use" in lines[0]
    assert f"{command} fewer frames per run (at most " in lines[0]
    assert not list(tmp_path.iterdir())


def test_the_estimate_follows_the_memory_available(monkeypatch):
    from mmdkit.cli import _memory
    from mmdkit.errors import OptionError

    monkeypatch.setattr(_memory, "available_bytes", lambda: 2 * 2**30)
    _memory.check_frames_memory("0:99", 100, 2**20, "1 bone", "pose")  # 100 MiB of a 1 GiB budget
    with pytest.raises(OptionError, match=r"selects 2,000 frames .* about 2.0 GiB, more than the 1.0 GiB .* "
                                          r"\(at most 1,024\)"):
        _memory.check_frames_memory("0:1999", 2000, 2**20, "1 bone", "pose")


def test_available_bytes_honours_ulimit_v():
    code = ("import resource; from mmdkit.cli._memory import available_bytes; "
            "print(available_bytes())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=_limited,
                       env=FEW_THREADS)
    assert r.returncode == 0, r.stderr
    assert 0 < int(r.stdout) < ADDRESS_SPACE


def test_out_of_memory_reading_a_file_names_the_file(mmdkit_cli, assets, tmp_path, monkeypatch):
    import mmdkit.formats.io as io

    def exhausted(path):
        raise MemoryError

    monkeypatch.setattr(io, "read_bytes", exhausted)
    motion = assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = mmdkit_cli("pose", assets / "low_miku" / "miku.pmd", motion, "-o", tmp_path / "p.npz")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"mmdkit: error: {assets / 'low_miku' / 'miku.pmd'}: out of memory while reading this")
    assert "--frames" not in err and "--size" not in err


def test_out_of_memory_while_posing_names_the_frames(mmdkit_cli, assets, tmp_path, monkeypatch):
    import mmdkit.cli.pose

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(mmdkit.cli.pose, "run", exhausted)  # the frame loop runs out of memory
    model, motion = assets / "low_miku" / "miku.pmd", assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = mmdkit_cli("pose", model, motion, "--frames", "0:10", "-q", "-o", tmp_path / "p.npz")
    errors = [ln for ln in err.splitlines() if "warning" not in ln]
    assert code == 2 and len(errors) == 1 and "miku.pmd" in errors[0]
    assert errors[0].startswith("mmdkit: error: --frames: out of memory posing '0:10' (11 frames of ")
    assert errors[0].endswith("; pose fewer frames per run") and "--size" not in err
