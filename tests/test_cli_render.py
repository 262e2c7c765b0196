"""`mmdkit render` end to end in a child process: the demo into a video and PNG frames, a VPD pose
into one picture."""

import os
import subprocess
import sys

import numpy as np
from PIL import Image

import mmdkit
from mmdkit.demo import demo_model


def test_cli_render_demo_mp4_and_png(tmp_path):
    import av

    out = tmp_path / "d.mp4"
    r = subprocess.run([sys.executable, "-m", "mmdkit", "render", "--demo", "--frames", "0:9", "--size", "64x48",
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with av.open(str(out)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])]
    assert len(frames) == 10 and frames[0].shape == (48, 64, 3)
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*"))
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # a normal file, not mkstemp's 0600
    folder = tmp_path / "frames"
    r = subprocess.run([sys.executable, "-m", "mmdkit", "render", "--demo", "--frames", "0:2", "--size", "64x48",
                        "--crowd", "3", "-o", str(folder)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["frame_000000.png", "frame_000001.png", "frame_000002.png"]


def test_cli_renders_a_vpd_pose_as_one_picture(tmp_path):
    from mmdkit.animation.motion import Pose

    mmdkit.save(demo_model(), tmp_path / "demo.pmx")
    pics = {}
    for name, q in (("rest", [0, 0, 0, 1]), ("tilt", [0, 0, 0.5, 0.8660254])):  # head tilted 60° about z
        mmdkit.save(Pose(bone_name=("頭",), bone_translation=np.zeros((1, 3), np.float32),
                         bone_rotation=np.array([q], np.float32), morph_name=(), morph_weight=np.zeros(0, np.float32)),
                    tmp_path / f"{name}.vpd")
        out = tmp_path / name
        r = subprocess.run([sys.executable, "-m", "mmdkit", "render", str(tmp_path / "demo.pmx"),
                            str(tmp_path / f"{name}.vpd"), "--size", "64x64", "--no-physics", "-o", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert [p.name for p in out.iterdir()] == ["frame_000000.png"]  # a pose: one picture
        pics[name] = np.asarray(Image.open(out / "frame_000000.png").convert("RGB")).astype(int)
    assert np.abs(pics["tilt"] - pics["rest"]).mean() > 0.5  # the pose shows
