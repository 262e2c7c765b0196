"""A batch manifest's ``source`` key is the CLI's --source (#26): a VMD made for Gene, on a VRM, is
retargeted in the job as `mmdkit export MODEL MOTION --source` does it (the same npz arrays); the
source takes part in the job's key; a source that is not a model fails the job with the CLI's detail."""

from __future__ import annotations

import numpy as np

from mmdkit.batch import Store, plan, read_manifest
from mmdkit.batch.worker import ModelCache, run_job
from mmdkit.runtime import loading

from helpers import write_jsonl


def test_manifest_source_retargets_as_the_cli(tmp_path, assets, mmdkit_cli, monkeypatch):
    robot, dance = assets / "rigs" / "vrm1" / "debug_robot.vrm", assets / "wavefile" / "wavefile_v2.vmd"
    gene, mokou = assets / "gene" / "Gene.pmx", assets / "mokou" / "mokou_A.pmd"
    line = {"model": str(robot), "motion": str(dance), "source": str(gene), "frames": "300:310", "physics": False,
            "outputs": ["npz", "bvh"], "bvh": {"frames": "300:302"}}  # two Takes
    job, other = read_manifest(write_jsonl(tmp_path / "jobs.jsonl", [line, dict(line, source=str(mokou))]))
    assert job.source == str(gene) and job.inputs()["source"] == str(gene)
    store = Store(tmp_path / "out")
    store.prepare()
    planned = plan([job, other], store).todo
    assert planned[0].key != planned[1].key and planned[0].name != planned[1].name
    loads = []
    load_as = loading.load_as
    monkeypatch.setattr(loading, "load_as", lambda path, *a, **k: loads.append(str(path)) or load_as(path, *a, **k))
    row = run_job(planned[0], store, ModelCache())
    monkeypatch.undo()
    assert row["status"] == "ok", row["error"]
    assert loads.count(str(gene)) == 1  # loaded once by the worker, handed to both Takes
    assert any("retargeted from source" in w for w in row["warnings"]), row["warnings"]
    code, _, err = mmdkit_cli("export", robot, dance, "--source", gene, "--frames", "300:310", "--no-physics",
                              "-o", tmp_path / "c.npz")
    assert code == 0, err
    with np.load(tmp_path / "out" / job.name / f"{job.name}.npz") as a, np.load(tmp_path / "c.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        moving = [k for k in a.files if a[k].dtype.kind == "f" and a[k].ndim >= 2 and len(a[k]) == 11]
        assert moving and max(np.ptp(a[k], axis=0).max() for k in moving) > 0.01  # the robot dances

    bad = dict(line, source=str(dance), name="bad")
    job, = read_manifest(write_jsonl(tmp_path / "bad.jsonl", [bad]))
    row = run_job(plan([job], store).todo[0], store, ModelCache())
    code, _, err = mmdkit_cli("export", robot, dance, "--source", dance, "-o", tmp_path / "d.npz")
    assert row["status"] == "failed" and code == 2
    detail = err.removeprefix("mmdkit: error: ").strip().replace("--source", "source")
    assert row["error"] == detail, (row["error"], err)
