"""Atomic output files: write to a temporary file beside the target, rename when complete.
(And ``same_file``: whether an output path names an input.)

In: the target path. Out: a context manager yielding the temporary path; on success the file
gets normal permissions (0666 minus the umask, like open()) and replaces the target; on any
error it is removed, so a failed write never leaves a partial file; errors about the
temporary file name the target path as given.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def same_file(a, b) -> bool:
    """True when paths ``a`` and ``b`` name one existing file (False when either is missing).
    abspath first, as the writers do: 'missing/../x' is 'x' to them, an error to stat."""
    try:
        return os.path.samefile(os.path.abspath(a), os.path.abspath(b))
    except OSError:
        return False


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _as_typed(e: OSError, tmp: str | None, typed: str) -> OSError:
    """An OSError about the temporary file (``tmp``; None: any file) re-aimed at the path typed."""
    if tmp is None or tmp in (e.filename, e.filename2):
        return type(e)(e.errno, e.strerror, typed)
    return e


@contextlib.contextmanager
def atomic_path(path, suffix: str = ".part"):
    """Yield a temp path in the target's folder; rename it onto ``path`` when the block ends.
    An OSError about the temporary file (missing folder, a folder in the way, disk full) names
    ``path`` as given instead."""
    typed = os.fspath(path)
    path = os.path.abspath(typed)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=suffix,
                                   dir=os.path.dirname(path))
    except OSError as e:
        raise _as_typed(e, None, typed) from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _as_typed(e, tmp, typed) from None
        raise
