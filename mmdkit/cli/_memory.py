"""How much memory a command may plan to hold, and the one ``--frames`` check against it.

In: the number of frames asked for and the caller's estimate of bytes per frame for the outputs it
holds in memory until written (pose: bone matrices, morph weights, vertices; export: the bake
and the writer's copies). Out: nothing, or an ``OptionError`` naming ``--frames``, what was
typed, the estimate and the memory available — before any frame is posed; ``out_of_memory_blames``
turns a MemoryError during the work into the same kind of line (files that exhaust memory while
being read are named by ``mmdkit.formats.io.load`` instead). The budget is
``MEMORY_SHARE`` of the memory available when the command starts: the smallest of the system's
MemAvailable, the cgroup's memory.max headroom and the address-space limit (``ulimit -v``) left.
"""

from __future__ import annotations

import contextlib
import os
import resource

from mmdkit.errors import OptionError

#: Share of the available memory the per-frame outputs may take (the rest: the process itself,
#: the writer's temporary copies, other programs).
MEMORY_SHARE = 0.5
GIB = 2**30


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _proc_kib(path: str, key: str) -> int | None:
    """A 'Key:  N kB' field of a /proc file, in bytes (None where absent)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_bytes() -> int:
    """Bytes this process can still allocate: the least of MemAvailable (physical memory where
    /proc is unreadable), the cgroup v2 memory.max less memory.current, and RLIMIT_AS less the
    address space in use."""
    have = [_proc_kib("/proc/meminfo", "MemAvailable")
            or os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        have.append(max(0, limit - used))
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        have.append(max(0, soft - (_proc_kib("/proc/self/status", "VmSize") or 0)))
    return min(have)


def check_frames_memory(spec: str, num_frames: int, bytes_per_frame: int, what: str, verb: str,
                        option: str = "--frames") -> None:
    """Refuse ``num_frames`` frames of ``bytes_per_frame`` each when together they exceed
    ``MEMORY_SHARE`` of ``available_bytes()``; ``what`` says what a frame holds ('83 bones'),
    ``verb`` what the command does with frames ('pose')."""
    need = num_frames * bytes_per_frame
    budget = int(available_bytes() * MEMORY_SHARE)
    if need > budget:
        most = max(1, budget // max(bytes_per_frame, 1))
        raise OptionError(option, f"'{spec}' selects {num_frames:,} frames ({what}, about {bytes_per_frame:,} bytes "
                                  f"a frame): about {need / GIB:,.1f} GiB, more than the {budget / GIB:,.1f} GiB "
                                  f"of memory this run may use ({MEMORY_SHARE:.0%} of what is available); "
                                  f"{verb} fewer frames per run (at most {most:,})")


@contextlib.contextmanager
def out_of_memory_blames(option: str, doing: str, advice: str):
    """Run the block; a MemoryError in it (the work the options asked for, after the files were
    read) becomes an OptionError naming ``option``: '<option>: out of memory <doing>; <advice>'."""
    try:
        yield
    except MemoryError:
        raise OptionError(option, f"out of memory {doing}; {advice}") from None
