"""Playback over one or many characters: the stepping under ``runtime.driver.run``.

In: characters (``Character``), frames (motion frames, float). Out: ``play`` yields after every
character is posed at each frame (the driver iterates it); ``output_frames`` maps output pictures
at any fps to motion frames (real time: frame = seconds × 30, fractional). While physics runs, numba runs on the calling thread only
(``numba_threads``, set up in ``mmdkit.threads``): its workers would compete with Bullet for the cores.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator, Sequence

from mmdkit.animation.frames import output_frames  # noqa: F401  (re-exported by mmdkit.runtime)
from mmdkit.runtime.character import FPS, Character
from mmdkit.threads import using_threads as numba_threads  # noqa: F401  (re-exported by mmdkit.runtime)


def seconds_at(frame: float) -> float:
    """Seconds of real time (and of the song) at motion frame ``frame`` (VMD: 30 frames a second)."""
    return float(frame) / FPS


def _update_all(characters, offsets, frame: float, timed: bool) -> None:
    for ch, off in zip(characters, offsets):
        ch.update(frame + off, timed=timed)


def play(characters: Sequence[Character], frames: Iterable[float], *, offsets: Sequence[float] | None = None,
         timed: bool = False, progress: bool = False, desc: str = "posing",
         threads: int = 1) -> Iterator[tuple[int, float]]:
    """Pose every character at each frame in order (character k at frame + offsets[k]) and yield
    (index, frame) once all are posed; read their arrays before the next iteration. ``timed``:
    per-stage seconds in each ``Character.stage_seconds``. With physics the loop (and whatever
    the caller does between yields) runs numba single-threaded. ``threads`` > 1: the characters
    are split into that many groups updated at once, one on the calling thread and the others on
    a pool kept for the whole run (posing kernels and Bullet steps release the GIL); characters
    must not share a physics world."""
    offs = [0.0] * len(characters) if offsets is None else [float(o) for o in offsets]
    frames = list(frames)
    it: Iterable = range(len(frames))
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc=desc, unit="frame")
    simulating = any(ch.simulation.active for ch in characters)
    n = max(1, min(int(threads), len(characters)))
    groups = [(characters[g::n], offs[g::n]) for g in range(n)]
    pool = concurrent.futures.ThreadPoolExecutor(n - 1, thread_name_prefix="mmdkit-play") if n > 1 else None
    try:
        with numba_threads(1 if simulating or n > 1 else None):
            for i in it:
                f = float(frames[i])
                futures = [pool.submit(_update_all, chs, os_, f, timed) for chs, os_ in groups[1:]] if pool else []
                _update_all(*groups[0], f, timed)
                for fu in futures:
                    fu.result()
                yield i, f
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
