"""Stopping the command line: SIGTERM unwinds like Ctrl-C, so no temp file is left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from helpers import wait_for


def test_sigterm_mid_render_leaves_no_temp_file(tmp_path):
    out = tmp_path / "d.mp4"
    proc = subprocess.Popen([sys.executable, "-m", "mmdkit", "render", "--demo", "--frames", "0:5000", "--size",
                             "64x48", "--msaa", "0", "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert wait_for(lambda: any(p.name.endswith(".part") for p in tmp_path.iterdir())), "no temp file appeared"
        time.sleep(0.5)  # frames are being encoded into the temp file
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_sigterm_mid_pose_stops_promptly_and_writes_nothing(assets, tmp_path):
    out = tmp_path / "p.npz"
    proc = subprocess.Popen([sys.executable, "-m", "mmdkit", "pose", str(assets / "gene" / "Gene.pmx"),
                             str(assets / "wavefile" / "wavefile_v2.vmd"), "--frames", "0:", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "not in the model" in proc.stderr.readline()  # loaded and bound (some tracks not): posing now
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        stopped_in = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert stopped_in < 10 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_sigterm_inside_a_finalizer_still_stops():
    """A SIGTERM that lands while a ``__del__`` runs (a GL object collected mid-render) must not be
    lost: Python drops an exception raised in a finalizer, so the handler tries again after it."""
    script = """
import os, signal
from mmdkit import cli

class Collected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(200000):  # the handler runs here, inside the finalizer
            pass

signal.signal(signal.SIGTERM, cli._on_sigterm)
try:
    Collected()
    for _ in range(10 ** 9):
        pass
    print("not stopped")
except cli._Terminated as e:
    print("stopped", e.code)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "stopped 143", run.stdout + run.stderr
