"""What a new user met on the command line (issue #23): one rule for output folders, a warning for
frames past the motion, pose's suffix, summaries in words, short binding warnings, complete --help."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def miku(assets):
    return assets / "low_miku" / "miku.pmd", assets / "wavefile" / "wavefile_v2.vmd"


def _errors(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if not ln.startswith("mmdkit: warning:")]


@pytest.mark.parametrize("command, output", [("pose", "p.npz"), ("export", "e.glb"), ("render", "r.png"),
                                             ("convert", "c.pmx")])
def test_every_command_refuses_an_output_folder_that_does_not_exist(mmdkit_cli, miku, tmp_path, command, output):
    model, motion = miku
    target = tmp_path / "missing" / output
    args = [model, target] if command == "convert" else [model, motion, "--frames", "0", "-o", target]
    code, out, err = mmdkit_cli(command, *args)
    assert code == 2 and len(_errors(err)) == 1 and err.count("\n") == 1, err
    assert str(target) in err and f"{tmp_path / 'missing'} does not exist" in err
    assert not (tmp_path / "missing").exists()  # nothing created, the same for every command


def test_frames_past_the_motions_end_warn_once(mmdkit_cli, miku, tmp_path):
    model, motion = miku
    code, _, err = mmdkit_cli("pose", model, motion, "--frames", "5000:5010", "-o", tmp_path / "p.npz")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "past the end" in ln]
    assert lines == [f"mmdkit: warning: --frames '5000:5010': all 11 frames are past the end of {motion} "
                     "(last key frame 2,809); the motion holds its last pose there"]
    code, _, err = mmdkit_cli("export", model, motion, "--frames", "2800:2810", "--no-physics", "-o",
                              tmp_path / "e.bvh")
    assert code == 0 and "1 of 11 frames are past the end" in err
    code, _, err = mmdkit_cli("pose", model, motion, "--frames", "2800:2809", "-o", tmp_path / "q.npz")
    assert code == 0 and "past the end" not in err
    code, _, err = mmdkit_cli("pose", model, motion, "--frames", "5000", "-q", "-o", tmp_path / "r.npz")
    assert code == 0 and err == ""  # -q: no warnings


def test_pose_refuses_an_output_that_is_not_npz(mmdkit_cli, miku, tmp_path):
    model, motion = miku
    code, _, err = mmdkit_cli("pose", model, motion, "--frames", "0", "-o", tmp_path / "x.txt")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"mmdkit: error: -o: {tmp_path / 'x.txt'}: pose writes NumPy arrays; name the output")
    assert not list(tmp_path.iterdir())


def test_export_summary_is_words_not_a_dict(mmdkit_cli, miku, tmp_path):
    model, motion = miku
    code, out, err = mmdkit_cli("export", model, motion, "--frames", "0", "--no-physics", "-o", tmp_path / "one.glb")
    assert code == 0, err
    assert out.startswith(f"wrote {tmp_path / 'one.glb'}: 1 frame, ") and "frames" not in out
    assert "keys kept (within 0.002 MMD units)" in out and "0.00199" not in out
    assert "'" not in out and "[" not in out and "_" not in out.split(":", 1)[1]  # no dict keys or lists
    code, out, err = mmdkit_cli("export", model, motion, "--frames", "0:29", "--no-physics", "-o", tmp_path / "b.vmd",
                                "--reduce", "0.01")
    assert code == 0 and ": 30 frames (1.00 s at 30 fps), " in out and " bone keys for " in out
    assert "bone_keys" not in out and "physics off" in out


def test_convert_counts_one_texture_file(mmdkit_cli, tmp_path):
    from PIL import Image

    from mmdkit.formats.pmx import write_pmx
    from mmdkit.model.builder import ModelBuilder

    mb = ModelBuilder("tex")
    mb.add_bone("センター", (0, 0, 0))
    m = mb.add_material("m", texture="tex.png")
    mb.add_mesh(m, [(0, 0, 0), (1, 0, 0), (0, 1, 0)], [(0, 0, -1)] * 3, [(0, 0), (1, 0), (0, 1)], [(0, 1, 2)],
                [[0, 0, 0, 0]] * 3)
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    (tmp_path / "src" / "m.pmx").write_bytes(write_pmx(mb.build()))
    Image.new("RGB", (4, 4)).save(tmp_path / "src" / "tex.png")
    code, out, err = mmdkit_cli("convert", tmp_path / "src" / "m.pmx", tmp_path / "dst" / "m.pmx")
    assert code == 0, err
    assert out.strip().endswith("(and copied 1 texture file beside it)")


def test_render_rate_leaves_out_kernels_compiled_while_drawing(mmdkit_cli, miku, tmp_path, monkeypatch):
    """A first run compiles kernels inside the timed frames: the frames/s line says so and leaves it out."""
    import time

    from numba.core import event

    import mmdkit.cli._take as take

    def drawing_that_compiles(loaded, sinks, **kwargs):  # the frame loop, as render runs it
        t = time.perf_counter()

        # a kernel compiling on its first use, as numba reports it (a real compile of a small
        # function can take under the 0.05 s the line ignores when LLVM is warm)
        with event.trigger_event("numba:compile", data={"dispatcher": None, "args": (), "return_type": None}):
            time.sleep(0.2)
        time.sleep(0.3)  # the drawing itself
        secs = time.perf_counter() - t
        n = len(loaded.frames)
        return [{"frames": n, "seconds": secs, "fps": n / secs, "warnings": [], "output": str(tmp_path / "r.png")}]

    monkeypatch.setattr(take, "run", drawing_that_compiles)
    model, motion = miku
    code, out, err = mmdkit_cli("render", model, motion, "--frames", "0", "-o", tmp_path / "r.png")
    assert code == 0, err
    assert out.startswith(f"wrote {tmp_path / 'r.png'}: 1 frame in ") and "compiling kernels" in out
    rate = float(out.split("(")[1].split(" frames/s")[0])
    assert rate < 1 / 0.25  # about 1 frame in the 0.3 s of drawing, not counting the compile


def test_unbound_tracks_one_short_line_the_list_on_demand(mmdkit_cli, assets, tmp_path):
    gene, dance = assets / "gene" / "Gene.pmx", assets / "wavefile" / "wavefile_v2.vmd"
    code, _, err = mmdkit_cli("pose", gene, dance, "--frames", "0", "--no-physics", "-o", tmp_path / "a.npz")
    assert code == 0
    [line] = [ln for ln in err.splitlines() if "not in the model" in ln]
    assert line == (f"mmdkit: warning: {dance}: 67 motion bones and 7 motion morphs not in the model "
                    "(list: -v or mmdkit info MOTION --model MODEL)")
    code, _, err = mmdkit_cli("pose", gene, dance, "--frames", "0", "--no-physics", "-q", "-o", tmp_path / "b.npz")
    assert code == 0 and err == ""
    code, _, err = mmdkit_cli("pose", gene, dance, "--frames", "0", "--no-physics", "-v", "-o", tmp_path / "c.npz")
    assert "bound 73/140 bone tracks, 24/31 morph tracks; not in the model: bones ﾈｸﾀｲ１, " in err
    code, out, _ = mmdkit_cli("info", dance, "--model", gene, "--json")
    b = json.loads(out)["binding"]
    assert (b["bone_tracks"], b["bone_tracks_bound"], len(b["unbound_bones"]), len(b["unbound_morphs"])) == \
           (140, 73, 67, 7)
    code, out, _ = mmdkit_cli("info", dance, "--model", gene)
    assert "unbound bones (67): ﾈｸﾀｲ１, " in out and "unbound morphs (7): " in out


def test_help_and_info_say_what_is_optional_and_known(mmdkit_cli, assets):
    code, out, _ = mmdkit_cli("render", "--help")
    assert "render [OPTIONS] MODEL [MOTION]" in out
    crowd = " ".join(out.split("--crowd")[1].split("--palette")[0].split())
    assert "apart" in crowd and "7 frames behind" in crowd
    code, out, _ = mmdkit_cli("info", "--help")
    text = " ".join(out.split())
    for ext in (".pmx", ".vmd", ".vpd", ".glb", ".gltf", ".fbx", ".dae", ".x"):
        assert ext in text
    code, out, _ = mmdkit_cli("info", assets / "gltf" / "Fox.glb")
    assert "clips: Survey (3.43 s, frames 0:103), Walk (0.73 s, frames 0:22), Run (1.17 s, frames 0:35)" in out
    d = json.loads(mmdkit_cli("info", assets / "gltf" / "Fox.glb", "--json")[1])
    assert d["clips"] == 3 and d["clip_seconds"] == {"Survey": 3.433, "Walk": 0.733, "Run": 1.167}


def test_python_render_refuses_a_missing_folder_too(tmp_path):
    from mmdkit.demo import demo_model, demo_motion
    from mmdkit.errors import RenderError
    from mmdkit.render.pipeline import render_motion

    for out in (tmp_path / "missing" / "x.png", tmp_path / "missing" / "frames"):
        with pytest.raises(RenderError, match="does not exist"):
            render_motion(demo_model(), demo_motion(), str(out), frames=[0], size=(32, 24),
                          msaa=0, physics=False, progress=False)
    assert not (tmp_path / "missing").exists()
