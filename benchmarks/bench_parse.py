"""Parse/write timing for the format layer: warm parse of Gene.pmx and wavefile_v2.vmd.

In: the real assets (../shared/assets or $MMDKIT_ASSETS). Out: printed medians (ms) of
bytes → built Model/Motion (file already in memory; numba cache warm), plus PMD and writes.
Times are CPU time of this process (``time.process_time``), so a machine busy with other work
distorts them less than wall time; parsing is single-threaded.
Run: python3 benchmarks/bench_parse.py [--repeat N]
Targets: Gene.pmx ≤ 25 ms, wavefile_v2.vmd ≤ 10 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from mmdkit.formats.io import parse, serialize

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def median_ms(fn, repeat):
    fn()  # warm (numba cache load, imports)
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1000)
    return statistics.median(times), min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    rows = [("gene/Gene.pmx", ".pmx", 25.0), ("wavefile/wavefile_v2.vmd", ".vmd", 10.0),
            ("gene/Gene.pmd", ".pmd", None), ("mei/Model/mei/mei.pmd", ".pmd", None)]
    print(f"{'file':<28}{'size':>10}{'parse med':>11}{'min':>8}{'write med':>11}  target")
    for rel, ext, target in rows:
        data = (ASSETS / rel).read_bytes()
        obj = parse(data, ext, rel)
        med, mn = median_ms(lambda: parse(data, ext, rel), a.repeat)
        wmed, _ = median_ms(lambda: serialize(obj, ext), max(3, a.repeat // 5))
        ok = "" if target is None else f"≤ {target:g} ms {'OK' if med <= target else 'MISSED'}"
        print(f"{rel:<28}{len(data):>10,}{med:>9.2f}ms{mn:>6.2f}ms{wmed:>9.2f}ms  {ok}")


if __name__ == "__main__":
    main()
