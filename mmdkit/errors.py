"""The one error class for bad input files, and warnings about recovered files.

In: what a reader found wrong (file, section, byte offset, message).
Out: ``FormatError`` (raised) whose ``str`` is one line a user can act on.
"""

from __future__ import annotations


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
