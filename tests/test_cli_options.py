"""Command-line options as a user types them: one ``--frames`` grammar, one-line errors, no tracebacks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mmdkit.animation.frames import MAX_FRAMES, parse_frames
from mmdkit.errors import OptionError


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


def test_bad_frames_on_the_command_line(mmdkit_cli, assets, tmp_path):
    gene, dance = assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    for spec in ("nan:3", "0:inf", "0:1000000000", "0:10:1e-9"):
        code, _, err = mmdkit_cli("pose", gene, dance, "--frames", spec, "-o", tmp_path / "p.npz")
        assert_one_line_error(code, err, "--frames", spec)
    code, _, err = mmdkit_cli("bench", gene, dance, "--frames", "0")
    assert_one_line_error(code, err, "--frames", "selects no frames")
    assert not list(tmp_path.iterdir())


def test_bench_takes_the_common_frames_grammar(mmdkit_cli, assets):
    gene, dance = assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    for spec, count in (("100:104", 5), ("4", 4), ("50+3", 3)):
        code, out, err = mmdkit_cli("bench", gene, dance, "--frames", spec, "--no-physics",
                                    "--no-skinning", "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["frames"] == count and np.isfinite(d["total"]) and d["total"] > 0


def test_wrong_kind_of_file_names_the_argument(mmdkit_cli, assets, tmp_path):
    dance = assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = mmdkit_cli("pose", dance, dance, "-o", tmp_path / "p.npz")
    assert_one_line_error(code, err, "MODEL", "wavefile_v2.vmd is a Motion")
    code, _, err = mmdkit_cli("pose", assets / "gene" / "Gene.pmx", assets / "gene" / "Gene.pmx",
                              "-o", tmp_path / "p.npz")
    assert_one_line_error(code, err, "MOTION", "is a Model")


def test_output_in_a_missing_folder_names_the_path_typed(mmdkit_cli, assets, tmp_path):
    out = tmp_path / "no" / "such" / "p.npz"
    code, _, err = mmdkit_cli("pose", assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd",
                              "--frames", "0", "-o", out)
    assert_one_line_error(code, err, str(out), "does not exist")
    assert ".part" not in err


def _wav(path, seconds=0.5, rate=8000):
    import wave

    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return path


@pytest.mark.parametrize("args, needles", [
    (["--msaa", "3"], ["--msaa: 3 samples cannot be done"]),
    (["--msaa", "-4"], ["--msaa: -4 samples cannot be done"]),
    (["--fps", "-5"], ["--fps", "got -5"]), (["--fps", "nan"], ["--fps", "got nan"]),
    (["--fps", "0"], ["--fps", "got 0"]), (["--fps", "inf"], ["--fps"]),
    (["--palette", "0"], ["--palette", "got 0"]), (["--crowd", "100000"], ["--crowd", "from 1 to 100", "100000"]),
    (["--crowd", "0"], ["--crowd", "got 0"]), (["--size", "10x10"], ["--size", "10x10"]),
])
def test_render_options_out_of_range_are_one_line_errors(mmdkit_cli, tmp_path, args, needles):
    code, _, err = mmdkit_cli("render", "--demo", "--frames", "0", *args, "-o", tmp_path / "d.mp4")
    assert_one_line_error(code, err, *needles)
    assert not list(tmp_path.iterdir())


def test_render_frames_follow_fps_in_real_time():
    """render's --frames without a STEP are 30/fps motion frames apart (a 60 fps video samples
    between keys); an explicit STEP is kept."""
    assert list(parse_frames("0:2", 99, default_step=30 / 60)) == [0, 0.5, 1, 1.5, 2]
    assert list(parse_frames("10+3", 99, default_step=30 / 60)) == [10, 10.5, 11]
    assert list(parse_frames("0:10:5", 99, default_step=30 / 60)) == [0, 5, 10]
    assert list(parse_frames("0:11:4", 99)) == [0, 4, 8]  # never past the end


def test_render_demo_with_a_model_is_refused(mmdkit_cli, assets, tmp_path):
    gene = assets / "gene" / "Gene.pmx"
    code, _, err = mmdkit_cli("render", "--demo", gene, assets / "wavefile" / "wavefile_v2.vmd",
                              "-o", tmp_path / "d.mp4")
    assert_one_line_error(code, err, "--demo", "Gene.pmx")


def test_render_audio_must_be_audio_and_go_into_a_video(mmdkit_cli, assets, tmp_path):
    not_audio = tmp_path / "notes.txt"
    not_audio.write_text("not a sound\n")
    code, _, err = mmdkit_cli("render", "--demo", "--audio", not_audio, "-o", tmp_path / "d.mp4")
    assert_one_line_error(code, err, "--audio: ", "notes.txt", "not an audio file")
    song = _wav(tmp_path / "song.wav")
    code, _, err = mmdkit_cli("render", "--demo", "--audio", song, "-o", tmp_path / "frames")
    assert_one_line_error(code, err, "--audio: ", "frames", "sound needs a video output")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "song.wav"]


def test_write_errors_name_the_path_typed_not_the_temp_file(mmdkit_cli, assets, tmp_path):
    from mmdkit.cli._output import writing

    with pytest.raises(OptionError, match="out.mp4: No space left") as e:
        with writing("out.mp4"):
            raise OSError(28, "No space left on device", str(tmp_path / ".out.mp4.k2j4.mp4.part"))
    assert ".part" not in str(e.value)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = mmdkit_cli("render", "--demo", "--frames", "0", "-o", blocker / "frames")
    assert_one_line_error(code, err, str(blocker / "frames"), "not a folder")


def test_an_output_that_is_an_input_is_refused(mmdkit_cli, assets, tmp_path):
    import os
    import shutil

    model = tmp_path / "Gene.pmx"
    shutil.copy(assets / "gene" / "Gene.pmx", model)
    dance = tmp_path / "dance.vmd"
    shutil.copy(assets / "wavefile" / "wavefile_v2.vmd", dance)
    os.symlink(model, tmp_path / "link.pmx")
    before = {p.name: p.read_bytes() for p in (model, dance)}
    for out in (model, tmp_path / "link.pmx", tmp_path / "sub" / ".." / "dance.vmd"):
        code, _, err = mmdkit_cli("pose", model, dance, "--frames", "0", "-o", out)
        assert_one_line_error(code, err, "-o", "is the input file")
    code, _, err = mmdkit_cli("convert", dance, dance)
    assert_one_line_error(code, err, "DST", "is the input file")
    code, _, err = mmdkit_cli("render", model, dance, "--frames", "0", "-o", dance)
    assert_one_line_error(code, err, "-o", "is the input file")
    assert {p.name: p.read_bytes() for p in (model, dance)} == before


def test_render_logs_get_no_progress_runs_and_quiet_says_nothing(tmp_path):
    import subprocess
    import sys

    for extra in ([], ["--quiet"]):
        r = subprocess.run([sys.executable, "-m", "mmdkit", "render", "--demo", "--frames", "0:5", "--size", "64x48",
                            "--msaa", "0", "-o", str(tmp_path / "d.mp4"), *extra], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert "\r" not in r.stderr and "rendering" not in r.stderr
        assert ("wrote" in r.stdout) != bool(extra)


def test_render_warns_when_the_camera_file_has_no_camera_keys(tmp_path):
    """A dance .vmd given as --camera: a warning, then the automatic camera (not an error)."""
    import subprocess
    import sys

    import mmdkit
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.demo import demo_model

    mmdkit.save(demo_model(), tmp_path / "demo.pmx")
    mb = MotionBuilder(model_name="demo")
    mb.add_bone_key("頭", 0)
    mmdkit.save(mb.build(), tmp_path / "dance.vmd")
    r = subprocess.run([sys.executable, "-m", "mmdkit", "render", str(tmp_path / "demo.pmx"),
                        str(tmp_path / "dance.vmd"), "--camera", str(tmp_path / "dance.vmd"), "--frames", "0",
                        "--size", "64x48", "--msaa", "0", "--no-physics", "-o", str(tmp_path / "f")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "mmdkit: warning: --camera" in r.stderr and "dance.vmd has no camera keys" in r.stderr


def test_render_at_60_fps_samples_between_keys(mmdkit_cli, tmp_path):
    out = tmp_path / "frames"
    code, _, err = mmdkit_cli("render", "--demo", "--frames", "0:2", "--fps", "60", "--size", "64x48",
                              "--msaa", "0", "--no-physics", "-q", "-o", out)
    assert code == 0, err
    assert len(list(out.iterdir())) == 5  # frames 0, 0.5, 1, 1.5, 2: the dance at its own speed


def test_pose_refuses_more_frames_than_memory_holds(mmdkit_cli, assets, tmp_path):
    gene, dance = assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = mmdkit_cli("pose", gene, dance, "--frames", "0:9999999", "--vertices", "-o",
                              tmp_path / "p.npz")  # 10 million frames × 28,646 vertices: terabytes
    assert_one_line_error(code, err, "--frames", "'0:9999999'", "GiB of memory", "pose fewer frames")
    assert not list(tmp_path.iterdir())


def test_main_raises_the_gc_threshold_while_a_command_runs_and_restores_it(monkeypatch, mmdkit_cli):
    import gc

    import mmdkit.cli as cli

    seen = []
    monkeypatch.setattr(cli.cli, "main", lambda **kw: seen.append(gc.get_threshold()) or 0)
    before = gc.get_threshold()
    code, _, _ = mmdkit_cli("info", "x.pmx")
    assert code == 0 and seen[0][0] >= cli.GC_THRESHOLD and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0  # in-process: nothing frozen


def test_command_start_up_runs_no_full_collection(assets, tmp_path):
    """``mmdkit export`` run as the command: no generation-2 collection while it runs (start-up's
    long-lived objects are not walked again and again), and the heap is frozen by the time the
    interpreter exits (its last full collection walks only what came after)."""
    import subprocess
    import sys

    probe = ("import gc, sys\n"
             "full = []\n"
             "gc.callbacks.append(lambda p, i: p == 'start' and i['generation'] == 2 and full.append(1))\n"
             "import atexit; atexit.register(lambda: print('full collections', len(full), 'frozen', gc.get_freeze_count(),\n"
             "                                    file=sys.stderr))\n"
             "from mmdkit.cli import main\n"
             "sys.argv[0] = 'mmdkit'\n"
             "main()\n")
    r = subprocess.run([sys.executable, "-c", probe, "export", str(assets / "gene" / "Gene.pmx"),
                        str(assets / "wavefile" / "wavefile_v2.vmd"), "--frames", "0:3", "-o", str(tmp_path / "o.npz"),
                        "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("full collections"))
    full, frozen = int(line.split()[2]), int(line.split()[4])
    assert full == 0 and frozen > 50_000, line


def test_numba_commands_import_numba_without_the_scipy_blas_probe():
    """A fresh process: the probe finds no BLAS (so numba's import did not pull in scipy.linalg),
    and scipy.linalg, where installed, still imports afterwards."""
    import subprocess
    import sys

    code = ("import sys, importlib.util\n"
            "from mmdkit.cli import import_numba_without_blas_probe as f\n"
            "f()\n"
            "import numba.np.arraymath as am\n"
            "print(am._HAVE_BLAS, 'scipy.linalg' in sys.modules, 'numba' in sys.modules)\n"
            "if importlib.util.find_spec('scipy') is not None:\n"
            "    import scipy.linalg\n"
            "    print(float(scipy.linalg.norm([3.0, 4.0])))\n"
            "else:\n"
            "    print(5.0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True", "5.0"]
