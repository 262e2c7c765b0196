"""A batch manifest line and the command line are one front door (#24): for the same options a job
writes the same files as `mmdkit export`/`render` (npz: the same arrays; glb, bvh, vmd: the same
bytes; png: the same pixels), and the same mistake gives the same detail — the CLI's under its
option names, the manifest's under the line and its keys."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from mmdkit.batch import Store, plan, read_manifest
from mmdkit.batch.worker import ModelCache, run_job
from mmdkit.errors import FormatError
from mmdkit.runtime.take import CLI_NAMES, MANIFEST_NAMES

from helpers import write_jsonl


def _vpd(path, bone="頭", quaternion=(0.0, 0.0, 0.38268343, 0.92387953)):
    text = ("Vocaloid Pose Data file\r\n\r\nmiku.osm;\r\n1;\r\n\r\nBone0{" + bone + "\r\n 0.000000,0.000000,0.000000;\r\n"
            + " " + ",".join(f"{q:.6f}" for q in quaternion) + ";\r\n}\r\n")
    path.write_bytes(text.encode("cp932"))
    return path


@pytest.fixture
def inputs(tmp_path, assets):
    _vpd(tmp_path / "head.vpd")
    return {"miku": str(assets / "low_miku" / "miku.pmd"), "fox": str(assets / "gltf" / "Fox.glb"),
            "bye": str(assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd"), "head": str(tmp_path / "head.vpd")}


def _same_file(got, want) -> None:
    ext = got.suffix
    if ext == ".npz":
        with np.load(got) as a, np.load(want) as b:
            assert sorted(a.files) == sorted(b.files)
            for k in a.files:
                np.testing.assert_array_equal(a[k], b[k], err_msg=f"{got.name}: {k}")
    elif ext == ".png":
        assert np.array_equal(np.asarray(Image.open(got)), np.asarray(Image.open(want))), got.name
    else:
        assert got.read_bytes() == want.read_bytes(), got.name


# (manifest line without its model/motion paths, CLI arguments after MODEL [MOTION])
CASES = {
    "npz_glb": ({"model": "miku", "motion": "bye", "frames": "10+5", "outputs": ["npz", "glb"],
                 "npz": {"joints": "humanoid"}},
                ["export", "--frames", "10+5", "--joints", "humanoid", "-o", "{o}.npz", "-o", "{o}.glb"]),
    "png_crowd": ({"model": "miku", "motion": "bye", "frames": "20", "crowd": 2, "outputs": ["png"],
                   "png": {"size": "64x48"}},
                  ["render", "--frames", "20", "--crowd", "2", "--size", "64x48", "-o", "{o}.png"]),
    "fox_clip": ({"model": "fox", "clip": "Run", "frames": "0:10", "outputs": ["npz", "bvh"]},
                 ["export", "--clip", "Run", "--frames", "0:10", "-o", "{o}.npz", "-o", "{o}.bvh"]),
    "vpd_pose": ({"model": "miku", "motion": "bye", "vpd": ["head.vpd@2:0.5"], "frames": "0:4:2",
                  "physics": False, "outputs": ["vmd", "npz"]},
                 ["export", "--vpd", "{head}@2:0.5", "--frames", "0:4:2", "--no-physics", "-o", "{o}.vmd",
                  "-o", "{o}.npz"]),
    "vpd_motion": ({"model": "miku", "motion": "head", "outputs": ["npz", "bvh"], "npz": {"scale": 0.08},
                    "bvh": {"scale": 0.08}},  # the CLI's --scale: every output that takes it
                   ["export", "--scale", "0.08", "-o", "{o}.npz", "-o", "{o}.bvh"]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_job_writes_what_the_cli_writes(tmp_path, inputs, mmdkit_cli, case):
    entry, argv = CASES[case]
    entry = {k: inputs.get(v, v) if k in ("model", "motion") else v for k, v in entry.items()}
    job, = read_manifest(write_jsonl(tmp_path / "jobs.jsonl", [entry]))  # head.vpd: beside the manifest
    store = Store(tmp_path / "out")
    store.prepare()
    row = run_job(plan([job], store).todo[0], store, ModelCache())
    assert row["status"] == "ok", row["error"]
    cli = tmp_path / "cli"
    cli.mkdir()
    paths = [entry["model"]] + ([entry["motion"]] if "motion" in entry else [])
    args = [a.format(o=cli / "c", head=inputs["head"]) for a in argv]
    code, _, err = mmdkit_cli(args[0], *paths, *args[1:])
    assert code == 0, err
    for out in job.outputs:
        _same_file(tmp_path / "out" / job.name / f"{job.name}.{out}", cli / f"c.{out}")
    assert row["frames"] == {"npz_glb": 5, "png_crowd": 1, "fox_clip": 11, "vpd_pose": 3, "vpd_motion": 1}[case]


# (CLI arguments after MODEL MOTION, the manifest line's own keys); the manifest says the CLI's detail
MISTAKES = {
    "fps 0": (["export", "--fps", "0", "-o", "x.npz"], {"fps": 0}),
    "crowd 0": (["render", "--crowd", "0", "-o", "x.mp4"], {"crowd": 0, "outputs": ["mp4"]}),
    "frames 5:1": (["export", "--frames", "5:1", "-o", "x.npz"], {"frames": "5:1"}),
    "bad frames": (["export", "--frames", "3:x", "-o", "x.npz"], {"frames": "3:x"}),
    "clip and motion": (["export", "--clip", "Run", "-o", "x.npz"], {"clip": "Run"}),
    "bad vpd": (["export", "--vpd", "head.vpd@x", "-o", "x.npz"], {"vpd": ["head.vpd@x"]}),
    "size for npz": (["export", "--size", "64x48", "-o", "x.npz"], {"npz": {"size": "64x48"}}),
    "joints for mp4": (["render", "--joints", "humanoid", "-o", "x.mp4"],
                       {"outputs": ["mp4"], "mp4": {"joints": "humanoid"}}),
    "bad size": (["render", "--size", "1x1", "-o", "x.png"], {"outputs": ["png"], "png": {"size": "1x1"}}),
    "palette 0": (["render", "--palette", "0", "-o", "x.png"], {"outputs": ["png"], "png": {"palette_size": 0}}),
}
OPTION_KEYS = dict({CLI_NAMES[k]: MANIFEST_NAMES[k] for k in CLI_NAMES}, **{"--size": "size", "--palette": "palette_size",
                                                                            "--joints": "joints"})


@pytest.mark.parametrize("mistake", MISTAKES)
def test_the_same_mistake_gives_the_same_detail(tmp_path, inputs, mmdkit_cli, mistake, monkeypatch):
    argv, keys = MISTAKES[mistake]
    monkeypatch.chdir(tmp_path)  # head.vpd, x.npz: relative to here and to the manifest alike
    code, _, err = mmdkit_cli(argv[0], inputs["miku"], inputs["bye"], *argv[1:])
    assert code == 2 and err.count("\n") == 1 and err.startswith("mmdkit: error: "), err
    option, _, detail = err.removeprefix("mmdkit: error: ").rstrip("\n").partition(": ")
    for cli_name, key in OPTION_KEYS.items():  # the detail names the other inputs the caller's way too
        detail = detail.replace(cli_name, key)
    path = write_jsonl(tmp_path / "jobs.jsonl", [dict({"model": inputs["miku"], "motion": inputs["bye"],
                                                       "outputs": ["npz"]}, **keys)])
    with pytest.raises(FormatError) as e:
        read_manifest(path)
    assert str(e.value).startswith(f"{path} line 1: {OPTION_KEYS[option]}: {detail}"), (str(e.value), err)
    assert "\n" not in str(e.value)
