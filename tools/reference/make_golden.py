"""Regenerate the golden pose dumps in tests/data/reference/ from babylon-mmd (run in Node).

Usage: ``python3 tools/reference/make_golden.py [PAIR ...]`` (all pairs when none is named).
Needs Node ≥ 18 and npm (Debian: ``apt-get install -y nodejs npm``); installs the pinned
babylon-mmd into tools/reference/node_modules on first use. Out: one ``<pair>.npz`` per pair
with frames (F,) float64, bone_name (B,) str, bone_position (F,B,3) float32 and bone_rotation
(F,B,4) float32 (x, y, z, w), both world space in MMD units — see docs/conformance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ASSETS = ROOT.parent / "shared" / "assets"
OUT = ROOT / "tests" / "data" / "reference"
DANCE = "wavefile/wavefile_v2.vmd"

# name → (model, motion, frames): paths relative to ../shared/assets; a few hundred frames each
PAIRS = {
    "gene_wavefile": ("gene/Gene.pmx", DANCE, np.linspace(0, 2800, 200).round()),
    "gene_pmd_wavefile": ("gene/Gene.pmd", DANCE, np.arange(5, 2800, 28.0)),
    "mokou_wavefile": ("mokou/mokou_A.pmd", DANCE, np.linspace(3, 2803, 200).round()),
    "mei_wavefile": ("mei/Model/mei/mei.pmd", DANCE, np.linspace(7, 2807, 150).round()),
    "mei_self_introduction": ("mei/Model/mei/mei.pmd", "mei/Motion/mei_self_introduction/mei_self_introduction.vmd",
                              np.arange(0, 101, 1.0)),
    "sd_mei_guts": ("mei/Model/sd_mei/sd_mei.pmd", "mei/Motion/sd_mei_guts/sd_mei_guts.vmd", np.arange(0, 81, 1.0)),
    "low_miku_wavefile": ("low_miku/miku.pmd", DANCE, np.linspace(1, 2801, 200).round()),
    "nanoem_wavefile": ("fixtures/nanoem/test.pmx", DANCE, np.linspace(2, 2802, 200).round()),
    "fixture_append_bone": ("fixtures/yohawing-three-mmd-loader/test/fixtures/test_append_bone.pmx",
                            "fixtures/yohawing-three-mmd-loader/test/fixtures/test_append_bone.vmd",
                            np.arange(0, 6, 0.25)),
}


def quat_from_matrix(m: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices (column vectors) → (..., 4) unit quaternions (x, y, z, w)."""
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    cand = np.stack([1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22, 1 + m00 + m11 + m22], -1)
    k = np.argmax(cand, -1)
    q = np.empty(m.shape[:-2] + (4,))
    # Shepperd: divide by the largest of 4|x|², 4|y|², 4|z|², 4|w|²
    x = np.stack([cand[..., 0], m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0], m[..., 2, 1] - m[..., 1, 2]], -1)
    y = np.stack([m[..., 0, 1] + m[..., 1, 0], cand[..., 1], m[..., 1, 2] + m[..., 2, 1], m[..., 0, 2] - m[..., 2, 0]], -1)
    z = np.stack([m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1], cand[..., 2], m[..., 1, 0] - m[..., 0, 1]], -1)
    w = np.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1], cand[..., 3]], -1)
    rows = np.stack([x, y, z, w], -2)
    q[...] = np.take_along_axis(rows, k[..., None, None], -2)[..., 0, :]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return q * np.where(q[..., 3:] < 0, -1.0, 1.0)


def node_modules() -> None:
    """Install the pinned babylon-mmd (package-lock.json) unless it is there already."""
    if not (HERE / "node_modules" / "babylon-mmd").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True)


def dump(model: str, motion: str, frames: np.ndarray) -> dict:
    """Run dump_pose.mjs for one pair; babylon world matrices → positions and quaternions."""
    with tempfile.TemporaryDirectory() as tmp:
        fj, out = Path(tmp) / "frames.json", Path(tmp) / "out.bin"
        fj.write_text(json.dumps([float(f) for f in frames]))
        subprocess.run(["node", "--import", "./register_hook.mjs", "dump_pose.mjs", str(ASSETS / model),
                        str(ASSETS / motion), str(fj), str(out)], cwd=HERE, check=True)
        meta = json.loads(Path(str(out) + ".json").read_text())
        mats = np.fromfile(out, np.float64).reshape(len(frames), len(meta["bones"]), 4, 4)
    rot = np.swapaxes(mats[..., :3, :3], -1, -2)  # babylon row-vector layout → column vectors
    return {"model": model, "motion": motion, "frames": np.asarray(frames, np.float64),
            "bone_name": np.array(meta["bones"]), "bone_position": mats[..., 3, :3].astype(np.float32),
            "bone_rotation": quat_from_matrix(rot).astype(np.float32),
            "reference": f"babylon-mmd {meta['babylon_mmd']} (JavaScript runtime, physics off)",
            "corrections": np.array(meta["corrections"])}


def main(names: list[str]) -> None:
    node_modules()
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or PAIRS:
        model, motion, frames = PAIRS[name]
        np.savez_compressed(OUT / f"{name}.npz", **dump(model, motion, frames))
        print(f"{name}: {len(frames)} frames → {OUT / name}.npz")


if __name__ == "__main__":
    main(sys.argv[1:])
