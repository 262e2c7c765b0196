"""Where a batch's outputs go: a local folder, or an fsspec URL (s3://, gs://, file://, ...).

In: the output root as typed. Out: ``Store`` — per job a local folder to write into (the job's own
folder when the root is local; a temporary folder uploaded file by file when it is a URL), the job
record (``<job>/.mmdkit-job.json``, always written last, so a job without one is not done) and
whole small files (results tables) written atomically. ``lock`` keeps a second batch out of a local
root while one runs (``.mmdkit-batch.lock``, an flock released when the process ends, even killed;
the shards of one manifest run side by side).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile

from mmdkit.errors import OptionError, UnavailableError
from mmdkit.fileutil import atomic_path

RECORD = ".mmdkit-job.json"
"""The job record's file name inside each job folder."""
LOCK_NAME = ".mmdkit-batch"
"""``.mmdkit-batch.lock`` in a local root: flock'ed by the batches running there (never written);
``.mmdkit-batch-results-I-of-N.lock`` per shard. ``….pid`` beside each: the holder's PID while it runs."""


def is_url(root: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", root) is not None


class Store:
    """The output root of a batch (a folder or an fsspec URL). Picklable: workers rebuild it."""

    def __init__(self, root):
        self.root = os.fspath(root)
        self.url = is_url(self.root)
        if not self.url:
            self.root = os.path.abspath(self.root)
        self._fs = None

    def __getstate__(self):
        return {"root": self.root, "url": self.url, "_fs": None}

    @property
    def fs(self):
        """The fsspec file system of a URL root (created on first use, in each process)."""
        if self._fs is None:
            try:
                import fsspec
            except ImportError:
                raise UnavailableError(f"{self.root}: writing to a URL needs fsspec: pip install 'mmdkit[ray]'") from None
            self._fs, self._path = fsspec.core.url_to_fs(self.root)
        return self._fs

    def _remote(self, *parts) -> str:
        self.fs  # noqa: B018 (sets _path)
        return "/".join([self._path.rstrip("/"), *parts])

    def location(self, name: str, filename: str) -> str:
        """Where a job's file ends up, as a path or URL (what results.jsonl reports)."""
        parts = [p for p in (name, filename) if p]
        if self.url:
            return "/".join([self.root.rstrip("/"), *parts])
        return os.path.join(self.root, *parts)

    def prepare(self) -> None:
        """Create the root (a local folder; a URL's bucket must exist)."""
        if self.url:
            self.fs.makedirs(self._remote(), exist_ok=True)
        else:
            os.makedirs(self.root, exist_ok=True)

    def local_root(self) -> str | None:
        """The root as a local folder (a file:// URL included), or None for a remote URL."""
        if not self.url:
            return self.root
        return self._path if getattr(self.fs, "protocol", None) in ("file", ("file", "local")) else None

    @contextlib.contextmanager
    def lock(self, part: str | None = None):
        """Hold the root for this batch. A whole run holds the folder's lock exclusively; a shard
        (``part``: its results name, 'results-0-of-4') holds it shared and its own shard's lock
        exclusively — the shards of a manifest run side by side (their jobs and results tables are
        their own) while a second run of the same jobs is refused with an OptionError naming the
        folder and the PID running there (exit 2). The locks are the kernel's (flock): a killed batch
        leaves none behind. Remote URLs are not locked (run one batch per URL)."""
        root = self.local_root()
        if root is None:
            yield
            return
        name = f"{LOCK_NAME}-{part}" if part else LOCK_NAME
        with contextlib.ExitStack() as stack:
            self._hold(stack, root, f"{LOCK_NAME}.lock", shared=part is not None)
            if part:
                self._hold(stack, root, f"{name}.lock", shared=False)
            with contextlib.suppress(OSError):
                self.write_text(f"{name}.pid", str(os.getpid()))
                stack.callback(_remove_temporary, root, lambda n: n == f"{name}.pid")  # before the unlock
            yield

    def _hold(self, stack, root: str, filename: str, *, shared: bool) -> None:
        import fcntl

        fd = os.open(os.path.join(root, filename), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        stack.callback(os.close, fd)  # closing releases the lock
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OptionError("-o", f"{self.root} is in use by another batch ({_owners(root)}); wait for it "
                                    f"to end or give another output folder") from None
        except OSError:  # a file system without locks (some network mounts): run unlocked
            pass

    def remove_leftovers(self, part: str | None = None) -> None:
        """Remove the temporary files a killed or failed run left in a local root (``.NAME.….part``):
        all of them for a whole run, those of its own results table for shard ``part``; each job
        folder's are removed when its job runs. Call under ``lock``."""
        root = self.local_root()
        if root is not None:
            mine = (f".{part}.", f".{LOCK_NAME}-{part}.") if part else (".",)
            _remove_temporary(root, lambda n: n.startswith(mine) and n.endswith(".part"))

    def job_names(self) -> set:
        """Names of the job folders under the root (one listing, so a fresh run reads no records)."""
        try:
            if self.url:
                return {os.path.basename(p.rstrip("/")) for p in self.fs.ls(self._remote(), detail=False)}
            return set(os.listdir(self.root))
        except (OSError, FileNotFoundError):
            return set()

    def read_record(self, name: str) -> dict | None:
        """The job record of job ``name``, or None when there is none (or it is unreadable)."""
        try:
            if self.url:
                text = self.fs.cat_file(self._remote(name, RECORD)).decode("utf-8")
            else:
                with open(os.path.join(self.root, name, RECORD), encoding="utf-8") as f:
                    text = f.read()
            record = json.loads(text)
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def has_outputs(self, name: str, outputs) -> bool:
        """True when every {filename, size} of ``outputs`` exists with that size."""
        try:
            for o in outputs:
                if self.url:
                    size = self.fs.size(self._remote(name, o["filename"]))
                else:
                    size = os.path.getsize(os.path.join(self.root, name, o["filename"]))
                if size != o["size"]:
                    return False
        except (OSError, KeyError, TypeError):
            return False
        return True

    @contextlib.contextmanager
    def job_folder(self, name: str):
        """A local folder for job ``name``'s outputs: its own folder (outputs written atomically into
        it) or, for a URL, a temporary one that ``publish`` uploads from and which is removed after."""
        if not self.url:
            folder = os.path.join(self.root, name)
            os.makedirs(folder, exist_ok=True)
            _remove_temporary(folder, lambda n: n.startswith(".") and n != RECORD)
            yield folder
            return
        folder = tempfile.mkdtemp(prefix=f"mmdkit-batch-{name[:40]}-")
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def publish(self, name: str, folder: str, filenames) -> None:
        """Upload ``filenames`` from the temporary ``folder`` (URL roots; local roots have them already)."""
        if self.url:
            self.fs.makedirs(self._remote(name), exist_ok=True)
            for fn in filenames:
                self.fs.put_file(os.path.join(folder, fn), self._remote(name, fn))

    def write_record(self, name: str, record: dict) -> None:
        """Write the job record — the last file of a job; its presence means the job is complete."""
        self.write_text(f"{name}/{RECORD}", json.dumps(record, indent=1, sort_keys=True))

    def write_text(self, relpath: str, text: str) -> None:
        """Write a small text file under the root, atomically where the root is local."""
        if self.url:
            target = self._remote(*relpath.split("/"))
            self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            with self.fs.open(target, "w", encoding="utf-8") as f:
                f.write(text)
            return
        path = os.path.join(self.root, *relpath.split("/"))
        with naming(path), atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write(text)


def _owners(root: str) -> str:
    """'PID 123' (or 'PIDs 123, 456') of the batches holding locks in ``root``, from their .pid files."""
    pids = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(root)):
            if name.startswith(LOCK_NAME) and name.endswith(".pid"):
                with contextlib.suppress(OSError, ValueError), open(os.path.join(root, name), encoding="utf-8") as f:
                    pids.append(str(int(f.read().strip())))
    return f"PID{'s' if len(pids) > 1 else ''} {', '.join(pids)}" if pids else "PID unknown"


@contextlib.contextmanager
def naming(path: str):
    """An OSError without a file name inside the block (a full disk, a file size limit: the write
    itself failed) is re-raised naming ``path``, the file being written."""
    try:
        yield
    except OSError as e:
        if e.filename or not e.strerror:
            raise
        raise type(e)(e.errno, e.strerror, path) from None


def _remove_temporary(folder: str, is_temporary) -> None:
    """Remove the entries of ``folder`` whose names ``is_temporary`` accepts (temporary files of a run
    killed outright, a render's frame folders); what cannot be removed is left."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if is_temporary(name):
                path = os.path.join(folder, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
