"""A Take: everything one job says, validated before anything heavy is loaded, then loaded once.

In: a model (path or ``Model``), a motion (a .vmd/.vpd path, a ``Motion``/``Pose``, or None: the
model's own clip, else the rest pose where ``rest_pose`` allows it), a ``clip`` of the model's file,
VPD poses applied at frames (``vpd``: 'FILE.vpd@FRAME[:WEIGHT]'), a camera motion, frames (a spec as
typed, ``animation.frames.parse_frames``, or explicit motion frames), an output ``fps``, physics
(``physics``: simulate or not; ``physics_mode``, ``settle_seconds``), a crowd (``crowd``
characters, ``crowd_frame_offset`` motion frames apart) and ``outputs`` (``Output``: a path and its
options, which the sinks above the runtime read). ``names`` says how the caller shows each input in
errors: Python's keyword names (the default), the CLI's (``MODEL``, ``--clip``, ``--fps`` ...) or a
batch manifest's keys — the same mistake gives the same detail everywhere.
Out: ``Take.validate()`` → the Take, or the first ``OptionError`` (nothing read but file metadata);
``Take.load(warn)`` → a ``LoadedTake``: the Model, one Motion (a VPD pose, a clip and the VPD
poses all resolved into it; a motion whose bone tracks mostly miss the model retargeted from the
``source`` model (``retarget.motion``), with one warning; None only for the rest pose), the camera
Motion, frames (F,) float64 motion frames, the Rig every character of the take shares, and a label
naming the motion's source.
The frame loop over a LoadedTake is ``mmdkit.runtime.driver.run``.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from mmdkit.animation.binding import BoundMotion, bind_motion
from mmdkit.animation.frames import MAX_FRAMES, MOTION_FPS, check_frames, parse_frames, split_frames
from mmdkit.animation.motion import Motion, Pose
from mmdkit.animation.vpd import motion_from_pose
from mmdkit.errors import FormatError, OptionError, check_flag
from mmdkit.model.model import Model
from mmdkit.pose.rig import build_rig
from mmdkit.retarget.motion import retarget
from mmdkit.retarget.names import label_name
from mmdkit.runtime import loading
from mmdkit.runtime.crowd import CROWD_FRAME_OFFSET
from mmdkit.runtime.simulation import DEFAULT_SETTLE_SECONDS, PHYSICS_MODES

STANDARD_SKELETON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo", "data",
                                 "gene", "Gene_light.pmx")
"""An MMD model with the standard bone set (the shipped demo character, CC BY 4.0): the skeleton a
motion's MMD bone tracks are retargeted from when no ``source`` is given."""
MAX_CROWD = 100
"""Most characters in one crowd: each has its own pose state and physics world."""
MAX_FPS = 1000.0
"""Highest output frame rate."""
CLI_NAMES = dict(loading.CLI_NAMES, source="--source", frames="--frames", fps="--fps", physics="--physics",
                 physics_mode="--physics-mode", settle_seconds="--settle", crowd="--crowd",
                 crowd_frame_offset="--crowd-offset", output="-o")
"""How the command line names each field of a Take."""
MANIFEST_NAMES = dict(loading.MANIFEST_NAMES, source="source", frames="frames", fps="fps", physics="physics",
                      physics_mode="physics_mode", settle_seconds="settle_seconds", crowd="crowd",
                      crowd_frame_offset="crowd_frame_offset", output="outputs")
"""How a batch manifest names each field (its keys)."""
PYTHON_NAMES = {k: k for k in CLI_NAMES}
"""How the Python API names each field (the keyword arguments)."""


