"""Runtime: the job (``Take``), the one frame loop (``run(loaded, sinks)``), characters (pose state +
physics + skinning) and playback, above pose/physics/skinning.

``from mmdkit.runtime import Take, run, Character, pose, play, output_frames``; ``STAGES`` names the
per-stage timings of ``Character.update(frame, timed=True)`` plus the skinning that
``mmdkit bench`` times.
"""

from mmdkit.pose.stages import STAGES as _POSE_STAGES
from mmdkit.runtime.character import FPS, Character
from mmdkit.runtime.arrays import PoseArrays, pose
from mmdkit.runtime.driver import Sink, run
from mmdkit.runtime.playback import numba_threads, output_frames, play, seconds_at
from mmdkit.runtime.take import LoadedTake, Output, Take
from mmdkit.runtime.simulation import DEFAULT_SETTLE_SECONDS, PHYSICS_MODES, Simulation

STAGES = (*_POSE_STAGES, "skinning")

__all__ = ["Take", "Output", "LoadedTake", "run", "Sink", "PoseArrays", "Character", "pose", "play", "output_frames", "seconds_at", "numba_threads", "Simulation",
           "PHYSICS_MODES", "DEFAULT_SETTLE_SECONDS", "STAGES", "FPS"]
