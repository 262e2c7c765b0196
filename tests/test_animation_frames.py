"""animation/frames: the one home of output frame ranges, fps and the frames grammar."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmdkit.animation.frames import MAX_FRAMES, check_fps, check_frames, output_frames, split_frames
from mmdkit.errors import OptionError


def test_output_frames_are_real_time_at_any_fps():
    assert output_frames(330, 332, 60).tolist() == [330, 330.5, 331, 331.5, 332]
    assert output_frames(0, 2, 15).tolist() == [0, 2]
    assert len(output_frames(0, 30, 24)) == 25 and output_frames(0, 30, 24)[-1] == pytest.approx(30)
    assert output_frames(7, 7).tolist() == [7]


@pytest.mark.parametrize("args, needle", [
    ((0, 30, 0), "fps"), ((0, 30, math.nan), "fps"), ((0, 30, "x"), "fps"), ((5, 1, 30), "before the start"),
    ((0, math.inf, 30), "finite"), ((0, 1e9, 30), f"at most {MAX_FRAMES:,}"),
])
def test_output_frames_refusals_name_the_option(args, needle):
    with pytest.raises(OptionError, match=needle):
        output_frames(*args)


def test_check_fps_and_frames():
    assert check_fps("60") == 60.0
    with pytest.raises(OptionError, match="^--fps: "):
        check_fps(-1, "--fps")
    assert check_frames([[1, 2.5]]).tolist() == [1, 2.5]
    for bad, needle in (([], "selects no frames"), ([1, -1], ">= 0"), ([np.nan], "finite")):
        with pytest.raises(OptionError, match=needle):
            check_frames(bad)


def test_split_frames_before_the_motion_is_known():
    assert split_frames("10:") == (10.0, None, None, None)  # end: the motion's last frame
    assert split_frames("5") == (5.0, 5.0, None, None)
    assert split_frames("10+3") == (10.0, None, None, 3)
    assert split_frames("4", bare_count=True) == (0.0, None, None, 4)
    assert split_frames("0:100:2") == (0.0, 100.0, 2.0, None)
    with pytest.raises(OptionError, match="^frames: '0:1:0': the step must be > 0"):
        split_frames("0:1:0", option="frames")


def test_fps_is_real_time():
    """At 60 fps the 30-frames-a-second motion is sampled every half frame."""
    from mmdkit.animation.frames import output_frames

    np.testing.assert_array_equal(output_frames(330, 332, 60), [330, 330.5, 331, 331.5, 332])
    np.testing.assert_array_equal(output_frames(0, 2, 15), [0, 2])
