"""Output paths as typed: checked before any work, and named (not the hidden temp file) on failure.

In: the output path the user typed, the input paths of the command. Out: nothing, or an
``OptionError`` naming the option and the typed path: the output is one of the inputs, its
folder is missing or not writable, a folder stands where a file goes. ``writing(path)`` turns
an OSError raised while writing (disk full, permissions) into the same one-line error.
``count(n, noun)`` words a number for the summary lines ('1 frame', '3 frames').
"""

from __future__ import annotations

import contextlib
import os

from mmdkit.errors import OptionError
from mmdkit.fileutil import same_file


def check_output(path: str, inputs=(), *, option: str = "-o", folder_ok: bool = False) -> None:
    """Refuse an output that would overwrite an input or cannot be written; its folder must exist
    (the one rule of every command: mmdkit creates no folder an output path names).

    ``folder_ok``: the output may be (or become) a folder (PNG frames).
    """
    for inp in inputs:
        if inp and same_file(path, inp):
            raise OptionError(option, f"{path} is the input file {inp}; choose another output path")
    if os.path.isdir(path) and not folder_ok:
        raise OptionError(option, f"{path} is a folder; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        what = "is not a folder" if os.path.exists(parent) else "does not exist"
        raise OptionError(option, f"cannot write {path}: {parent} {what}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OptionError(option, f"cannot write {path}: folder {parent} is not writable")


@contextlib.contextmanager
def writing(path: str, option: str = "-o"):
    """Run the block that writes ``path``; an OSError in it becomes OptionError naming ``path``."""
    try:
        yield
    except OSError as e:
        raise OptionError(option, f"cannot write {path}: {e.strerror or e}") from None


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 frame', '2 frames', '1,024 vertices' (``plural`` for nouns that do not take an s)."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
