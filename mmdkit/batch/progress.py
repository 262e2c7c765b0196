"""Batch progress on stderr: jobs done, failures, frames/s and ETA.

In: each results row as it arrives. Out: a tqdm bar on a terminal, or a plain line at most every
``interval`` seconds (and at the end) when stderr is a log or a pipe; nothing when quiet.
"""

from __future__ import annotations

import sys
import time


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """Counts rows (ok/failed/skipped) and frames; ``update(row)``, then ``close()``."""

    def __init__(self, total: int, *, quiet: bool = False, interval: float = 10.0, stream=None):
        self.total, self.quiet, self.interval = total, quiet, interval
        self.stream = stream or sys.stderr
        self.counts = {"ok": 0, "failed": 0, "skipped": 0}
        self.frames = 0
        self.start = self._last = time.perf_counter()
        self.bar = None
        if not quiet and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="job", file=self.stream, dynamic_ncols=True)

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        ran = self.counts["ok"] + self.counts["failed"]
        remaining = self.total - self.done
        eta = f", ETA {_eta(elapsed / ran * remaining)}" if ran and remaining else ""
        return (f"{self.done}/{self.total} jobs ({self.counts['ok']} ok, {self.counts['failed']} failed, "
                f"{self.counts['skipped']} skipped), {self.frames / elapsed:,.0f} frames/s{eta}")

    def update(self, row: dict) -> None:
        self.counts[row["status"]] = self.counts.get(row["status"], 0) + 1
        if row["status"] == "ok":
            self.frames += row.get("frames", 0)
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.counts['failed']} failed, "
                                     f"{self.frames / max(time.perf_counter() - self.start, 1e-9):,.0f} frames/s")
            self.bar.update(1)
        elif time.perf_counter() - self._last >= self.interval:
            self._last = time.perf_counter()
            print(f"mmdkit: batch: {self.line()}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if not self.quiet:
            print(f"mmdkit: batch: {self.line()} in {time.perf_counter() - self.start:.1f} s",
                  file=self.stream, flush=True)
