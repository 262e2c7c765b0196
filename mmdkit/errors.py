"""The error family: every error a user can cause is an ``MmdkitError`` with a one-line message.

In: what was wrong and where (file, section, byte offset; option name; frame).
Out: exceptions whose ``str`` is one line a user can act on; the CLI catches ``MmdkitError``
once and prints it (exit 2). Subclasses also derive from the built-in they refine
(``ValueError``, ``RuntimeError``) so existing ``except ValueError`` code keeps working.
- ``FormatError``: a file (or in-memory data) is malformed; ``BuildError``: arrays given to a
  builder are inconsistent.
- ``OptionError``: an argument or option value is out of range (names the option and value);
  ``check_number`` is the one check of a numeric option (fps, scale, tolerance).
- ``UnavailableError``: an optional part is missing (the Bullet extension, an OpenGL context,
  a codec) — says what to install.
- ``PhysicsError``, ``RenderError``: run-time failures of those stages, naming the model file.
"""

from __future__ import annotations

import math


class MmdkitError(Exception):
    """Base of every error mmdkit raises on purpose."""


class FormatError(MmdkitError, ValueError):
    """A file (or in-memory data) is malformed.

    Attributes: ``path`` (str or ''), ``section`` (e.g. 'vertices', 'bone keys'),
    ``offset`` (byte offset or None), ``detail`` (what was wrong).
    """

    def __init__(self, detail: str, *, path: str = "", section: str = "", offset: int | None = None):
        self.path = str(path)
        self.section = section
        self.offset = offset
        self.detail = detail
        parts = []
        if self.path:
            parts.append(self.path)
        if section:
            parts.append(f"section '{section}'")
        if offset is not None:
            parts.append(f"byte {offset}")
        where = ", ".join(parts)
        super().__init__(f"{where}: {detail}" if where else detail)


class BuildError(FormatError):
    """Arrays given to a builder are inconsistent (index out of range, wrong shape)."""


class OptionError(MmdkitError, ValueError):
    """An argument or option value is not allowed. ``option`` names it (e.g. '--fps', 'fps')."""

    def __init__(self, option: str, detail: str):
        self.option = option
        self.detail = detail
        super().__init__(f"{option}: {detail}" if option else detail)


def check_number(value, option: str, *, default=None, zero_ok: bool = False) -> float:
    """``value`` (None → ``default``) as a float, or OptionError(option) unless finite and > 0
    (>= 0 with ``zero_ok``)."""
    v = default if value is None else value
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise OptionError(option, f"{value!r} is not a number") from None
    if not (math.isfinite(v) and (v >= 0 if zero_ok else v > 0)):
        raise OptionError(option, f"must be a finite number {'>=' if zero_ok else '>'} 0, not {v:g}")
    return v


def check_flag(value, option: str, *, none_ok: bool = False) -> bool:
    """``value`` as a bool (None → False with ``none_ok``), or OptionError(option) unless it is
    true or false (Python's or numpy's bool; not 1, 'yes' ...)."""
    if value is None and none_ok:
        return False
    if not (isinstance(value, bool) or type(value).__name__ == "bool_"):
        raise OptionError(option, f"must be true or false, got {value!r}")
    return bool(value)


class UnavailableError(MmdkitError, RuntimeError):
    """An optional component is missing (Bullet extension, OpenGL, a codec); says how to get it."""


class PhysicsError(MmdkitError, RuntimeError):
    """The physics stage failed for a model (message names the model file)."""


class RenderError(MmdkitError, RuntimeError):
    """The renderer failed (no GL context, a shader did not compile, an output cannot be written)."""
