"""Planning a batch: content hashes of the inputs, each job's key, what is already done, the order.

In: named ``Job`` objects and the ``Store``. Out: ``Plan`` — the jobs to run (key set, ordered by
model so a worker loads each model once for a run of jobs), a 'skipped' result row for each job
whose record matches its key and whose outputs are all there, and a 'failed' row for each job whose
input file is missing or is not a regular file (a FIFO or device would block or never end; it is
refused without being read). Each file is hashed once per run (cached by path, size and mtime), never
more than the size it had when opened.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from importlib.metadata import version

from mmdkit.errors import MmdkitError
from mmdkit.formats.io import read_chunks

KEY_VERSION = 1
"""Bumped when the meaning of a job key changes (every job then runs again)."""
HASH_CHUNK = 1 << 20
"""Bytes read at a time when hashing an input."""
_VERSION = version("mmdkit")
"""mmdkit's version is part of every key: a new release runs every job again."""


class FileHasher:
    """sha256 of file contents, cached by (absolute path, size, mtime): a file is read once per run."""

    def __init__(self):
        self._cache = {}
        self._seen = {}

    def begin(self) -> None:
        """Start a planning pass: each file is stat'ed once in it (a file changed later is a new pass's)."""
        self._seen = {}

    def digest(self, path: str) -> str:
        if path in self._seen:
            return self._seen[path]
        self._seen[path] = self._digest(path)
        return self._seen[path]

    def _digest(self, path: str) -> str:
        st = os.stat(path)
        sig = (st.st_size, st.st_mtime_ns)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        # the loaders' own read: a FIFO or device is refused (FormatError) without blocking, and no
        # more than the size the file had when opened is read (a /proc file or a growing log ends),
        # a MiB at a time (a long audio file is not held whole)
        h = hashlib.sha256()
        for piece in read_chunks(path, HASH_CHUNK):
            h.update(piece)
        digest = h.hexdigest()
        self._cache[path] = (sig, digest)
        return digest


def job_key(job, hasher: FileHasher) -> str:
    """Hash of what decides a job's outputs: input contents, outputs, options, mmdkit's version.
    OSError when an input file is missing, FormatError when it is not a regular file."""
    spec = {"v": KEY_VERSION, "mmdkit": _VERSION, "outputs": list(job.outputs),
            "inputs": {role: hasher.digest(path) for role, path in job.inputs().items()},
            "settings": {o: job.output_settings(o) for o in job.outputs}}
    if job.clip is not None or job.vpd:  # only then: the keys of jobs without them stay as they were
        spec.update(clip=job.clip, vpd=list(job.vpd))
    if job.crowd != 1:
        spec.update(crowd=job.crowd)
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()


def job_row(job, status: str, **fields) -> dict:
    """A results row for ``job`` (see docs/batch.md for the columns)."""
    row = {"name": job.name, "status": status, "model": job.model, "motion": job.motion, "where": job.where,
           "seconds": 0.0, "frames": 0, "outputs": [], "warnings": [], "error": None}
    row.update(fields)
    return row


def recorded_row(job, store, status: str) -> dict | None:
    """A row with ``status`` for ``job`` from its record when the record matches the job's key and
    every output is there (the job is done), else None."""
    record = store.read_record(job.name)
    if not (record and record.get("key") == job.key and store.has_outputs(job.name, record.get("outputs", ()))):
        return None
    seconds = record.get("seconds", 0.0) if status == "ok" else 0.0  # a skipped job took no time
    return job_row(job, status, frames=record.get("frames", 0), seconds=seconds,
                   outputs=[{"path": store.location(job.name, o["filename"]), "size": o["size"]}
                            for o in record["outputs"]])


@dataclass
class Plan:
    todo: list
    skipped: list
    failed: list

    @property
    def total(self) -> int:
        return len(self.todo) + len(self.skipped) + len(self.failed)


def plan(jobs, store, hasher: FileHasher | None = None, *, force: bool = False) -> Plan:
    """Split ``jobs`` into to-run (keyed, grouped by model), skipped (done, unchanged) and failed
    (an input file missing, unreadable or not a regular file). ``force``: run every job again."""
    hasher = hasher or FileHasher()
    hasher.begin()
    todo, skipped, failed = [], [], []
    present = store.job_names()
    for job in jobs:
        try:
            job.key = job_key(job, hasher)
        except OSError as e:
            failed.append(job_row(job, "failed", error=f"{job.where}: {e.filename}: {e.strerror}"))
            continue
        except MmdkitError as e:  # not a regular file: refused here, the other jobs run
            failed.append(job_row(job, "failed", error=f"{job.where}: {e}"))
            continue
        row = None if force or job.name not in present else recorded_row(job, store, "skipped")
        if row:
            skipped.append(row)
        else:
            todo.append(job)
    first = {}
    for i, job in enumerate(todo):
        first.setdefault(job.model, i)
    todo.sort(key=lambda j: first[j.model])  # stable: manifest order within a model
    return Plan(todo, skipped, failed)
