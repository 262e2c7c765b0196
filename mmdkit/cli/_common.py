"""Shared CLI helpers: frame ranges, loading with type checks, atomic npz writes, physics."""

from __future__ import annotations

import os

import click
import numpy as np


def parse_frames(spec: str, last: int) -> np.ndarray:
    """'A:B[:STEP]' (B inclusive, empty = last key frame) or 'N' → (F,) float64 frames."""
    parts = spec.split(":")
    try:
        if len(parts) == 1:
            return np.array([float(parts[0])])
        a = float(parts[0]) if parts[0] else 0.0
        b = float(parts[1]) if parts[1] else float(last)
        step = float(parts[2]) if len(parts) > 2 and parts[2] else 1.0
    except ValueError:
        raise click.BadParameter(f"'{spec}' is not A:B[:STEP]", param_hint="--frames")
    if step <= 0 or b < a:
        raise click.BadParameter(f"'{spec}': need A <= B and STEP > 0", param_hint="--frames")
    return np.arange(a, b + step * 0.5, step)


def load_as(path: str, cls, what: str):
    import mmdkit

    obj = mmdkit.load(path)
    if not isinstance(obj, cls):
        raise click.BadParameter(f"{path} is a {type(obj).__name__}, expected a {what}")
    return obj


def make_physics(model, enabled: bool, **kw):
    """An MMDPhysics for the model, or None (with a one-line warning if unavailable)."""
    if not enabled:
        return None
    try:
        from mmdkit.physics import MMDPhysics
    except ImportError as e:
        raise click.ClickException(f"physics is not available ({e}); run scripts/setup.sh or use --no-physics")
    return MMDPhysics(model, **kw)


def save_npz_atomic(path: str, **arrays) -> None:
    """Write an .npz to a temp file in the target folder, then rename it into place."""
    from mmdkit.fileutil import atomic_path

    with atomic_path(path, ".npz.part") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


VPD_OPTION_HELP = ("Load a VPD pose onto the motion at a frame, as MMD's load pose + register: "
                   "FILE.vpd@FRAME[:WEIGHT] (weight 0..1 blends from the motion to the pose; "
                   "repeatable), e.g. --vpd hands.vpd@120:0.5")


def apply_vpd_options(model, motion, specs):
    """The motion with each ``FILE.vpd@FRAME[:WEIGHT]`` of ``specs`` applied in order."""
    from mmdkit import Pose
    from mmdkit.animation.vpd import apply_pose, motion_from_pose

    if specs and isinstance(motion, Pose):
        motion = motion_from_pose(motion)
    for spec in specs or ():
        path, _, at = spec.rpartition("@")
        if not path:
            raise click.BadParameter(f"'{spec}' is not FILE.vpd@FRAME[:WEIGHT]", param_hint="--vpd")
        frame, _, weight = at.partition(":")
        try:
            frame_i, weight_f = int(frame), float(weight) if weight else 1.0
        except ValueError:
            raise click.BadParameter(f"'{spec}': FRAME must be an integer, WEIGHT a number", param_hint="--vpd")
        if frame_i < 0 or not 0.0 <= weight_f <= 1.0:
            raise click.BadParameter(f"'{spec}': need FRAME >= 0 and 0 <= WEIGHT <= 1", param_hint="--vpd")
        if not os.path.isfile(path):
            raise click.BadParameter(f"'{spec}': no file {path!r}", param_hint="--vpd")
        pose = load_as(path, Pose, "pose (.vpd)")
        motion = apply_pose(model, motion, pose, frame_i, weight=weight_f)
    return motion