@dataclass(frozen=True)
class Output:
    """One output of a take: ``path`` (its extension picks the sink) and that sink's own
    ``options`` (e.g. size, msaa for a video; joints, scale, vertices for an .npz)."""

    path: str
    options: Mapping = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Take:
    """What one job animates and writes (see the module docstring). Immutable: ``replace`` to vary."""

    model: str | os.PathLike | Model
    motion: str | os.PathLike | Motion | Pose | None = None
    clip: str | int | None = None
    vpd: tuple = ()
    camera: str | os.PathLike | Motion | None = None
    frames: str | Sequence[float] | np.ndarray | None = None
    fps: float = MOTION_FPS
    physics: bool = True
    physics_mode: str = "playing"
    settle_seconds: float = DEFAULT_SETTLE_SECONDS
    crowd: int = 1
    crowd_frame_offset: float = CROWD_FRAME_OFFSET
    outputs: tuple = ()
    source: str | os.PathLike | Model | None = None
    rest_pose: bool = True
    bare_count: bool = False
    names: Mapping = field(default_factory=lambda: PYTHON_NAMES)

    def replace(self, **changes) -> "Take":
        return replace(self, **changes)

    # --- validate: option values and file metadata only ----------------------------------------
    def validate(self, *, files: bool = True) -> "Take":
        """This Take, or the first OptionError naming the field as ``names`` shows it. Reads no
        file: paths must name existing regular files (``files=False``: not looked at, e.g. a batch
        manifest read long before its jobs run), values must be in range, the frames spec and VPD
        specs must parse."""
        n = self.names
        _check_input(self.model, (str, os.PathLike, Model), n["model"], loading.MODEL_KINDS, files)
        _check_input(self.motion, (str, os.PathLike, Motion, Pose, type(None)), n["motion"], loading.MOTION_KINDS,
                     files)
        _check_input(self.camera, (str, os.PathLike, Motion, type(None)), n["camera"], "camera motion (.vmd)", files)
        _check_input(self.source, (str, os.PathLike, Model, type(None)), n["source"], loading.MODEL_KINDS, files)
        if self.motion is not None and self.clip is not None:
            raise OptionError(n["clip"], f"picks a clip of {n['model']} when {n['motion']} is left out; got both "
                                         f"{_shown(self.motion)} and {n['clip']} {self.clip}")
        for spec in self.vpd:
            path, _, _ = loading.split_vpd_spec(spec, n["vpd"])
            if files and not os.path.isfile(path):
                raise OptionError(n["vpd"], f"'{spec}': no file {path!r}")
        check_fps_range(self.fps, n["fps"])
        _check_frames(self.frames, n["frames"], self.bare_count)
        check_flag(self.physics, n["physics"])
        if self.physics_mode not in PHYSICS_MODES:
            raise OptionError(n["physics_mode"], f"must be one of {', '.join(PHYSICS_MODES)}, "
                                                 f"not {self.physics_mode!r}")
        if not (isinstance(self.settle_seconds, (int, float)) and 0.0 <= self.settle_seconds <= 60.0):
            raise OptionError(n["settle_seconds"], f"must be between 0 and 60, not {self.settle_seconds!r}")
        if isinstance(self.crowd, bool) or not isinstance(self.crowd, (int, np.integer)) \
                or not 1 <= self.crowd <= MAX_CROWD:
            raise OptionError(n["crowd"], f"must be from 1 to {MAX_CROWD} characters, got {self.crowd}")
        if not (isinstance(self.crowd_frame_offset, (int, float)) and math.isfinite(self.crowd_frame_offset)):
            raise OptionError(n["crowd_frame_offset"], f"must be a number of frames, not {self.crowd_frame_offset!r}")
        inputs = [p for p in (self.model, self.motion, self.camera) if isinstance(p, (str, os.PathLike))]
        inputs += [s.rpartition("@")[0] for s in self.vpd]
        for out in self.outputs:
            if not isinstance(out, Output):
                raise OptionError(n["output"], f"{out!r} is not an Output")
            for inp in inputs if files else ():
                if os.path.exists(out.path) and os.path.exists(inp) and os.path.samefile(out.path, inp):
                    raise OptionError(n["output"], f"{out.path} is the input file {inp}; choose another output path")
        return self

    # --- load -------------------------------------------------------------------------------
    def load(self, warn=loading.ignore, *, shown: int = 10) -> "LoadedTake":
        """Load (once) what the take animates; load warnings go to ``warn`` (at most ``shown`` a file)."""
        n = self.names
        if isinstance(self.model, Model):
            model, model_path = self.model, getattr(self.model, "source_path", "") or "model"
        else:
            model_path = os.fspath(self.model)
            model = loading.load_as(model_path, Model, loading.MODEL_KINDS, n["model"], warn=warn, shown=shown)
        motion, label = self._motion(model, model_path, warn, shown)
        if isinstance(motion, Motion):
            motion = self._retargeted(model, model_path, motion, label, warn, shown)
        pose_only = isinstance(motion, Pose)
        if pose_only:
            motion = motion_from_pose(motion)
        motion = loading.apply_vpd_specs(model, motion, self.vpd, option=n["vpd"], warn=warn, shown=shown)
        camera = self.camera
        if isinstance(camera, (str, os.PathLike)):
            camera = loading.load_as(os.fspath(camera), Motion, "camera motion (.vmd)", n["camera"], warn=warn,
                                     shown=shown)
        last = max(motion.last_frame if motion is not None else 0, camera.last_frame if camera is not None else 0)
        frames = self.frames_for(last, "0" if pose_only else "0:")
        return LoadedTake(take=self, model=model, motion=motion, camera=camera, frames=frames, last_frame=int(last),
                          motion_label=label, model_path=model_path)

    def _motion(self, model, model_path: str, warn, shown: int):
        """(Motion / Pose / None, label): the motion given, else the model's clip, else the rest pose."""
        if isinstance(self.motion, (Motion, Pose)):
            return self.motion, getattr(self.motion, "source_path", "") or "motion"
        spec = self.frames if isinstance(self.frames, str) else None
        motion_path = os.fspath(self.motion) if self.motion is not None else None
        return loading.load_motion_for(model, model_path, motion_path, self.clip, names=self.names, warn=warn,
                                       shown=shown, rest_pose=self.rest_pose, frames=spec)

    def _retargeted(self, model, model_path: str, motion, label: str, warn, shown: int):
        """``motion`` retargeted onto ``model`` when most of its humanoid bone tracks (by MMD's names;
        else all its tracks) do not bind to it (a VMD on a VRM), saying so in one line; else ``motion`` itself. From the ``source`` model; without one,
        from MMD's standard skeleton (``STANDARD_SKELETON``) when the tracks are MMD's and ``model``
        has a humanoid (otherwise the motion is kept, and its binding report says what missed)."""
        report = bind_motion(model, motion).report()
        if not report.bone_tracks or _mostly_bound(motion, report):
            return motion
        source, shown_as = self.source, getattr(self.source, "source_path", "") or "the source model"
        if source is None:
            source = loading.load_as(STANDARD_SKELETON, Model, loading.MODEL_KINDS, self.names["source"])
            if bind_motion(source, motion).report().bound_bones < 0.5 * report.bone_tracks:
                return motion  # not an MMD motion either
            shown_as = "MMD's standard skeleton (give --source for the motion's own model)"
            try:
                out = retarget(source, motion, model, source_name=shown_as, target_name=model_path)
            except FormatError:  # the model has no humanoid to retarget onto
                return motion
        else:
            if not isinstance(source, Model):
                shown_as = os.fspath(source)
                source = loading.load_as(shown_as, Model, loading.MODEL_KINDS, self.names["source"], warn=warn,
                                         shown=shown)
            out = retarget(source, motion, model, source_name=shown_as, target_name=model_path)
            shown_as = f"{self.names['source']} {shown_as}"
        warn(f"{label}: {report.bound_bones}/{report.bone_tracks} bone tracks bind to {model_path}; "
             f"retargeted from {shown_as}")
        return out

    def frames_for(self, last: float, default: str) -> np.ndarray:
        """(F,) float64 motion frames of this take for a motion whose last key is ``last``: the
        frames given, or the spec (``default`` when there is none) at 30/fps frames apart."""
        if self.frames is None or isinstance(self.frames, str):
            try:
                return parse_frames(self.frames or default, last, bare_count=self.bare_count,
                                    default_step=MOTION_FPS / float(self.fps))
            except OptionError as e:
                raise OptionError(self.names["frames"], e.detail) from None
        return check_frames(self.frames, self.names["frames"])


