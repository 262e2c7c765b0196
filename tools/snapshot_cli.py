"""Record (or compare) what the commands write, for refactors of the entrances (CLI, batch).

Usage: python3 tools/snapshot_cli.py save OUT.json | compare OUT.json [--mmdkit "python3 -m mmdkit"]
Runs ``mmdkit pose``, ``export`` (.glb/.gltf/.bvh/.vmd/.npz), ``render`` (PNG frames, a crowd, an mp4)
and a batch manifest on the shared assets into a scratch folder and records a digest of every file:
sha256 of the bytes, except .npz (zip entries carry the write time): sha256 of each array. "compare"
prints each output as identical or changed; exit 1 when any changed.
"""
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

ASSETS = Path(__file__).resolve().parents[1].parent / "shared" / "assets"
GENE = ASSETS / "gene/Gene.pmx"
LIGHT = ASSETS / "gene/Gene_light.pmx"
MOKOU = ASSETS / "mokou/mokou_A.pmd"
DANCE = ASSETS / "wavefile/wavefile_v2.vmd"
FOX = ASSETS / "gltf/Fox.glb"


def commands() -> dict:
    """name → (argv after ``mmdkit``, output path relative to the scratch folder)."""
    g, l, m, d = str(GENE), str(LIGHT), str(MOKOU), str(DANCE)
    return {
        "pose_physics": (["pose", g, d, "--frames", "300:360", "-o", "{o}"], "pose_physics.npz"),
        "pose_batch": (["pose", m, d, "--frames", "0:600:7", "--no-physics", "-o", "{o}"], "pose_batch.npz"),
        "pose_vertices": (["pose", l, d, "--frames", "400+3", "--vertices", "-o", "{o}"], "pose_vertices.npz"),
        "pose_fps_gap": (["pose", g, d, "--frames", "300:330:5", "-o", "{o}"], "pose_gap.npz"),
        "export_glb": (["export", g, d, "--frames", "300:360", "-o", "{o}"], "dance.glb"),
        "export_glb_reduce": (["export", m, d, "--frames", "0:90", "--reduce", "0.01", "-o", "{o}"], "reduce.glb"),
        "export_gltf": (["export", l, d, "--frames", "0:20", "--no-physics", "-o", "{o}"], "dance.gltf"),
        "export_bvh": (["export", g, d, "--frames", "300:360", "--joints", "humanoid", "-o", "{o}"], "dance.bvh"),
        "export_vmd": (["export", g, d, "--frames", "300:360", "--reduce", "0.001", "-o", "{o}"], "baked.vmd"),
        "export_npz": (["export", l, d, "--frames", "300:330", "--vertices", "--fps", "60", "-o", "{o}"], "data.npz"),
        "export_fox": (["export", str(FOX), "-o", "{o}"], "fox.npz"),
        "render_png": (["render", l, d, "--frames", "400+4", "--size", "160x120", "-o", "{o}"], "frames/"),
        "render_crowd": (["render", l, d, "--frames", "400+3", "--crowd", "2", "--size", "160x120",
                          "--self-shadow", "-o", "{o}"], "crowd/"),
        "render_mp4": (["render", l, d, "--frames", "400+6", "--size", "160x120", "--fps", "15", "-o", "{o}"],
                       "dance.mp4"),
        "render_fox": (["render", str(FOX), "--clip", "Run", "--frames", "0+2", "--size", "96x96", "-o", "{o}"],
                       "fox/"),
    }


def digest(path: Path) -> dict:
    """{file name: digest} of a file or of every file in a folder."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    out = {}
    for f in files:
        if f.suffix == ".npz":
            with zipfile.ZipFile(f) as z:
                names = sorted(z.namelist())
            with np.load(f, allow_pickle=False) as npz:
                h = hashlib.sha256()
                for k in names:
                    a = npz[k[:-4]]
                    h.update(k.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
            out[f.name] = h.hexdigest()
        else:
            out[f.name] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def batch(mmdkit: list, scratch: Path) -> dict:
    manifest = scratch / "jobs.jsonl"
    rows = [{"model": str(LIGHT), "motion": str(DANCE), "frames": "400:402", "outputs": ["npz", "png"]},
            {"model": str(MOKOU), "motion": str(DANCE), "frames": "0:60:3", "outputs": ["npz", "vmd"],
             "physics": False}]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = scratch / "batch"
    subprocess.run([*mmdkit, "batch", str(manifest), "-o", str(out), "--workers", "1", "-q"], check=True)
    return {str(p.relative_to(out)): d for p in sorted(out.rglob("*")) if p.is_file() and p.suffix in
            (".npz", ".vmd", ".png") for d in digest(p).values()}


def record(mmdkit: list) -> dict:
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for name, (argv, out) in commands().items():
            target = scratch / out
            if out.endswith("/"):
                target.mkdir()
            argv = [a.format(o=target) for a in argv]
            r = subprocess.run([*mmdkit, *argv, "-q"], capture_output=True, text=True)
            if r.returncode:
                result[name] = {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
                continue
            result[name] = digest(target)
        try:
            result["batch"] = batch(mmdkit, scratch)
        except subprocess.CalledProcessError as e:
            result["batch"] = {"error": str(e)}
    return result


def main():
    mode, path = sys.argv[1], sys.argv[2]
    mmdkit = shlex.split(sys.argv[sys.argv.index("--mmdkit") + 1]) if "--mmdkit" in sys.argv else \
        [sys.executable, "-m", "mmdkit"]
    now = record(mmdkit)
    if mode == "save":
        Path(path).write_text(json.dumps(now, indent=1))
        print(f"saved {len(now)} outputs to {path}")
        return
    old = json.loads(Path(path).read_text())
    bad = 0
    for k in sorted(set(old) | set(now)):
        same = old.get(k) == now.get(k)
        print(f"{k}: {'identical' if same else 'CHANGED ' + json.dumps([old.get(k), now.get(k)])[:300]}")
        bad += not same
    print("all identical" if not bad else f"{bad} outputs changed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    os.environ.setdefault("CI", "true")
    main()
