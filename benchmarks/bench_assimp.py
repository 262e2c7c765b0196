"""What running Assimp in the helper process costs: every Assimp file of the real assets read with
the bridge in this process (the old way) and in a helper's worker (``mmdkit.importers.assimp_process``,
the way ``mmdkit.load`` reads them now), interleaved, warm.

In: ../shared/assets/assimp/models (or $MMDKIT_ASSETS). Out: the first call's cost (starting the
helper), then per file the median wall ms of ``read_assimp_raw`` (the scene dict) and of
``load_assimp_scene`` (Model + Clips) both ways, and the median and largest difference.
Run: python3 benchmarks/bench_assimp.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_gltf import ASSETS

from mmdkit.errors import MmdkitError
from mmdkit.importers import _assimp, assimp_process
from mmdkit.importers import assimp as reader


def in_process(bridge_file, path, data, flags=None):
    """The old way: the bridge in this process (safe here: the real assets do not crash it)."""
    return _assimp.load(path, data) if flags is None else _assimp.load(path, data, flags)


def one_file(path: str, repeat: int) -> dict | None:
    """Median ms per (step, way) for one file; None when the file is refused."""
    ways = {"old": in_process, "new": assimp_process.load}
    times: dict[str, list[float]] = {f"{step} {way}": [] for step in ("raw", "load") for way in ways}
    try:
        for _ in range(repeat + 1):  # the first round warms
            for way, fn in ways.items():
                reader.assimp_process.load = fn
                for step, call in (("raw", reader.read_assimp_raw), ("load", None)):
                    t = time.perf_counter()
                    call(None, path) if call else reader.load_assimp_scene(path)
                    times[f"{step} {way}"].append((time.perf_counter() - t) * 1000)
    except MmdkitError:
        return None
    finally:
        reader.assimp_process.load = ways["new"]
    return {k: statistics.median(v[1:]) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    root = ASSETS / "assimp" / "models"
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in reader.EXTENSIONS + (".gltf", ".glb"))
    t = time.perf_counter()
    assimp_process.load(_assimp.__file__, str(files[0]), None)
    print(f"first Assimp file of a process (starts the helper): {(time.perf_counter() - t) * 1000:.0f} ms")
    print(f"{'file':<56}{'raw old':>9}{'new':>8}{'load old':>10}{'new':>8}  ms")
    rows = []
    for p in files:
        m = one_file(str(p), a.repeat)
        if m is None:
            continue
        rows.append(m)
        print(f"{str(p.relative_to(root)):<56}{m['raw old']:9.1f}{m['raw new']:8.1f}{m['load old']:10.1f}"
              f"{m['load new']:8.1f}", flush=True)
    for step in ("raw", "load"):
        d = [r[f"{step} new"] - r[f"{step} old"] for r in rows]
        print(f"{step}: {len(rows)} files, helper costs median {statistics.median(d):+.1f} ms, "
              f"largest {max(d):+.1f} ms; total {sum(r[f'{step} old'] for r in rows):.0f} → "
              f"{sum(r[f'{step} new'] for r in rows):.0f} ms")


if __name__ == "__main__":
    main()
