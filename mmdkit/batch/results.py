"""The results table of a batch: ``results.jsonl`` (one row per job) and ``results.csv`` beside it.

In: results rows (see ``plan.job_row``) and the ``Store``. Out: both files written atomically under
the output root (``results-I-of-N.*`` for shard I of N, so array jobs do not overwrite each other).
"""

from __future__ import annotations

import csv
import io
import json

CSV_COLUMNS = ("name", "status", "seconds", "frames", "outputs", "bytes", "warnings", "error", "model", "motion")


def results_name(shard: str | None) -> str:
    """'results' or 'results-I-of-N' for ``--shard I/N``."""
    if not shard:
        return "results"
    i, n = (s.strip() for s in shard.split("/"))
    return f"results-{i}-of-{n}"


def csv_text(rows) -> str:
    """The CSV summary: one line per job, output paths joined by ';', warnings counted."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in rows:
        w.writerow([r["name"], r["status"], f"{r['seconds']:.3f}", r["frames"],
                    ";".join(o["path"] for o in r["outputs"]), sum(o["size"] for o in r["outputs"]),
                    len(r["warnings"]), r["error"] or "", r["model"], r["motion"] or ""])
    return buf.getvalue()


def write_results(store, rows, shard: str | None = None) -> str:
    """Write results.jsonl and results.csv (rows in manifest order); returns the .jsonl location."""
    base = results_name(shard)
    store.write_text(f"{base}.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    store.write_text(f"{base}.csv", csv_text(rows))
    return store.location("", f"{base}.jsonl")


def read_results(path: str) -> list:
    """The rows of a results.jsonl file."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
