"""Playback over one or many characters, and ``pose`` (arrays for a list of frames).

In: characters (``Character``), frames (motion frames, float). Out: ``play`` yields after every
character is posed at each frame (render, bench and the pose CLI iterate it); ``output_frames``
maps output pictures at any fps to motion frames (real time: frame = seconds × 30, fractional);
``pose`` returns bone_world (F,B,4,4), morph_weight (F,N) float32 and optionally skinned
vertices (F,V,3), through the parallel kinematic batch (``mmdkit.pose.pose_batch``) when
nothing needs history. While physics runs, numba runs on the calling thread only
(``numba_threads``, set up in ``mmdkit.threads``): its workers would compete with Bullet for the cores.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from mmdkit.animation.frames import output_frames  # noqa: F401  (re-exported by mmdkit.runtime)
from mmdkit.pose.batch import pose_batch
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


def pose(model, motion, frames, *, physics=None, vertices: bool = False, progress: bool = False) -> dict:
    """Pose ``frames`` (iterable of numbers) in order; returns arrays.

    Returns dict: frames (F,) float64, bone_world (F,B,4,4) float32 model space, morph_weight
    (F,N) float32, and with ``vertices`` vertex_position (F,V,3) float32 (after morphs and
    skinning). Without physics and vertices the frames are posed in parallel chunks.
    """
    frames = np.asarray(list(frames), np.float64)
    if physics is None and not vertices:
        world, morph = pose_batch(model, motion, frames)
        return {"frames": frames, "bone_world": world, "morph_weight": morph}
    ch = Character(model, motion, physics)
    F, B, N, V = len(frames), model.num_bones, model.num_morphs, model.num_vertices
    out = {"frames": frames, "bone_world": np.empty((F, B, 4, 4), np.float32),
           "morph_weight": np.empty((F, N), np.float32)}
    if vertices:
        out["vertex_position"] = np.empty((F, V, 3), np.float32)
        normals = np.empty((V, 3), np.float32)
    for i, _ in play([ch], frames, progress=progress):
        out["bone_world"][i] = ch.bone_world
        out["morph_weight"][i] = ch.morph_weight
        if vertices:
            ch.skin(out["vertex_position"][i], normals)
    return out
