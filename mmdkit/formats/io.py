"""File-level entry points: ``load(path)`` → Model | Motion | Pose, ``save(obj, path)``.

In: a path whose extension names the format (.pmx .pmd .vmd .vpd, any case). Out: the built,
frozen object. ``save`` serialises fully in memory first, then writes a temporary file in the
target folder and renames it into place, so a failed save never leaves a partial file.
"""

from __future__ import annotations

import os
from pathlib import Path

from mmdkit.fileutil import atomic_path
from mmdkit.errors import FormatError

FORMATS = (".pmx", ".pmd", ".vmd", ".vpd")


def _ext(path) -> str:
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise FormatError(f"unknown extension {ext!r} (expected one of {', '.join(FORMATS)})", path=str(path))
    return ext


def read_bytes(path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise FormatError(f"cannot read: {e.strerror or e}", path=str(path)) from None


def parse(data: bytes, ext: str, path: str = ""):
    """Bytes of a file of type ``ext`` ('.pmx', ...) → Model | Motion | Pose."""
    if ext == ".pmx":
        from mmdkit.formats.pmx import read_pmx
        from mmdkit.model.build import build_model

        return build_model(read_pmx(data, path))
    if ext == ".pmd":
        from mmdkit.formats.pmd import read_pmd
        from mmdkit.model.build import build_model

        return build_model(read_pmd(data, path))
    if ext == ".vmd":
        from mmdkit.formats.vmd import read_vmd

        return read_vmd(data, path)
    if ext == ".vpd":
        from mmdkit.formats.vpd import read_vpd

        return read_vpd(data, path)
    raise FormatError(f"unknown format {ext!r}", path=path)


def load(path):
    """Read a PMX/PMD (→ Model), VMD (→ Motion) or VPD (→ Pose) file, chosen by extension."""
    ext = _ext(path)
    return parse(read_bytes(path), ext, str(path))


def serialize(obj, ext: str) -> bytes:
    """Model | Motion | Pose → bytes of format ``ext``."""
    from mmdkit.animation.motion import Motion, Pose
    from mmdkit.model.model import Model

    if isinstance(obj, Model) and obj.vertex_position is None:
        from mmdkit.errors import BuildError

        raise BuildError("this Model has no arrays (a bare Model()); make models with "
                         "mmdkit.model.builder.ModelBuilder or load them", section="save")
    if isinstance(obj, Model) and ext == ".pmx":
        from mmdkit.formats.pmx import write_pmx

        return write_pmx(obj)
    if isinstance(obj, Model) and ext == ".pmd":
        from mmdkit.formats.pmd import write_pmd

        return write_pmd(obj)
    if isinstance(obj, Motion) and ext == ".vmd":
        from mmdkit.formats.vmd import write_vmd

        return write_vmd(obj)
    if isinstance(obj, Pose) and ext == ".vpd":
        from mmdkit.formats.vpd import write_vpd

        return write_vpd(obj)
    raise FormatError(f"cannot write a {type(obj).__name__} as {ext}")


def save(obj, path) -> None:
    """Write ``obj`` to ``path`` in the format its extension names, atomically."""
    ext = _ext(path)
    data = serialize(obj, ext)
    with atomic_path(path, ".tmp") as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
