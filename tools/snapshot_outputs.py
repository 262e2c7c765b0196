"""Record (or compare) posing, skinning and render outputs on the shared assets, for refactors.

Usage: python3 tools/snapshot_outputs.py save OUT.npz | compare OUT.npz
Pairs: Gene, mokou_A, Mei, low_miku miku with wavefile_v2, frames 0..599 step 7 (batch pose,
no physics), 120 frames frame-by-frame with physics, CPU skinning of 5 frames, one 320x240
render. "compare" reports the largest difference per array; bit-identical means all zero.
Only the public API is used (mmdkit.load, mmdkit.pose.pose / Character, mmdkit.render.pipeline).
"""
import sys
from pathlib import Path

import numpy as np

import mmdkit

ASSETS = Path(__file__).resolve().parents[1].parent / "shared" / "assets"
PAIRS = {
    "gene": ASSETS / "gene/Gene.pmx",
    "mokou": ASSETS / "mokou/mokou_A.pmd",
    "mei": next((ASSETS / "mei/Model/mei").glob("*.pmd")),
    "low_miku": ASSETS / "low_miku/miku.pmd",
}
MOTION = ASSETS / "wavefile/wavefile_v2.vmd"


def _imports():
    try:
        from mmdkit.runtime import Character, pose  # after the restructure
    except ImportError:
        from mmdkit.pose import Character, pose
    try:
        from mmdkit.physics import MMDPhysics
    except ImportError:
        MMDPhysics = None
    return Character, pose, MMDPhysics


def record() -> dict:
    Character, pose, MMDPhysics = _imports()
    motion = mmdkit.load(MOTION)
    out = {}
    for name, path in PAIRS.items():
        model = mmdkit.load(path)
        r = pose(model, motion, range(0, 600, 7))
        out[f"{name}/batch_world"] = r["bone_world"]
        out[f"{name}/batch_morph"] = r["morph_weight"]
        ch = Character(model, motion, world=MMDPhysics(model) if MMDPhysics and model.num_rigid_bodies else None)
        V = model.num_vertices
        pos, nrm = np.empty((V, 3), np.float32), np.empty((V, 3), np.float32)
        worlds, skins = [], []
        for f in range(300, 420):
            ch.update(f)
            worlds.append(ch.bone_world.copy())
            if f % 24 == 0:
                ch.skin(pos, nrm)
                skins.append(np.concatenate([pos, nrm], 1))
        out[f"{name}/physics_world"] = np.stack(worlds)
        out[f"{name}/skinned"] = np.stack(skins)
    from mmdkit.render.pipeline import render_still
    model = mmdkit.load(PAIRS["gene"].with_name("Gene_light.pmx"))
    ch = Character(model, motion)
    ch.update(400)
    out["gene/render"] = render_still(model, ch.bone_skin, size=(320, 240), vertex_offset=ch.vertex_offset)
    return out


def main():
    mode, path = sys.argv[1], sys.argv[2]
    now = record()
    if mode == "save":
        np.savez_compressed(path, **now)
        print(f"saved {len(now)} arrays to {path}")
        return
    old = np.load(path)
    bad = 0
    for k in sorted(set(old.files) | set(now)):
        if k not in old.files or k not in now:
            print(f"{k}: missing on one side")
            bad += 1
            continue
        a, b = old[k], now[k]
        if a.shape != b.shape:
            print(f"{k}: shape {a.shape} vs {b.shape}")
            bad += 1
            continue
        d = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
        same = np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else np.array_equal(a, b)
        print(f"{k}: {'identical' if same else f'max diff {d:.3g}'}")
        bad += not same
    print("all identical" if not bad else f"{bad} arrays differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
