"""Atomic output files: write to a temporary file beside the target, rename when complete.

In: the target path. Out: a context manager yielding the temporary path; on success the file
gets normal permissions (0666 minus the umask, like open()) and replaces the target; on any
error it is removed, so a failed write never leaves a partial file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path, suffix: str = ".part"):
    """Yield a temp path in the target's folder; rename it onto ``path`` when the block ends."""
    path = os.path.abspath(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=suffix,
                               dir=os.path.dirname(path))
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
