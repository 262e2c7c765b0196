"""File-level entry points: ``load(path)`` → Model | Motion | Pose, ``save(obj, path)``.

In: a path whose extension names a registered format (``formats/registry.py``; built in: .pmx
.pmd .vmd .vpd, any case). Out: the built, frozen object. ``save`` serialises fully in memory
first, then writes a temporary file in the target folder and renames it into place, so a
failed save never leaves a partial file.
"""

from __future__ import annotations

import os
import stat

from mmdkit.errors import BuildError, FormatError, OptionError
from mmdkit.fileutil import atomic_path
from mmdkit.formats.registry import reader_for, writer_for
from mmdkit.model.model import Model


def read_bytes(path) -> bytes:
    """The whole regular file at ``path``, never more than the size it had when opened
    (``FormatError`` naming it for a folder, FIFO, device or a file that cannot be read).
    Opened non-blocking, so a FIFO without a writer does not hang."""
    parts = list(read_chunks(path))
    return b"".join(parts) if len(parts) != 1 else parts[0]


def read_chunks(path, chunk: int | None = None):
    """``read_bytes`` in pieces of at most ``chunk`` bytes (None: as few as the system gives), for
    callers that need not hold the whole file (a content hash)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FormatError(f"cannot read: {e.strerror or e}", path=str(path)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FormatError("not a regular file (a folder, pipe or device cannot be read as a model or motion)",
                          path=str(path))
    left = st.st_size
    with os.fdopen(fd, "rb", buffering=0) as fh:
        while left > 0:
            try:
                b = fh.read(min(left, chunk or left))
            except OSError as e:
                raise FormatError(f"cannot read: {e.strerror or e}", path=str(path)) from None
            if not b:
                break
            left -= len(b)
            yield b


def parse(data: bytes, ext: str, path: str = ""):
    """Bytes of a file of type ``ext`` ('.pmx', ...) → Model | Motion | Pose."""
    return reader_for(path, ext).read(data, path)


def load(path):
    """Read a PMX/PMD (→ Model), VMD (→ Motion) or VPD (→ Pose) file, chosen by extension.
    Running out of memory while reading is the file's doing: a FormatError naming it."""
    reader = reader_for(path)
    try:
        return reader.read(read_bytes(path), str(path))
    except MemoryError:
        size = os.path.getsize(path) if os.path.isfile(path) else 0
        raise FormatError(f"out of memory while reading this {size / 2**20:,.1f} MiB file (what it holds needs "
                          "more memory than is available)", path=str(path)) from None


def load_as(path, cls, what: str, option: str):
    """``load(path)``, refused with an OptionError naming ``option`` (how the caller shows the input:
    'MODEL', 'motion', ...) unless it is a ``cls`` — the one check of what a command or a batch job was given."""
    obj = load(path)
    if not isinstance(obj, cls):
        raise OptionError(option, f"{path} is a {type(obj).__name__}, expected a {what}")
    return obj


def serialize(obj, ext: str, path: str = "") -> bytes:
    """Model | Motion | Pose → bytes of format ``ext``."""
    if isinstance(obj, Model) and obj.vertex_position is None:
        raise BuildError("this Model has no arrays (a bare Model()); make models with "
                         "mmdkit.model.builder.ModelBuilder or load them", section="save")
    return writer_for(obj, path, ext)(obj)


def save(obj, path) -> None:
    """Write ``obj`` to ``path`` in the format its extension names, atomically."""
    data = serialize(obj, os.path.splitext(str(path))[1], str(path))
    with atomic_path(path, ".tmp") as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
