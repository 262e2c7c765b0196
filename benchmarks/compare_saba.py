"""mmdkit against saba (the C++ MMD runtime), stage by stage, interleaved in one run.

In: saba_bench (``--saba PATH`` or $SABA_BENCH; build it with ../shared/bench/saba/build.sh), the
real assets (../shared/assets or $MMDKIT_ASSETS). Out: a Markdown table of per-stage medians (ms/frame)
and mmdkit/saba ratios on stdout, optionally every run's JSON (``--json FILE``).
Each round runs, for every pair, saba_bench and ``mmdkit bench`` one after the other (the order flips
every round), each pinned to one core (``taskset -c CORE`` when taskset exists; numba and saba on one
thread). A stage's figure is the median over rounds of each run's per-frame median.
With ``--baseline DIR`` each round also runs ``mmdkit bench`` from another checkout (DIR on PYTHONPATH,
e.g. the code before a change) as a third engine, "old", so old and new are measured side by side.
Run: python3 benchmarks/compare_saba.py [--rounds 3] [--frames 1000] [--pairs gene mokou gene_sdef mei heavy]
     [--baseline /tmp/base]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))
BUILD_HINT = ("build it with ../shared/bench/saba/build.sh SABA_GIT_OR_SOURCE_DIR /tmp/saba-bench-build "
              "(saba: github.com/benikabocha/saba), then pass --saba /tmp/saba-bench-build/saba_bench "
              "or set SABA_BENCH")
WAVEFILE = "wavefile/wavefile_v2.vmd"
#: name → (model, motion, physics); "gene_sdef" is made from Gene.pmx (see ``sdef_model``), "heavy" /
#: "heavy_mokou" from Gene.pmx / mokou_A.pmd with 17 IK chains and 46 append bones added (``rigs.heavy_rig``)
PAIRS = {
    "gene": ("gene/Gene.pmx", WAVEFILE, True),
    "mokou": ("mokou/mokou_A.pmd", WAVEFILE, False),
    "gene_sdef": ("gene_sdef", WAVEFILE, False),
    "mei": ("mei/Model/mei/mei.pmd", WAVEFILE, False),
    "heavy": ("heavy", WAVEFILE, False),
    "heavy_physics": ("heavy", WAVEFILE, True),
    "heavy_mokou": ("heavy_mokou", WAVEFILE, False),
}
MADE = {"gene_sdef": "Gene_sdef.pmx (made from Gene.pmx)", "heavy": "Gene_heavy.pmx (Gene.pmx + rigs.heavy_rig)",
        "heavy_mokou": "mokou_heavy.pmx (mokou_A.pmd + rigs.heavy_rig)"}
#: table rows: label → (saba stages, mmdkit stages), summed per run
STAGE_ROWS = {
    "animation (sample+morph+bones+IK)": (("begin", "vmd_eval", "morph", "node_before_physics", "node_after_physics",
                                           "end"), ("sample", "morph", "bones_before_physics", "bones_after_physics")),
    "bones + IK": (("node_before_physics", "node_after_physics", "end"), ("bones_before_physics", "bones_after_physics")),
    "morph": (("morph",), ("morph",)),
    "physics": (("physics",), ("physics",)),
    "skinning (1 thread)": (("skinning",), ("skinning",)),
    "total": (("total",), ("total",)),
}


def sdef_model(folder: Path) -> Path:
    """Gene.pmx with every BDEF2 vertex turned SDEF (10,178 of 28,646; C = the vertex's closest point
    on its two bones' segment, R0 = R1 = C), written once as a PMX both engines read."""
    import mmdkit

    out = folder / "Gene_sdef.pmx"
    if out.exists():
        return out
    m = mmdkit.load(ASSETS / "gene" / "Gene.pmx")
    two = m.vertex_deform == 1
    bi = m.vertex_bone_index
    p0 = m.bone_position[bi[:, 0]].astype(np.float64)
    seg = m.bone_position[bi[:, 1]] - p0
    t = np.clip(((m.vertex_position - p0) * seg).sum(1) / np.maximum((seg * seg).sum(1), 1e-12), 0, 1)
    c = np.where(two[:, None], p0 + t[:, None] * seg, 0).astype(np.float32)
    deform = np.where(two, 3, m.vertex_deform).astype(np.uint8)
    mmdkit.save(m.replace(vertex_deform=deform, vertex_sdef_c=c, vertex_sdef_r0=c, vertex_sdef_r1=c.copy()), out)
    return out


def heavy_model(folder: Path, source: str) -> Path:
    """``source`` (gene or mokou) with 17 IK chains and 46 append bones added (``rigs.heavy_rig``),
    written once as a PMX both engines read."""
    import mmdkit

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rigs import heavy_rig

    src = {"heavy": ("gene/Gene.pmx", "Gene_heavy.pmx"), "heavy_mokou": ("mokou/mokou_A.pmd", "mokou_heavy.pmx")}
    model, name = src[source]
    out = folder / name
    if not out.exists():
        mmdkit.save(heavy_rig(mmdkit.load(ASSETS / model)), out)
    return out


def model_path(model: str, folder: Path) -> Path:
    if model == "gene_sdef":
        return sdef_model(folder)
    if model in ("heavy", "heavy_mokou"):
        return heavy_model(folder, model)
    return ASSETS / model


def rig_counts(path: Path) -> list[int]:
    """[IK chains, append (付与) bones] of the model at ``path``."""
    import mmdkit

    m = mmdkit.load(path)
    return [len(m.ik_bone), int((m.bone_append_parent >= 0).sum())]


def find_saba(path: str | None) -> str:
    exe = path or os.environ.get("SABA_BENCH")
    if not exe:
        sys.exit(f"compare_saba: no saba_bench given (--saba PATH or $SABA_BENCH); {BUILD_HINT}")
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        sys.exit(f"compare_saba: saba_bench {exe!r} is not an executable file; {BUILD_HINT}")
    return exe


def run_json(cmd: list[str], env: dict, cwd: Path) -> dict:
    """Run one engine in ``cwd`` (not the project root: ``python -m`` would import the mmdkit there, not
    the one PYTHONPATH names); its last stdout line is one JSON object."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if r.returncode:
        sys.exit(f"compare_saba: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def engine_commands(saba: str, model: Path, motion: Path, physics: bool, frames: int, core: int | None):
    pin = ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") else []
    s = pin + [saba, str(model), str(motion), "--frames", str(frames), "--threads", "1",
               "--physics" if physics else "--no-physics"]
    m = pin + [sys.executable, "-m", "mmdkit", "bench", str(model), str(motion), "--frames", str(frames), "--json",
               "-q", "--physics" if physics else "--no-physics"]
    return s, m


def baseline_env(env: dict, baseline: str) -> dict:
    """``env`` running mmdkit from the checkout ``baseline`` (first on PYTHONPATH; a sitecustomize.py
    in $MMDKIT_BASELINE_SHIM, if set, may drop an editable install's import hook)."""
    shim = os.environ.get("MMDKIT_BASELINE_SHIM")
    return dict(env, PYTHONPATH=os.pathsep.join(([shim] if shim else []) + [baseline]))


def stage_ms(result: dict, names) -> float:
    src = result.get("median_ms", result)
    return float(sum(src.get(n, 0.0) for n in names))


def measure(saba: str, names, rounds: int, frames: int, core: int | None, folder: Path, baseline: str | None = None):
    """{pair: {"saba": [run JSON...], "mmdkit": [...], ["old": [...],] "load": [1-minute load average...]}}."""
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    engines = ("saba", "mmdkit") + (("old",) if baseline else ())
    runs = {n: {**{e: [] for e in engines}, "load": [], "rig": rig_counts(model_path(PAIRS[n][0], folder))}
            for n in names}
    for r in range(rounds):
        for n in names:
            model, motion, physics = PAIRS[n]
            s, m = engine_commands(saba, model_path(model, folder), ASSETS / motion, physics, frames, core)
            order = [("saba", s, env), ("mmdkit", m, env)] + ([("old", m, baseline_env(env, baseline))] if baseline
                                                              else [])
            order = order[r % len(order):] + order[:r % len(order)]  # each engine first in turn
            for engine, cmd, e in order:
                runs[n]["load"].append(os.getloadavg()[0])
                runs[n][engine].append(run_json(cmd, e, folder))
            print(f"round {r + 1}/{rounds} {n}: saba skinning {stage_ms(runs[n]['saba'][-1], ['skinning']):.3f} ms, "
                  f"mmdkit {stage_ms(runs[n]['mmdkit'][-1], ['skinning']):.3f} ms", file=sys.stderr, flush=True)
    return runs


def table(runs: dict, rounds: int, frames: int, stat: str = "median") -> str:
    """The Markdown table: one row per pair and stage, the median (or the minimum) over rounds."""
    pick = statistics.median if stat == "median" else min
    old = all("old" in rr for rr in runs.values())
    lines = ["| pair (vertices, bones, IK, append) | stage | saba ms |" + (" mmdkit old ms | old/saba |" if old else "")
             + " mmdkit ms | mmdkit/saba |", "|---|---|---:|" + ("---:|---:|" if old else "") + "---:|---:|"]
    for n, rr in runs.items():
        model, motion, physics = PAIRS[n]
        first = True
        for label, (s_names, m_names) in STAGE_ROWS.items():
            if label == "physics" and not physics:
                continue
            s = pick([stage_ms(x, s_names) for x in rr["saba"]])
            m = pick([stage_ms(x, m_names) for x in rr["mmdkit"]])
            head = ""
            if first:
                x = rr["mmdkit"][0]
                ik, append = rr.get("rig", ("?", "?"))
                label_model = MADE.get(model, Path(model).name)
                head = f"{n}: {label_model} + {Path(motion).name}, physics {'on' if physics else 'off'} " \
                       f"({x['vertices']:,}, {x['bones']}, {ik}, {append})"
                first = False

            def ratio(v):  # below the table's resolution (saba's PMD morphs run inside its skinning): none
                return f"{v / s:.2f}" if s >= 0.0005 else "–"
            cells = [f"{s:.3f}"]
            if old:
                o = pick([stage_ms(x, m_names) for x in rr["old"]])
                cells += [f"{o:.3f}", ratio(o)]
            cells += [f"{m:.3f}", ratio(m)]
            lines.append(f"| {head} | {label} | " + " | ".join(cells) + " |")
    loads = [v for rr in runs.values() for v in rr["load"]]
    lines.append("")
    lines.append(f"{rounds} rounds × {frames} frames, one core each, {stat} of per-run medians; "
                 f"1-minute load average during the runs {min(loads):.1f}–{max(loads):.1f}.")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--saba", help="saba_bench executable (default $SABA_BENCH)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--core", type=int, default=1, help="CPU to pin both engines to (-1: no pinning)")
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    ap.add_argument("--json", help="also write every run's JSON here")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="over rounds: the median, or the fastest round (a host whose speed drifts between runs)")
    ap.add_argument("--from-json", help="print the table of runs saved with --json instead of measuring")
    ap.add_argument("--baseline", help="also run mmdkit from this checkout (on PYTHONPATH) as the engine 'old'")
    a = ap.parse_args()
    if a.from_json:
        runs = json.loads(Path(a.from_json).read_text())
        rounds = len(next(iter(runs.values()))["saba"])
        print(table(runs, rounds, a.frames, a.stat))
        return
    saba = find_saba(a.saba)
    with tempfile.TemporaryDirectory(prefix="mmdkit-compare-") as d:
        runs = measure(saba, a.pairs, a.rounds, a.frames, None if a.core < 0 else a.core, Path(d), a.baseline)
    if a.json:
        Path(a.json).write_text(json.dumps(runs, indent=1))
    print(table(runs, a.rounds, a.frames, a.stat))


if __name__ == "__main__":
    main()
