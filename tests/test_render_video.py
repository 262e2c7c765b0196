"""render.video: the output path chooses a picture, a video or a folder of frames (refreshed,
named by motion frame number)."""

import pytest
from PIL import Image

from helpers import demo_render


def test_output_path_chooses_picture_video_or_folder(tmp_path):
    """A .png of one frame is one picture; the containers PyAV writes are videos, not folders."""
    import av

    from mmdkit.errors import OptionError

    demo_render(tmp_path / "still.png", [12])
    assert (tmp_path / "still.png").is_file()
    assert Image.open(tmp_path / "still.png").size == (32, 24)
    with pytest.raises(OptionError, match="one picture but 2 frames"):
        demo_render(tmp_path / "two.png", [0, 1])
    assert not (tmp_path / "two.png").exists()
    for ext, codec in ((".gif", "gif"), (".webm", "vp9"), (".mkv", "h264"), (".avi", "mpeg4"), (".mov", "h264")):
        out = tmp_path / f"clip{ext}"
        demo_render(out, range(3))
        assert out.is_file(), ext
        with av.open(str(out)) as c:
            assert c.streams.video[0].codec_context.name == codec
            assert sum(1 for _ in c.decode(c.streams.video[0])) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_png_folder_is_refreshed_and_named_by_frame_number(tmp_path):
    out = tmp_path / "frames"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "frame_00007.png").write_bytes(b"an old render's frame")
    demo_render(out, range(330, 334))
    demo_render(out, [330, 331])
    assert sorted(p.name for p in out.iterdir()) == ["frame_000330.png", "frame_000331.png", "notes.txt"]
