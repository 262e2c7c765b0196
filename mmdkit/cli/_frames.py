"""What the CLI says about frames: one warning when those asked for run past the motion, and the
time spent compiling kernels (so a first run's frames/s is not the compiler's).

In: ``--frames`` as typed (None: the default, the whole motion), the parsed (F,) motion frames, the
motion's last key frame and how to name the motion. Out: nothing, or one warning line on stderr.
``compile_clock()``: a context that notes when numba compiles, to take that time out of a rate.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from mmdkit.cli._common import warn


def warn_past_end(spec: str | None, frames: np.ndarray, last: int, source: str) -> None:
    """Warn once when frames typed in ``spec`` lie after ``last`` (the motion holds its last pose
    there); nothing for the default range, a still pose (``last`` 0) or frames within the motion."""
    if spec is None or last <= 0:
        return
    frames = np.asarray(frames)
    beyond = int((frames > last).sum())
    if beyond:
        which = (f"frame {frames[0]:g} is" if len(frames) == 1 else
                 f"all {beyond:,} frames are" if beyond == len(frames) else f"{beyond:,} of {len(frames):,} frames are")
        warn(f"--frames '{spec}': {which} past the end of {source} (last key frame {last:,}); "
             "the motion holds its last pose there")


@contextlib.contextmanager
def compile_clock():
    """While the block runs, note when numba compiles (outermost compiles only: a kernel compiles
    the functions it calls inside its own compile); yields the clock, whose ``seconds_within(a, b)``
    is the compiling time inside the ``time.perf_counter`` window [a, b]."""
    from numba.core import event

    class Clock(event.Listener):
        def __init__(self):
            self.spans: list[tuple[float, float]] = []
            self._depth, self._start = 0, 0.0

        def on_start(self, ev):
            if self._depth == 0:
                self._start = time.perf_counter()
            self._depth += 1

        def on_end(self, ev):
            self._depth -= 1
            if self._depth == 0:
                self.spans.append((self._start, time.perf_counter()))

        def seconds_within(self, a: float, b: float) -> float:
            return sum(max(0.0, min(b, e) - max(a, s)) for s, e in self.spans)

    clock = Clock()
    with event.install_listener("numba:compile", clock):
        yield clock
