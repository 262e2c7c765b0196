"""Readers and writers registered per file extension (like trimesh's loaders).

In: ``register_reader(ext, fn, kind)`` / ``register_writer(ext, type, fn)`` calls, where ``fn``
is a callable (to keep a heavy module lazy, a small function that imports it when called). Out:
``reader_for(path)`` → ``Reader`` (``.read(data, path)`` → the built object) and
``writer_for(obj, path)`` → ``fn(obj) -> bytes``; both raise ``FormatError`` naming the file
and the known extensions. ``mmdkit.load``/``mmdkit.save`` (``formats/io.py``) go through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mmdkit.errors import FormatError


@dataclass(frozen=True)
class Reader:
    """One registered reader: ``read(data: bytes, path: str)`` → Model | Motion | Pose | ...;
    ``kind`` says what it gives ('model', 'motion', 'pose', ...)."""

    ext: str
    fn: object
    kind: str

    def read(self, data: bytes, path: str = ""):
        return self.fn(data, path)


_READERS: dict[str, Reader] = {}
_WRITERS: dict[str, list[tuple[type, object]]] = {}


def _norm(ext: str) -> str:
    ext = ext.lower()
    return ext if ext.startswith(".") else "." + ext


def _check_callable(fn, ext: str) -> None:
    if not callable(fn):
        raise TypeError(f"the reader or writer registered for {ext!r} must be a function, not {fn!r}")


def register_reader(ext: str, fn, kind: str) -> None:
    """Make ``load`` read files ending in ``ext`` ('.pmx', 'glb', any case) with
    ``fn(data: bytes, path: str)``; a later registration for the same extension replaces it."""
    _check_callable(fn, ext)
    ext = _norm(ext)
    _READERS[ext] = Reader(ext, fn, kind)


def register_writer(ext: str, type_: type, fn) -> None:
    """Make ``save`` write instances of ``type_`` to ``ext`` files with ``fn(obj) -> bytes``."""
    _check_callable(fn, ext)
    ext = _norm(ext)
    _WRITERS[ext] = [(t, f) for t, f in _WRITERS.get(ext, []) if t is not type_] + [(type_, fn)]


def known_extensions(kind: str | None = None) -> tuple[str, ...]:
    """Extensions ``load`` reads (those giving ``kind`` — 'model', 'motion', ... — when given),
    in registration order; for messages and help texts."""
    return tuple(e for e, r in _READERS.items() if kind is None or r.kind == kind)


def _unknown(path, ext: str, exts) -> FormatError:
    return FormatError(f"unknown extension {ext!r} (expected one of {', '.join(exts)})", path=str(path))


def reader_for(path="", ext: str | None = None) -> Reader:
    """The reader for ``ext`` (default: ``path``'s extension), else ``FormatError`` naming
    ``path`` and listing the known extensions."""
    ext = _norm(ext) if ext else Path(path).suffix.lower()
    r = _READERS.get(ext)
    if r is None:
        raise _unknown(path, ext, known_extensions())
    return r


def writer_for(obj, path="", ext: str | None = None):
    """``fn(obj) -> bytes`` for writing ``obj`` as ``ext`` (default: ``path``'s extension),
    else ``FormatError`` saying why."""
    ext = _norm(ext) if ext else Path(path).suffix.lower()
    if ext not in _WRITERS:
        raise _unknown(path, ext, tuple(_WRITERS))
    for type_, fn in _WRITERS[ext]:
        if isinstance(obj, type_):
            return fn
    raise FormatError(f"cannot write a {type(obj).__name__} as {ext}", path=str(path))
