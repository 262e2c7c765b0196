"""Assimp outside the caller: ``load(bridge_file, path, data, flags)`` = the bridge's ``load``, run
in a worker of a helper process, so that a crash, a hang or a runaway allocation inside Assimp
becomes one ``FormatError`` line instead of taking the caller down.

In: the bridge's file (``mmdkit.importers._assimp.__file__``), the model's path, its bytes (or
None to read the path) and Assimp post-processing flags (None: the bridge's default). Out: the
bridge's scene dict (numpy arrays, Assimp's space); ``ValueError`` with Assimp's own message when
it refuses the file; ``FormatError`` naming the file when a worker crashed ("Assimp crashed
(SIGSEGV) while reading this file"), ran past its time limit (SIGKILL), or past its memory limit.

How: one helper per process (``_assimp_server.py``, started on first use, ~0.3 s: Python + numpy
+ the bridge) forks one worker per file: a fork of that small single-threaded process costs a few
ms, where a fresh interpreter per file would cost ~0.3 s and forking the caller (threads, GL,
numba) is unsafe. The worker's address space is limited (``RLIMIT_AS``), its wall time is
enforced by the helper with SIGKILL (Assimp's SMD reader can loop ignoring SIGTERM), and it dies
with the helper, which dies with the caller (PR_SET_PDEATHSIG, and EOF on the pipe the caller
holds). Limits: ``MMDKIT_ASSIMP_SECONDS`` (default 60 s + 1 s per whole MiB of file) and
``MMDKIT_ASSIMP_MEMORY_MB`` (default 512 MiB + 64 MiB per whole MiB of file). Requests from threads
of one process take turns; a forked child of the caller starts its own helper.
"""

from __future__ import annotations

import atexit
import io
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mmdkit.errors import FormatError, UnavailableError, check_number