@dataclass(eq=False)
class LoadedTake:
    """A Take with its inputs loaded (the Rig and the bound motion made on first use, then kept). frames (F,) float64 motion frames (30 a second); motion None
    only for the rest pose; last_frame: the last key of the motion or camera motion."""

    take: Take
    model: Model
    motion: Motion | None
    camera: Motion | None
    frames: np.ndarray
    last_frame: int
    motion_label: str
    model_path: str

    @cached_property
    def rig(self):
        """The model's Rig, built once for every character of the take."""
        return build_rig(self.model)

    @cached_property
    def bound(self) -> BoundMotion:
        """The motion bound to the model once (its binding report: ``bound.report()``)."""
        return bind_motion(self.model, self.motion)

    @classmethod
    def of(cls, model, motion=None, frames=None, **fields) -> "LoadedTake":
        """A LoadedTake of objects already in memory (the Python API's ``pose``/``bake``): ``motion`` a
        Motion, a Pose or None (the rest pose: no clip is looked up), ``frames`` motion frames (None:
        the whole motion at ``fps``); other Take fields by keyword, validated under their Python names."""
        take = Take(model, motion, frames=frames, names=PYTHON_NAMES, **fields).validate()
        if isinstance(motion, Pose):
            motion = motion_from_pose(motion)
        last = motion.last_frame if motion is not None else 0
        return cls(take=take, model=model, motion=motion, camera=take.camera, frames=take.frames_for(last, "0:"),
                   last_frame=int(last), motion_label=getattr(motion, "source_path", "") or "motion",
                   model_path=getattr(model, "source_path", "") or "model")

    @property
    def fps(self) -> float:
        return float(self.take.fps)

    @property
    def crowd(self) -> int:
        return int(self.take.crowd)

    @property
    def frame_offsets(self) -> list[float]:
        """Motion frames character k of the crowd plays ahead of the first."""
        return [k * float(self.take.crowd_frame_offset) for k in range(self.crowd)]


