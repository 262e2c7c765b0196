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
