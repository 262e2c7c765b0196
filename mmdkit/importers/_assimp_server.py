"""The Assimp helper process: reads files with the C++ bridge in forked workers, so that a crash,
a hang or a runaway allocation inside Assimp ends a worker, never the caller.

Run by ``mmdkit.importers.assimp_process`` as ``python -P _assimp_server.py BRIDGE_SO CALLER_PID``
(a script, not a package module: it imports only the standard library, numpy and the bridge,
loaded from its file). Single-threaded, so forking it is safe. Protocol on stdin/stdout, frames of
an 8-byte little-endian length + a pickle: first it sends ``{"ready": pid}``; then for each request
``{"path", "data" (bytes or None), "flags" (int or None), "seconds", "memory" (bytes)}`` it forks
a worker and answers ``{"kind", "detail", "signal", "maxrss_kb"}``, then a frame holding the
pickled scene dict of ``bridge.load`` (empty unless kind is "ok"). Kinds: "ok", "error" (Assimp's
message), "memory" (the address-space limit was hit), "crash" (killed by ``signal``), "timeout"
(SIGKILLed after ``seconds``) or "exit" (ended without an answer).

A worker dies with this process (PR_SET_PDEATHSIG SIGKILL); this process dies with its parent
(the same, and EOF on stdin, which the parent holds); SIGINT is ignored (the parent decides).
"""

import ctypes
import importlib.machinery
import importlib.util
import os
import pickle
import resource
import select
import signal
import struct
import sys
import time

PR_SET_PDEATHSIG = 1
_HEADER = struct.Struct("<Q")
_KINDS = {b"K": "ok", b"E": "error", b"M": "memory"}


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent ends; ends it now if the parent already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the stdin lifeline still holds
        pass
    if os.getppid() != parent:
        os._exit(1)


def read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file."""
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def send(fd: int, obj) -> None:
    blob = pickle.dumps(obj, protocol=5)
    write_all(fd, _HEADER.pack(len(blob)) + blob)


def vm_bytes() -> int:
    """This process's address-space size (VmSize)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def worker(bridge, req: dict, out_fd: int, err_fd: int, server: int) -> None:
    """In the forked child: limits, one ``bridge.load``, the pickled answer to ``out_fd``; exits."""
    os.dup2(err_fd, 2)
    os.dup2(err_fd, 1)  # stray prints of a reader cannot reach the protocol
    die_with_parent(server)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(req["seconds"]) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    limit = vm_bytes() + int(req["memory"])
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]  # a limit the caller runs under stays
    limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        args = () if req["flags"] is None else (req["flags"],)
        kind, value = b"K", pickle.dumps(bridge.load(req["path"], req["data"], *args), protocol=5)
    except MemoryError:
        kind, value = b"M", b""
    except ValueError as e:  # Assimp's error string (or a name that is not UTF-8)
        text = str(e)
        kind = b"M" if "bad_alloc" in text or "bad allocation" in text else b"E"
        value = text.encode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - anything else still becomes one line in the caller
        kind, value = b"E", f"{type(e).__name__}: {e}".encode("utf-8", "replace")
    write_all(out_fd, kind)
    write_all(out_fd, value)
    os._exit(0)


def collect(fds: list[int], deadline: float, pid: int) -> tuple[dict[int, bytes], bool]:
    """Read ``fds`` (the worker's pipes) to their ends, stdin watched for the parent's end: →
    ({fd: bytes}, whether the deadline passed first)."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
    open_fds = list(fds)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            return {fd: b"".join(c) for fd, c in chunks.items()}, True
        ready, _, _ = select.select(open_fds + [0], [], [], left)
        if 0 in ready and not os.read(0, 1 << 16):  # the parent is gone: so are we, and the worker
            os.kill(pid, signal.SIGKILL)
            os._exit(0)
        for fd in ready:
            if fd == 0:
                continue
            chunk = os.read(fd, 1 << 20)
            if chunk:
                chunks[fd].append(chunk)
            else:
                open_fds.remove(fd)
    return {fd: b"".join(c) for fd, c in chunks.items()}, False


def answer(out: bytes, err: bytes, status: int, timed_out: bool, rusage) -> tuple[dict, bytes]:
    """The reply for one finished (or killed) worker, and the pickled scene when it read one."""
    reply = {"kind": "exit", "detail": "", "signal": 0, "maxrss_kb": int(rusage.ru_maxrss)}
    text = err.decode("utf-8", "replace")
    if timed_out:
        reply["kind"] = "timeout"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        reply.update(kind="timeout" if sig == signal.SIGXCPU else "memory" if "bad_alloc" in text else "crash",
                     signal=sig)
    elif out[:1] in _KINDS and os.WEXITSTATUS(status) == 0:
        reply["kind"] = _KINDS[out[:1]]
        if reply["kind"] == "ok":
            return reply, out[1:]
        reply["detail"] = out[1:].decode("utf-8", "replace")
    else:
        reply["detail"] = f"exit status {os.WEXITSTATUS(status)}: {text.strip()[-300:]}"
    return reply, b""


def serve(bridge) -> None:
    server = os.getpid()
    send(1, {"ready": server})
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)  # started: nothing more to say on the stderr pipe the caller does not read
    os.close(quiet)
    while True:
        head = read_exact(0, _HEADER.size)
        body = read_exact(0, _HEADER.unpack(head)[0]) if head else None
        if body is None:
            return
        req = pickle.loads(body)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        deadline = time.monotonic() + float(req["seconds"])
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            os.close(err_r)
            try:
                worker(bridge, req, out_w, err_w, server)
            finally:
                os._exit(70)
        os.close(out_w)
        os.close(err_w)
        got, timed_out = collect([out_r, err_r], deadline, pid)
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, status, rusage = os.wait4(pid, 0)
        os.close(out_r)
        os.close(err_r)
        reply, scene = answer(got[out_r], got[err_r], status, timed_out, rusage)
        send(1, reply)
        write_all(1, _HEADER.pack(len(scene)))
        write_all(1, scene)


def main() -> None:
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else parent)
    import numpy  # noqa: F401 - the bridge hands back numpy arrays: imported once, before any fork

    loader = importlib.machinery.ExtensionFileLoader("mmdkit.importers._assimp", sys.argv[1])
    bridge = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(bridge)
    serve(bridge)


if __name__ == "__main__":
    main()
