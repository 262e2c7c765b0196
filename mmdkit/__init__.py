"""mmdkit: load, animate, simulate, skin and render MikuMikuDance data, headless.

Entry points: ``load(path)`` → Model | Motion | Pose; ``save(obj, path)``.
"""

from __future__ import annotations

from mmdkit.animation.motion import Motion, Pose
from mmdkit.errors import (BuildError, FormatError, MmdkitError, OptionError, PhysicsError, RenderError,
                           UnavailableError)
from mmdkit.model.model import Model

__version__ = "0.1.0"
__all__ = ["Model", "Motion", "Pose", "FormatError", "BuildError", "MmdkitError", "OptionError", "UnavailableError",
           "PhysicsError", "RenderError", "load", "save"]


def load(path):
    """Read a PMX/PMD (→ Model), VMD (→ Motion) or VPD (→ Pose) file, chosen by extension."""
    from mmdkit.formats.io import load as _load

    return _load(path)


def save(obj, path):
    """Write a Model (.pmx/.pmd), Motion (.vmd) or Pose (.vpd) atomically (temp file + rename)."""
    from mmdkit.formats.io import save as _save

    return _save(obj, path)
