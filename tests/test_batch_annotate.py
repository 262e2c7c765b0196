"""A batch manifest's ``annotate`` output (#25): the job's folder ``<name>.annotate/`` holds the same
annotated render as ``mmdkit render --annotate`` with the same options (label pictures' pixels,
keypoints.json, cameras.json), the results row names it, a second run skips it, and a bad view
option is the manifest line's one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from mmdkit.batch import read_results

OPTIONS = {"views": 2, "size": "96x72", "view_fov": 40, "normals": True, "preview": True, "correspondence": True}


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im)


def test_manifest_annotate_equals_cli(tmp_path, assets, mmdkit_cli):
    model = assets / "low_miku" / "gumi.pmd"
    motion = assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd"
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"name": "g", "model": str(model), "motion": str(motion), "frames": "0:2",
                                    "outputs": ["annotate", "npz"], "annotate": OPTIONS}) + "\n")
    code, _, err = mmdkit_cli("batch", manifest, "-o", tmp_path / "out", "--workers", "1", "-q")
    assert code == 0, err
    code, _, err = mmdkit_cli("render", model, motion, "--frames", "0:2", "--annotate", "--views", "2",
                              "--size", "96x72", "--view-fov", "40", "--normals", "--preview", "--correspondence",
                              "-o", str(tmp_path / "cli") + "/")
    assert code == 0, err
    got, want = tmp_path / "out" / "g" / "g.annotate", tmp_path / "cli"
    for name in ("keypoints.json", "cameras.json", "labels.json"):
        assert (got / name).read_bytes() == (want / name).read_bytes(), name
    pictures = sorted(p.relative_to(want) for p in want.glob("view_*/*/*.png"))
    assert len(pictures) == 2 * 9 * 3  # views × (rgb, depth, mask, parts, normal, vertex, face, uv_u, uv_v) × frames
    assert sorted(p.relative_to(got) for p in got.glob("view_*/*/*.png")) == pictures
    for rel in pictures:
        assert np.array_equal(pixels(got / rel), pixels(want / rel)), rel
    assert pixels(got / "view_01" / "mask" / "000002.png").any()  # the character is in the picture
    assert np.array_equal(pixels(got / "preview.png"), pixels(want / "preview.png"))
    row = read_results(tmp_path / "out" / "results.jsonl")[0]
    assert row["status"] == "ok" and row["frames"] == 3
    assert [o["path"] for o in row["outputs"]] == [str(got / "keypoints.json"), str(tmp_path / "out" / "g" / "g.npz")]
    assert row["outputs"][0]["size"] == (got / "keypoints.json").stat().st_size
    code, _, err = mmdkit_cli("batch", manifest, "-o", tmp_path / "out", "--workers", "1", "-q")
    assert code == 0 and read_results(tmp_path / "out" / "results.jsonl")[0]["status"] == "skipped"


def test_manifest_annotate_bad_views(tmp_path, assets, mmdkit_cli):
    manifest = tmp_path / "jobs.jsonl"
    for bad, words in (({"views": 0}, "views: must be 1 to "),
                       ({"correspondence": "yes"}, "correspondence: must be true or false, got 'yes'")):
        manifest.write_text(json.dumps({"model": str(assets / "low_miku" / "gumi.pmd"), "outputs": ["annotate"],
                                        "annotate": bad}) + "\n")
        code, _, err = mmdkit_cli("batch", manifest, "-o", tmp_path / "out")
        assert code == 2 and f"mmdkit: error: {manifest} line 1: {words}" in err
        assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_docs_list_annotate_options():
    """docs/batch.md names the annotate output and each of its options."""
    from mmdkit.batch.manifest import OUTPUTS
    from mmdkit.io import ANNOTATE_OPTIONS

    text = (Path(__file__).resolve().parents[1] / "docs" / "batch.md").read_text()
    assert "annotate" in OUTPUTS
    assert [k for k in ANNOTATE_OPTIONS + ("floor",) if f"`{k}`" not in text] == []
