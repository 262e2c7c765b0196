"""The one frame loop: ``run(loaded, sinks)`` poses a take's frames once and hands each frame to every sink.

In: a ``LoadedTake`` (``mmdkit.runtime.take``), sinks (below). Out: one summary dict per sink, in
order. Per frame, in MMD's order (``Character.update``): sample → morphs → bones before physics →
physics → bones after physics; then each sink reads what it needs from the characters (a sink
that needs vertices skins them into its own buffers: ``Character.skin``).

A sink is any object with these attributes (``Sink`` gives the defaults):
  geometry    True: needs the vertex/UV morph offsets and material values every frame
  continuous  True: with physics, the bodies must be stepped through every motion frame between two
              output frames (an export at 10 fps still simulates 30 steps a second); else a gap of
              more than ``simulation.MAX_STEP_FRAMES`` is a seek (the bodies settle at the new pose)
  batch       True: it can take all frames at once (``posed``) from the parallel kinematic poser
  world_pq    True: ``posed`` also wants each bone's world position and rotation from the pose state
  batched     set by the driver before ``open``: True when the frames will come at once (``posed``),
              so ``open`` need not allocate what ``frame`` would fill
  open(loaded)            before the first frame: allocate buffers, open files
  frame(i, characters)    output frame i is posed (character k at frame + k × the crowd offset):
                          read the characters' arrays now, they change on the next frame
  posed(bone_world, morph_weight, world_p, world_q)   instead of ``frame``, all F frames at once:
                          (F,B,4,4) float32 model space, (F,N) float32, and where a sink asked
                          (``world_pq``) (F,B,3) / (F,B,4) float64 (x,y,z,w) model space, else None
  close() -> dict         after the last frame: finish writing; a summary (path, frames, ...)
  abort()                 the run failed or was interrupted (its own open included): remove what
                          was half written
The policy lives here only: when nothing simulates, the take has one character and every sink takes
batches and none needs geometry, frames are posed in parallel chunks (``pose.batch.pose_batch``);
otherwise Characters are updated frame by frame (``playback.play``), all sharing the take's Rig,
each with its own physics world, with in-between frames where a continuous sink needs them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import get_num_threads

from mmdkit.physics import physics_for, simulated
from mmdkit.pose.batch import pose_batch
from mmdkit.runtime.character import FPS, Character
from mmdkit.runtime.playback import play
from mmdkit.runtime.simulation import physics_frames


class Sink:
    """Defaults of the sink protocol (see the module docstring); subclasses override what they use."""

    geometry = False
    continuous = False
    batch = False
    world_pq = False
    batched = False

    def open(self, loaded) -> None:
        pass

    def frame(self, i: int, characters: Sequence[Character]) -> None:
        pass

    def posed(self, bone_world: np.ndarray, morph_weight: np.ndarray, world_p, world_q) -> None:
        raise NotImplementedError(f"{type(self).__name__} takes frames one at a time")

    def close(self) -> dict:
        return {}

    def abort(self) -> None:
        pass


def characters_for(loaded, *, geometry: bool = True) -> list[Character]:
    """The take's characters: one per crowd member, sharing the take's Rig and bound motion, each with its own
    physics world when the take simulates (a lone character's world steps on as many threads as
    numba may use, ``numba.get_num_threads``; a crowd's on one each)."""
    take, model = loaded.take, loaded.model
    threads = get_num_threads() if take.crowd == 1 else 1
    out = []
    for _ in range(take.crowd):
        world = physics_for(model, bool(take.physics), threads=threads)
        ch = Character(model, loaded.motion, world, rig=loaded.rig, bound=loaded.bound, fps=FPS,
                       physics_mode=take.physics_mode, settle_seconds=take.settle_seconds)
        ch.geometry = geometry
        out.append(ch)
    return out


def simulates(loaded) -> bool:
    """True when the take runs a physics world (physics on, mode not 'off', the model has bodies
    or VRM spring bones: ``physics.simulated``)."""
    return bool(loaded.take.physics) and loaded.take.physics_mode != "off" and simulated(loaded.model)


def run(loaded, sinks: Sequence, *, progress: bool = False, desc: str = "posing", timed: bool = False) -> list[dict]:
    """Pose ``loaded``'s frames once, feeding every sink; returns their summaries (``close()``), in
    order. ``timed``: per-stage seconds in each ``Character.stage_seconds`` (``mmdkit bench``).
    On any failure (Ctrl-C included) every sink is aborted and the error goes on."""
    sinks = list(sinks)
    batched = (not simulates(loaded) and loaded.crowd == 1 and not timed and all(s.batch for s in sinks)
               and not any(s.geometry for s in sinks))
    opened = []
    try:
        for s in sinks:
            s.batched = batched  # known before open: a sink allocates per-frame buffers only if it needs them
            opened.append(s)  # a sink whose open fails is aborted too (it may have begun a file)
            s.open(loaded)
        frames = loaded.frames
        if batched:
            F, B = len(frames), loaded.model.num_bones
            pq = any(s.world_pq for s in sinks)
            world_p, world_q = (np.empty((F, B, 3)), np.empty((F, B, 4))) if pq else (None, None)
            bone_world, morph_weight = pose_batch(loaded.model, loaded.motion, frames, rig=loaded.rig,
                                                  bound=loaded.bound, world_p_out=world_p, world_q_out=world_q)
            for s in sinks:
                s.posed(bone_world, morph_weight, world_p, world_q)
        else:
            _loop(loaded, sinks, progress, desc, timed)
        return [s.close() for s in sinks]
    except BaseException:
        for s in opened:
            s.abort()
        raise


def _loop(loaded, sinks, progress: bool, desc: str, timed: bool) -> None:
    """Frame by frame: every character posed at each frame (plus in-between frames a continuous sink
    needs), then the sinks read output frame i."""
    chars = characters_for(loaded, geometry=any(s.geometry for s in sinks))
    frames = loaded.frames
    continuous = chars[0].simulation.active and any(s.continuous for s in sinks)
    posed, keep = physics_frames(frames) if continuous else (frames, np.arange(len(frames)))
    record = np.full(len(posed), -1, np.int64)
    record[keep] = np.arange(len(frames))
    for j, _ in play(chars, posed, offsets=loaded.frame_offsets, timed=timed, progress=progress, desc=desc):
        i = record[j]
        if i >= 0:
            for s in sinks:
                s.frame(int(i), chars)
