"""Shared CLI helpers: frame ranges, loading with type checks, atomic npz writes, physics."""

from __future__ import annotations

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