def check_fps_range(fps, option: str = "fps") -> float:
    """``fps`` as a float, or OptionError(option) unless a number of frames per second in (0, MAX_FPS]."""
    try:
        v = float(fps)
    except (TypeError, ValueError):
        raise OptionError(option, f"{fps!r} is not a number") from None
    if isinstance(fps, bool) or not (math.isfinite(v) and 0 < v <= MAX_FPS):
        raise OptionError(option, f"must be a number of frames per second above 0 and at most {MAX_FPS:g}, "
                                  f"got {v:g}")
    return v


_BODY = {f"{side}{part}" for side in ("left", "right")
         for part in ("Shoulder", "UpperArm", "LowerArm", "Hand", "UpperLeg", "LowerLeg", "Foot")} | \
    {"hips", "spine", "chest", "upperChest", "neck", "head", "center"}
"""Humanoid labels of the body's main bones (no fingers, eyes, toes: many MMD models lack those)."""


def _mostly_bound(motion, report) -> bool:
    """True when at least half the motion's bone tracks that name the body's main MMD bones (センター,
    上半身, 左腕, 左足, ...; all its tracks when none does) bind: an MMD model playing another
    model's VMD (fingers, hair and skirt tracks missing) is not retargeted."""
    unbound = set(report.unbound_bones)
    named = [n for n in motion.bone_track_name if (m := label_name(n)) is not None and m.scheme == "mmd"
             and m.label in _BODY]
    tracks = named or list(motion.bone_track_name)
    return sum(n not in unbound for n in tracks) >= 0.5 * len(tracks)


def _shown(value) -> str:
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else type(value).__name__


def _check_input(value, kinds, option: str, what: str, files: bool = True) -> None:
    if not isinstance(value, kinds):
        raise OptionError(option, f"{value!r} is not a {what}")
    if files and isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        try:
            st = os.stat(path)
        except OSError:
            raise OptionError(option, f"no file {path!r}") from None
        if not stat.S_ISREG(st.st_mode):
            raise OptionError(option, f"{path} is not a regular file")


def _check_frames(frames, option: str, bare_count: bool) -> None:
    if frames is None:
        return
    if isinstance(frames, str):
        start, end, _, _ = split_frames(frames, bare_count=bare_count, option=option)
        if end is not None and end < start:  # parse_frames' own words, before anything is loaded
            raise OptionError(option, f"'{frames.strip()}': the end {end:g} is before the start {start:g}")
        return
    f = check_frames(frames, option)
    if len(f) > MAX_FRAMES:
        raise OptionError(option, f"{len(f):,} frames; at most {MAX_FRAMES:,} at once")
