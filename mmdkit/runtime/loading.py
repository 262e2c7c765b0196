"""Loading what a Take animates (``runtime.take.Take.load``, the one loader of the CLI, batch and
Python): a file as the kind asked for, a model's motion (a file, or a clip the model carries), VPD
poses applied at frames.

In: paths and values as typed, ``names`` (how the caller shows each input: the CLI's ``MODEL``,
``--clip``, ... or a manifest's keys ``model``, ``clip``, ...), a ``warn`` callback for the files'
load warnings. Out: a Model, a Motion or Pose (or None: the rest pose, where the caller allows it),
a label naming the motion's source. A mistake raises an ``OptionError`` under the caller's name for
the input with the same detail everywhere (``--clip: 'Run' is not a clip of fox.glb (clips: ...)``
from the CLI, ``clip: 'Run' is not a clip of ...`` in a batch row).
"""

from __future__ import annotations

import os

from mmdkit.animation.frames import parse_frames
from mmdkit.animation.motion import Motion, Pose
from mmdkit.animation.vpd import apply_pose, motion_from_pose
from mmdkit.errors import OptionError
from mmdkit.formats import io
from mmdkit.importers import clips_of

CLI_NAMES = {"model": "MODEL", "motion": "MOTION", "clip": "--clip", "vpd": "--vpd", "camera": "--camera"}
"""How the command line names each input."""
MANIFEST_NAMES = {"model": "model", "motion": "motion", "clip": "clip", "vpd": "vpd", "camera": "camera"}
"""How a batch manifest names each input (its keys)."""
MODEL_KINDS = "model (.pmx/.pmd/.glb/.gltf/.vrm)"
MOTION_KINDS = "motion (.vmd) or pose (.vpd)"


def ignore(message: str) -> None:
    pass


def load_as(path: str, cls, what: str, option: str, *, warn=ignore, shown: int = 10):
    """The object in ``path`` (``formats.io.load_as``: an OptionError naming ``option`` unless it is a
    ``cls``); its load warnings go to ``warn`` (at most ``shown``, then a count)."""
    obj = io.load_as(path, cls, what, option)
    report_warnings(path, obj.warnings, warn, shown)
    return obj


def report_warnings(path: str, warnings, warn, shown: int) -> None:
    """``warn`` each of the first ``shown`` ``warnings`` of the file ``path``, then how many more."""
    for w in warnings[:shown]:
        warn(f"{path}: {w}")
    if len(warnings) > shown:
        warn(f"{path}: {len(warnings) - shown} more warnings (mmdkit info {path} lists them)")


def load_motion_for(model, model_path: str, motion_path: str | None, clip, *, names: dict = CLI_NAMES,
                    warn=ignore, shown: int = 10, rest_pose: bool = False, frames: str | None = None):
    """(motion or pose or None, label naming its source) for ``model``: the file ``motion_path`` when
    given, else its ``clip`` (name or index; default the first) when the model carries clips, else
    None (the rest pose) where ``rest_pose`` allows it, or an OptionError. With ``frames`` (a
    ``--frames`` spec) a clip is baked only around those frames (a long clip costs what is posed)."""
    if motion_path:
        if clip is not None:
            raise OptionError(names["clip"], f"picks a clip of {names['model']} when {names['motion']} is left "
                                             f"out; got both {motion_path} and {names['clip']} {clip}")
        motion = load_as(motion_path, (Motion, Pose), MOTION_KINDS, names["motion"], warn=warn, shown=shown)
        return motion, motion_path
    clips = clips_of(model)
    if not clips:
        if rest_pose and clip is None:
            return None, ""
        raise OptionError(names["motion"], f"{model_path} carries no clips; give a motion (.vmd) or pose (.vpd)")
    name = clips.resolve(0 if clip is None else clip, names["clip"])
    wanted = None if frames is None else parse_frames(frames, clips.last_frame(name))
    name, motion = clips.get_clip(name, names["clip"], frames=wanted)
    report_warnings(model_path, motion.warnings, warn, shown)
    return motion, f"{model_path} clip {name!r}"


def split_vpd_spec(spec: str, option: str = "--vpd") -> tuple[str, int, float]:
    """``FILE.vpd@FRAME[:WEIGHT]`` → (path as typed, frame >= 0, weight in [0, 1]), or an OptionError
    naming ``option``. The file itself is not looked at."""
    path, _, at = str(spec).rpartition("@")
    if not path:
        raise OptionError(option, f"'{spec}' is not FILE.vpd@FRAME[:WEIGHT]")
    frame, _, weight = at.partition(":")
    try:
        frame_i, weight_f = int(frame), float(weight) if weight else 1.0
    except ValueError:
        raise OptionError(option, f"'{spec}': FRAME must be an integer, WEIGHT a number") from None
    if frame_i < 0 or not 0.0 <= weight_f <= 1.0:
        raise OptionError(option, f"'{spec}': need FRAME >= 0 and 0 <= WEIGHT <= 1")
    return path, frame_i, weight_f


def apply_vpd_specs(model, motion, specs, *, option: str = "--vpd", warn=ignore, shown: int = 10):
    """``motion`` (a Motion, a Pose or None) with each ``FILE.vpd@FRAME[:WEIGHT]`` of ``specs``
    loaded at its frame and registered, in order (MMD's load pose + register); unchanged without specs."""
    if specs and isinstance(motion, Pose):
        motion = motion_from_pose(motion)
    for spec in specs or ():
        path, frame, weight = split_vpd_spec(spec, option)
        if not os.path.isfile(path):
            raise OptionError(option, f"'{spec}': no file {path!r}")
        pose = load_as(path, Pose, "pose (.vpd)", option, warn=warn, shown=shown)
        motion = apply_pose(model, motion, pose, frame, weight=weight)
    return motion
