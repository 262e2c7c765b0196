"""render.pipeline: still pictures (render_still) and motion renders (render_motion): the demo's
reference picture, the ground shadow, VMD light keys, hidden models, default frames, option errors."""

import numpy as np
import pytest
from PIL import Image

from mmdkit.demo import demo_model, demo_motion
from mmdkit.runtime import Character
from mmdkit.render.camera import perspective
from mmdkit.render.gl import Renderer
from mmdkit.render.pipeline import render_still

from helpers import demo_render

DATA = __import__("pathlib").Path(__file__).parent / "data"


def test_demo_matches_reference_and_covers_frame(ctx):
    img = render_still(demo_model(), size=(160, 120), ctx=ctx).astype(np.int16)
    ref = np.asarray(Image.open(DATA / "demo_rest_160x120.png").convert("RGB"), np.int16)
    assert np.abs(img - ref).mean() < 3.0
    covered = (np.abs(img - 255).sum(axis=2) > 30).mean()
    assert 0.03 < covered < 0.6  # the character is in the picture, not filling it


def test_ground_shadow_and_vmd_light_and_audio(tmp_path, ctx):
    import math
    import wave

    import av

    # ground shadow: pixels below the feet darken only when it is on
    model = demo_model()
    on = render_still(model, size=(160, 120), ctx=ctx)
    ren = Renderer(model, (160, 120), 4, ctx=ctx, ground_shadow=False)
    from mmdkit.render.camera import auto_view

    view, d = auto_view(model.vertex_position.min(0), model.vertex_position.max(0), 30.0, 160 / 120)
    off = ren.render(np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4)), view,
                     perspective(30.0, 160 / 120), eye_distance=d)
    grey = lambda img: ((np.abs(img.astype(int) - 153) < 12).all(axis=2)).sum()  # noqa: E731
    assert grey(on) > grey(off) + 20
    # a VMD light changes the picture; an audio track is muxed in
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.render.pipeline import render_motion

    mo = MotionBuilder()
    mo.add_light_key(0, (1.0, 0.3, 0.3), (0.0, -1.0, 0.0))
    wav = tmp_path / "tone.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(b"".join(int(8000 * math.sin(i / 10)).to_bytes(2, "little", signed=True)
                               for i in range(22050)))
    out = tmp_path / "lit.mp4"
    render_motion(model, demo_motion(1.0), str(out), frames=range(3), camera=mo.build(), size=(64, 48),
                  physics=False, progress=False, audio=str(wav))
    with av.open(str(out)) as c:
        assert len(c.streams.audio) == 1
        frame = next(c.decode(c.streams.video[0])).to_ndarray(format="rgb24")
    plain = tmp_path / "plain.mp4"
    render_motion(model, demo_motion(1.0), str(plain), frames=range(3), size=(64, 48), physics=False,
                  progress=False)
    with av.open(str(plain)) as c:
        frame0 = next(c.decode(c.streams.video[0])).to_ndarray(format="rgb24")
    assert np.abs(frame.astype(int) - frame0.astype(int)).mean() > 1.0


def test_property_keys_hide_the_model(tmp_path):
    """MMD's 表示 off: on hidden frames nothing of the model is drawn (not even its shadow)."""
    from mmdkit.animation.builder import MotionBuilder
    from mmdkit.render.pipeline import render_motion

    mb = MotionBuilder()
    mb.add_property_key(0, visible=True)
    mb.add_property_key(1, visible=False)
    motion = mb.build()
    ch = Character(demo_model(), motion)
    assert ch.update(0).visible and not ch.update(1).visible
    out = tmp_path / "frames"
    render_motion(demo_model(), motion, str(out), frames=[0, 1], size=(64, 48), msaa=0, physics=False,
                  progress=False, self_shadow=True)
    shown, hidden = (np.asarray(Image.open(out / f"frame_{i:06d}.png").convert("RGB")) for i in (0, 1))
    assert (shown < 200).any()
    assert hidden.min() >= 250  # background only


def test_default_frames_follow_fps(tmp_path):
    from mmdkit.render.video import frame_file_names

    motion = demo_motion(1.0)
    stats = demo_render(tmp_path / "f", None, fps=60)
    assert stats["frames"] == 2 * int(motion.last_frame) + 1
    names = sorted(p.name for p in (tmp_path / "f").iterdir())
    assert names == frame_file_names(np.arange(stats["frames"]) / 2) and "frame_000000.500.png" in names


def test_api_arguments_out_of_range_are_option_errors(ctx, tmp_path):
    from mmdkit.errors import OptionError
    from mmdkit.animation.frames import output_frames

    for kw, what in ((dict(crowd=0), "crowd"), (dict(fps=0.0), "fps"), (dict(fps=float("nan")), "fps")):
        with pytest.raises(OptionError, match=what):
            demo_render(tmp_path / "x.mp4", None, **kw)
    with pytest.raises(OptionError, match="frames: 0..1e\\+09 at 30 fps selects 1,000,000,001 frames"):
        output_frames(0, 1e9, 30)
    with pytest.raises(OptionError, match="size: 0x10"):
        Renderer(demo_model(), (0, 10), 0, ctx=ctx)
    assert not list(tmp_path.iterdir())


def test_a_render_that_fails_while_opening_leaves_no_file(tmp_path, monkeypatch):
    """The video file is begun before the renderer is built: a failure after it (here: framing the
    motion) aborts the sink that was opening too — nothing half written stays."""
    import pytest

    import mmdkit.render.pipeline as pipeline
    from mmdkit.demo import demo_model, demo_motion

    def broken(*args, **kwargs):
        raise RuntimeError("no framing")

    monkeypatch.setattr(pipeline, "_Shots", broken)
    with pytest.raises(RuntimeError, match="no framing"):
        pipeline.render_motion(demo_model(), demo_motion(), str(tmp_path / "a.mp4"), frames=[0.0, 1.0],
                               size=(64, 48), progress=False)
    assert list(tmp_path.iterdir()) == []
