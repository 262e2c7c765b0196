"""Command-line options as a user types them: one ``--frames`` grammar, one-line errors, no tracebacks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mmdkit.cli import main
from mmdkit.cli._common import MAX_FRAMES, parse_frames
from mmdkit.errors import OptionError


def run_cli(capsys, *args):
    """``mmdkit ARGS`` in this process → (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    assert err.startswith("mmdkit: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def test_frames_grammar():
    assert list(parse_frames("0:20:5", 99)) == [0, 5, 10, 15, 20]
    assert list(parse_frames("3:", 5)) == [3, 4, 5]  # empty B = the motion's last key frame
    assert list(parse_frames(":2", 5)) == [0, 1, 2]
    assert list(parse_frames("7", 99)) == [7]  # a bare N is one frame ...
    assert list(parse_frames("7", 99, bare_count=True)) == list(range(7))  # ... except in bench: N frames
    assert list(parse_frames("+3", 99)) == [0, 1, 2]  # A+N: N frames from A, in every subcommand
    assert list(parse_frames("10+3", 99)) == [10, 11, 12]
    assert list(parse_frames("1e+2", 99)) == [100]  # an exponent is not a count
    assert list(parse_frames("0:1:0.5", 99)) == [0, 0.5, 1]
    assert len(parse_frames(f"0:{MAX_FRAMES - 1}", 0)) == MAX_FRAMES


@pytest.mark.parametrize("spec, needle", [
    ("nan:3", "finite"), ("0:inf", "finite"), ("inf", "finite"), ("0:1000000000", "at most 10,000,000"),
    ("0:10:1e-9", "at most 10,000,000"), ("0:10:0", "step must be > 0"), ("0:10:-1", "step must be > 0"),
    ("5:1", "before the start"), ("-3:4", "start at 0"), ("a:b", "not a number"), ("1:2:3:4", "A:B[:STEP]"),
    ("+0", "selects no frames"), ("2+x", "whole number"),
])
def test_bad_frames_are_option_errors(spec, needle):
    with pytest.raises(OptionError, match="--frames") as e:
        parse_frames(spec, 100)
    assert needle in str(e.value) and spec in str(e.value) and "\n" not in str(e.value)


def test_bad_frames_on_the_command_line(capsys, assets, tmp_path):
    gene, dance = assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    for spec in ("nan:3", "0:inf", "0:1000000000", "0:10:1e-9"):
        code, _, err = run_cli(capsys, "pose", gene, dance, "--frames", spec, "-o", tmp_path / "p.npz")
        assert_one_line_error(code, err, "--frames", spec)
    code, _, err = run_cli(capsys, "bench", gene, dance, "--frames", "0")
    assert_one_line_error(code, err, "--frames", "selects no frames")
    assert not list(tmp_path.iterdir())


def test_bench_takes_the_common_frames_grammar(capsys, assets):
    gene, dance = assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    for spec, count in (("100:104", 5), ("4", 4), ("50+3", 3)):
        code, out, err = run_cli(capsys, "bench", gene, dance, "--frames", spec, "--no-physics",
                                 "--no-skinning", "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["frames"] == count and np.isfinite(d["total"]) and d["total"] > 0


def test_wrong_kind_of_file_names_the_argument(capsys, assets, tmp_path):
    dance = assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = run_cli(capsys, "pose", dance, dance, "-o", tmp_path / "p.npz")
    assert_one_line_error(code, err, "MODEL", "wavefile_v2.vmd is a Motion")
    code, _, err = run_cli(capsys, "pose", assets / "gene" / "Gene.pmx", assets / "gene" / "Gene.pmx",
                           "-o", tmp_path / "p.npz")
    assert_one_line_error(code, err, "MOTION", "is a Model")


def test_output_in_a_missing_folder_names_the_path_typed(capsys, assets, tmp_path):
    out = tmp_path / "no" / "such" / "p.npz"
    code, _, err = run_cli(capsys, "pose", assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd",
                           "--frames", "0", "-o", out)
    assert_one_line_error(code, err, str(out), "does not exist")
    assert ".part" not in err
