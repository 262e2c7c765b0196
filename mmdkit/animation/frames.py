"""Which motion frames an output shows: the one home of frame ranges, output fps and their checks.

In: a first/last motion frame and an output fps, a frames spec as typed (``--frames``, a batch
manifest's ``frames``), or a list of frames.
Out: (F,) float64 motion frames (30 per second; fractional between keys), 1 <= F <= MAX_FRAMES,
or an ``OptionError`` naming the option and what was given. Output fps is real time: picture i
shows motion frame first + i·30/fps, so a 60 fps video samples every half frame.
"""

from __future__ import annotations

import math
import re

import numpy as np

from mmdkit.errors import OptionError, check_number

MOTION_FPS = 30.0
"""Motion (VMD) frames per second."""
MAX_FRAMES = 10_000_000
"""Most frames one call may select (a bound on memory: 0:1e9 is refused, not run; ~3.8 days at 30 fps)."""


def check_fps(fps, option: str = "fps") -> float:
    """``fps`` as a float, or OptionError(option) unless finite and > 0."""
    return check_number(fps, option)


def _spaced(first: float, last: float, step: float, option: str, label: str) -> np.ndarray:
    """(F,) float64 first + i·step for i = 0, 1, … up to ``last`` (inclusive within 1e-9 steps);
    OptionError(option) naming ``label`` when F > MAX_FRAMES."""
    count = math.floor((last - first) / step + 1e-9) + 1
    if count > MAX_FRAMES:
        raise OptionError(option, f"{label} selects {count:,} frames; at most {MAX_FRAMES:,} at once")
    return first + np.arange(count, dtype=np.float64) * step


def output_frames(first: float, last: float, fps: float = MOTION_FPS) -> np.ndarray:
    """Motion frames (F,) float64 of output pictures at ``fps`` per second of real time from motion
    frame ``first`` to ``last`` (inclusive where it falls on a picture): first + i·30/fps.
    OptionError('fps') / OptionError('frames') for a bad fps, range or count."""
    fps = check_fps(fps)
    if not (math.isfinite(first) and math.isfinite(last)):
        raise OptionError("frames", f"need finite frames, not {first!r}:{last!r}")
    if last < first:
        raise OptionError("frames", f"the end {last:g} is before the start {first:g}")
    return _spaced(first, last, MOTION_FPS / fps, "frames", f"{first:g}..{last:g} at {fps:g} fps")


def check_frames(frames, option: str = "frames") -> np.ndarray:
    """Frames given as numbers → (F,) float64, or OptionError(option) when empty, non-finite or < 0."""
    f = np.asarray(frames, np.float64).reshape(-1)
    if len(f) == 0:
        raise OptionError(option, "selects no frames")
    if not np.isfinite(f).all() or (f < 0).any():
        raise OptionError(option, "frames must be finite and >= 0")
    return f


def _number(text: str, spec: str, what: str, option: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise OptionError(option, f"'{spec}': {what} '{text}' is not a number") from None
    if not math.isfinite(v):
        raise OptionError(option, f"'{spec}': {what} must be a finite number, not '{text}'")
    return v


def _count(text: str, spec: str, option: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise OptionError(option, f"'{spec}': the count after '+' must be a whole number") from None
    if n < 1:
        raise OptionError(option, f"'{spec}': selects no frames (the count must be >= 1)")
    return n


def split_frames(spec: str, *, bare_count: bool = False,
                 option: str = "--frames") -> tuple[float, float | None, float | None, int | None]:
    """A frames spec (grammar: ``parse_frames``) → (start, end, step, count) before the motion is
    known: end None = the motion's last frame, step None = the caller's default, count = the N of
    ``A+N`` (else None; end is then None). Checks each number (finite, start >= 0, step > 0); the
    order of start and end is checked by ``parse_frames``. OptionError(option) naming the text."""
    spec = spec.strip()
    count_form = None if ":" in spec else re.fullmatch(r"(\d*\.?\d*)\+(.*)", spec)
    step = end = count = None
    if count_form or (bare_count and ":" not in spec):
        a_text, n_text = count_form.groups() if count_form else ("", spec)
        start = _number(a_text, spec, "the start", option) if a_text else 0.0
        count = _count(n_text, spec, option)
    else:
        parts = spec.split(":")
        if len(parts) > 3:
            raise OptionError(option, f"'{spec}' is not A:B[:STEP], A+N or N")
        start = _number(parts[0], spec, "the start", option) if parts[0] else 0.0
        if len(parts) == 1:
            end = start
        elif parts[1]:
            end = _number(parts[1], spec, "the end", option)
        if len(parts) > 2 and parts[2]:
            step = _number(parts[2], spec, "the step", option)
    if start < 0:
        raise OptionError(option, f"'{spec}': frames start at 0")
    if step is not None and step <= 0:
        raise OptionError(option, f"'{spec}': the step must be > 0")
    return start, end, step, count


def parse_frames(spec: str, last: float, *, bare_count: bool = False, default_step: float = 1.0) -> np.ndarray:
    """``--frames`` as typed → (F,) float64 motion frames, 1 <= F <= MAX_FRAMES, finite, >= 0.

    Grammar (the same in every subcommand): ``A:B[:STEP]`` with B inclusive (empty A = 0, empty
    B = ``last``, no STEP = ``default_step``), ``A+N`` = N frames from A ``default_step`` apart
    (``+N`` from 0), ``N`` = the single frame N — except with ``bare_count`` (``bench``, where one
    frame measures nothing) where ``N`` means ``+N``. ``render`` passes ``default_step`` = 30/fps
    so a video plays the motion in real time. Raises OptionError('--frames', ...) naming the text.
    """
    a, b, step, count = split_frames(spec, bare_count=bare_count)
    step = default_step if step is None else step
    if step <= 0:
        raise OptionError("--frames", f"'{spec.strip()}': the step must be > 0")
    if count is not None:
        b = a + (count - 1) * step
    elif b is None:
        b = float(last)
    if b < a:
        raise OptionError("--frames", f"'{spec.strip()}': the end {b:g} is before the start {a:g}")
    return _spaced(a, b, step, "--frames", f"'{spec.strip()}'")
