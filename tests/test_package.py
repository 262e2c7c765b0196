"""The package imports and the CLI answers --help."""

import subprocess
import sys

import mmdkit


def test_public_names():
    assert callable(mmdkit.load) and callable(mmdkit.save)
    err = mmdkit.FormatError("bad count", path="x.pmx", section="vertices", offset=12)
    assert str(err) == "x.pmx, section 'vertices', byte 12: bad count"


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "mmdkit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Usage" in out.stdout
