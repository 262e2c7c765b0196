"""Posing: the Model-side ``Rig``, the mutable ``PoseState`` and the stage kernels (one order, in
``stages.run_stages``); ``pose_batch`` poses many frames in parallel without physics.
Characters, physics and playback live above, in ``mmdkit.runtime``.
"""

from mmdkit.pose.batch import pose_batch
from mmdkit.pose.rig import Rig, build_rig
from mmdkit.pose.stages import STAGES, run_stages
from mmdkit.pose.state import PoseState

__all__ = ["Rig", "build_rig", "PoseState", "STAGES", "run_stages", "pose_batch"]