SECONDS_ENV = "MMDKIT_ASSIMP_SECONDS"
MEMORY_ENV = "MMDKIT_ASSIMP_MEMORY_MB"
SERVER = Path(__file__).with_name("_assimp_server.py")
_MIB = 1 << 20
_HEADER = struct.Struct("<Q")
_START_SECONDS = 120.0  # Python + numpy + the bridge, on a loaded machine
_SLACK_SECONDS = 30.0  # the helper enforces the limit; the caller waits this much longer for it
_ARRAY_GLOBALS = {("numpy", "dtype"), ("numpy", "ndarray"), ("numpy._core.numeric", "_frombuffer"),
                  ("numpy.core.numeric", "_frombuffer"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy.core.multiarray", "_reconstruct")}


@dataclass(frozen=True)
class Limits:
    """What one file may cost Assimp: ``seconds`` of wall time, ``memory_mb`` MiB of address space
    beyond the helper's own."""

    seconds: float
    memory_mb: float


def limits_for(size: int) -> Limits:
    """The limits for a file of ``size`` bytes (environment overrides, else the defaults)."""
    mib = size // _MIB
    seconds = check_number(os.environ.get(SECONDS_ENV) or None, SECONDS_ENV, default=60 + mib)
    memory = check_number(os.environ.get(MEMORY_ENV) or None, MEMORY_ENV, default=512 + 64 * mib)
    return Limits(seconds=seconds, memory_mb=memory)


class _Lost(Exception):
    """The helper process ended (``ended``: worth one more try) or stopped answering."""

    def __init__(self, ended: bool):
        super().__init__("the helper ended" if ended else "the helper did not answer")
        self.ended = ended


class _SceneUnpickler(pickle.Unpickler):
    """Unpickles the bridge's scene dict: plain containers, numbers, strings and numpy arrays only."""

    def find_class(self, module, name):
        if (module, name) in _ARRAY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a scene")


def _unpickle(blob: bytes):
    return _SceneUnpickler(io.BytesIO(blob)).load()


class _Helper:
    """The helper process of this process: started on first use, restarted when lost."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None

    def forget(self) -> None:
        """In a forked child: the parent's helper is not ours (its pipes are closed here)."""
        self.lock = threading.Lock()
        if self.proc is not None:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                f.close()
            self.proc.returncode = 0  # not ours to wait for
        self.proc = None

    def stop(self) -> None:
        """Kill the helper (its worker dies with it) and reap it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout, proc.stderr):
                f.close()

    def close(self) -> None:
        """At exit: EOF tells an idle helper to end."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stdin.close()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()

    def _start(self, bridge_file: str) -> None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   LIBC_FATAL_STDERR_="1")
        if not sys.executable:
            raise UnavailableError("Assimp support needs a Python executable to run its helper process")
        self.proc = subprocess.Popen([sys.executable, "-P", str(SERVER), bridge_file, str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, bufsize=0)
        try:
            ready = _unpickle(self._frame(time.monotonic() + _START_SECONDS))
        except (_Lost, pickle.UnpicklingError):
            ready = None
        if not (isinstance(ready, dict) and "ready" in ready):
            err = b""
            if self.proc.poll() is not None:
                err = self.proc.stderr.read()
            self.stop()
            last = (err.decode("utf-8", "replace").strip().splitlines() or ["it did not answer"])[-1]
            raise UnavailableError(f"Assimp's helper process did not start: {last}")

    def _frame(self, deadline: float) -> bytes:
        """One frame from the helper; ``_Lost`` on its end or past ``deadline``."""
        head = self._read(_HEADER.size, deadline)
        return self._read(_HEADER.unpack(head)[0], deadline)

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        poll = select.poll()  # not select(): a busy caller's descriptors can pass FD_SETSIZE
        poll.register(fd, select.POLLIN)
        parts, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not poll.poll(left * 1000):
                raise _Lost(ended=False)
            chunk = os.read(fd, min(n - got, 1 << 22))
            if not chunk:
                raise _Lost(ended=True)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def request(self, bridge_file: str, req: dict) -> tuple[dict, bytes]:
        """Send one request (starting the helper if needed) → (reply, pickled scene or b"")."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                self.stop()
                self._start(bridge_file)
            blob = pickle.dumps(req, protocol=5)
            view = memoryview(_HEADER.pack(len(blob)) + blob)
            while view:  # unbuffered: nothing half-sent stays in a buffer a forked child could flush
                view = view[os.write(self.proc.stdin.fileno(), view):]
            deadline = time.monotonic() + req["seconds"] + _SLACK_SECONDS
            reply = _unpickle(self._frame(deadline))  # the helper's own small dict of plain values
            return reply, self._frame(deadline)
        except BrokenPipeError:
            self.stop()
            raise _Lost(ended=True) from None
        except BaseException:  # _Lost, Ctrl-C, SIGTERM, ...: the worker must not outlive the call
            self.stop()
            raise


_HELPER = _Helper()
os.register_at_fork(after_in_child=_HELPER.forget)
atexit.register(_HELPER.close)


def _run(bridge_file: str, req: dict) -> tuple[dict, bytes]:
    with _HELPER.lock:
        try:
            return _HELPER.request(bridge_file, req)
        except _Lost as e:  # killed from outside, or its starting thread ended (PDEATHSIG): once more
            if not e.ended:
                raise
            return _HELPER.request(bridge_file, req)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def load(bridge_file: str, path: str, data: bytes | None, flags: int | None = None) -> dict:
    """The bridge's ``load(path, data, flags)`` in a helper's worker (see the module docstring)."""
    size = len(data) if data is not None else (os.path.getsize(path) if os.path.isfile(path) else 0)
    limits = limits_for(size)
    req = {"path": str(path), "data": data, "flags": flags, "seconds": limits.seconds,
           "memory": int(limits.memory_mb * _MIB)}
    try:
        reply, blob = _run(bridge_file, req)
    except _Lost as e:
        what = "ended" if e.ended else f"did not answer within {limits.seconds + _SLACK_SECONDS:g} s"
        raise FormatError(f"Assimp's helper process {what} while reading this file", path=path) from None
    kind = reply["kind"]
    if kind == "ok":
        try:
            return _unpickle(blob)
        except Exception as e:  # noqa: BLE001 - what a worker sends is not trusted
            raise FormatError(f"Assimp's worker sent something that is not a scene ({type(e).__name__})",
                              path=path) from None
    if kind == "error":
        raise ValueError(reply["detail"])
    if kind == "crash":
        raise FormatError(f"Assimp crashed ({_signal_name(reply['signal'])}) while reading this file", path=path)
    if kind == "timeout":
        raise FormatError(f"Assimp did not finish reading this file within {limits.seconds:g} s (stopped; "
                          f"{SECONDS_ENV} sets the limit)", path=path)
    if kind == "memory":
        raise FormatError(f"Assimp needed more than {limits.memory_mb:g} MiB reading this file (stopped; "
                          f"{MEMORY_ENV} sets the limit)", path=path)
    raise FormatError(f"Assimp's worker process failed while reading this file ({reply['detail'][:200]})",
                      path=path)
