"""`mmdkit batch` end to end: a local process pool and a local Ray instance run a multi-job manifest
with a bad file and a worker killed mid-job (SIGKILL from the test while it writes an output);
outputs, results table, re-runs that skip, resumption."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import pytest

from mmdkit.batch import read_results

from helpers import descendants


@pytest.fixture(scope="module", autouse=True)
def kernels_cached(assets, tmp_path_factory):
    """Compile (or load) numba's kernels here once, so the worker processes load them from the cache
    instead of each compiling them at the same time."""
    import mmdkit
    from mmdkit.export import export

    model = mmdkit.load(assets / "low_miku" / "gumi.pmd")
    motion = mmdkit.load(assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd")
    export(model, motion, tmp_path_factory.mktemp("warm") / "warm.npz", frames=[0.0, 1.0], physics=False,
           joints="humanoid")


class KillOnce:
    """Kills (SIGKILL) the first process below this one that holds a file open whose name starts with
    ``prefix`` — a worker in the middle of writing that output — from a thread of its own: an abrupt
    worker death injected from outside the package. ``killed``: that process's PID, once done."""

    def __init__(self, prefix: str, poll: float = 0.02):
        self.prefix, self.poll, self.killed = prefix, poll, None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        me = os.getpid()
        while not self._done.wait(self.poll):
            for pid in descendants(me):
                if self._writing(pid):
                    os.kill(pid, signal.SIGKILL)
                    self.killed = pid
                    return

    def _writing(self, pid: int) -> bool:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                if os.path.basename(os.readlink(f"/proc/{pid}/fd/{fd}")).startswith(self.prefix):
                    return True
            except OSError:
                pass
        return False


@pytest.fixture
def manifest(tmp_path, assets):
    """Four jobs on low-poly models: two quick good ones (one writes npz + bvh), one whose motion is not
    a motion, and a long one streaming vertices into its npz (the one whose worker gets killed)."""
    low, bye = assets / "low_miku", assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd"
    bad = tmp_path / "broken.vmd"
    bad.write_bytes(b"Vocaloid Motion Data 0002\0\0\0\0\0" + b"\xff" * 7)
    base = {"motion": str(bye), "frames": "0:8", "physics": False}
    entries = [dict(base, model=str(low / "miku.pmd"), outputs=["npz", "bvh"], npz={"joints": "humanoid"}),
               dict(base, model=str(low / "gumi.pmd"), outputs=["npz"], name="gumi"),
               dict(base, model=str(low / "miku.pmd"), motion=str(bad), outputs=["npz"], name="bad"),
               {"model": str(low / "miku.pmd"), "motion": str(assets / "wavefile" / "wavefile_v2.vmd"),
                "frames": "0:1500", "outputs": ["npz"], "npz": {"vertices": True}, "name": "slow"}]
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def check_first_run(out, rows, killer, url=""):
    by = {r["name"]: r for r in rows}
    assert [r["name"] for r in rows] == ["miku__mei_bye", "gumi", "bad", "slow"]  # manifest order
    assert [by[n]["status"] for n in ("miku__mei_bye", "gumi", "bad", "slow")] == ["ok", "ok", "failed", "ok"]
    assert by["bad"]["error"].startswith(str(out.parent / "broken.vmd")) and "\n" not in by["bad"]["error"]
    ok = by["miku__mei_bye"]
    assert ok["frames"] == 9 and ok["seconds"] > 0 and ok["error"] is None
    assert [o["path"] for o in ok["outputs"]] == [f"{url}{out}/miku__mei_bye/miku__mei_bye.{e}" for e in ("npz", "bvh")]
    for o in ok["outputs"]:
        assert os.path.getsize(o["path"].removeprefix("file://")) == o["size"] > 0
    with np.load(out / "miku__mei_bye" / "miku__mei_bye.npz") as d:
        assert d["joint_position"].shape[0] == 9 and str(d["joint_set"]) == "humanoid"
    assert killer.killed is not None  # the first attempt's worker died mid-job (SIGKILL while writing)
    assert by["slow"]["frames"] == 1501 and by["slow"]["pid"] != killer.killed
    with np.load(out / "slow" / "slow.npz") as d:
        assert d["vertex_position"].shape[0] == 1501
    if not url:  # the local pool counts the starts of each job (Ray retries on its own); a job running
        # beside the one whose worker died was stopped with the pool and started again
        assert by["slow"]["attempts"] == 2
        assert all(by[n]["attempts"] in (1, 2) for n in ("miku__mei_bye", "gumi", "bad"))
    for name in ("miku__mei_bye", "slow"):  # no temporary files left, the killed attempt's included
        assert not [f for f in os.listdir(out / name) if f.startswith(".") and f != ".mmdkit-job.json"]
    assert not (out / "bad" / ".mmdkit-job.json").exists()
    csv = (out / "results.csv").read_text().splitlines()
    assert csv[0].startswith("name,status,seconds,frames,outputs,bytes") and len(csv) == 5


def test_local_pool_runs_resumes_and_skips(tmp_path, manifest, mmdkit_cli):
    out = tmp_path / "out"
    with KillOnce(".slow.npz.") as killer:
        code, _, err = mmdkit_cli("batch", manifest, "-o", out, "--workers", "2", "-q")
    assert code == 1, err  # a job failed; the others ran
    assert "mmdkit: batch: bad failed: " in err
    check_first_run(out, read_results(out / "results.jsonl"), killer)
    npz = out / "gumi" / "gumi.npz"
    stamp = npz.stat().st_mtime_ns
    # killed outright before the record: gumi's output and a temporary file are there, the job is not done
    os.unlink(out / "gumi" / ".mmdkit-job.json")
    (out / "gumi" / ".gumi.npz.x1y2.part").write_bytes(b"half")
    code, _, err = mmdkit_cli("batch", manifest, "-o", out, "--workers", "1", "-q")
    assert sorted(os.listdir(out / "gumi")) == [".mmdkit-job.json", "gumi.npz"]  # ran again, leftover gone
    rows = {r["name"]: r["status"] for r in read_results(out / "results.jsonl")}
    assert rows == {"miku__mei_bye": "skipped", "gumi": "ok", "bad": "failed", "slow": "skipped"}
    assert npz.stat().st_mtime_ns != stamp
    # an option changed in one job: only that job runs again
    text = manifest.read_text().replace('"name": "gumi"', '"name": "gumi", "npz": {"scale": 0.08}')
    manifest.write_text(text)
    code, _, err = mmdkit_cli("batch", manifest, "-o", out, "--dry-run")
    assert code == 0 and "4 jobs: 2 to run, 2 done already, 0 failing" in _
    code, _, err = mmdkit_cli("batch", manifest, "-o", out, "--workers", "1")
    assert "mmdkit: batch: 1 ok, 1 failed, 2 skipped; results in" in err
    assert {r["name"]: r["status"] for r in read_results(out / "results.jsonl")}["gumi"] == "ok"


def test_cross_product_cli_and_usage_errors(tmp_path, assets, mmdkit_cli):
    out = tmp_path / "grid"
    code, _, err = mmdkit_cli("batch", "--models", assets / "low_miku" / "gumi.pmd", "--motions",
                              assets / "mei" / "Motion" / "mei_bye" / "*.vmd", "--frames", "0:2", "--no-physics",
                              "--outputs", "npz,mp4,png", "-O", "npz.joints=humanoid", "-O", "mp4.size=64x48",
                              "-O", "mp4.frames=0:4", "-O", "png.size=64x48", "-o", out, "--workers", "1",
                              "--shard", "0/1", "-q")
    assert code == 0, err
    rows = read_results(out / "results-0-of-1.jsonl")
    assert [(r["name"], r["status"], r["frames"]) for r in rows] == [("gumi__mei_bye", "ok", 5)]
    import av
    from PIL import Image

    with av.open(str(out / "gumi__mei_bye" / "gumi__mei_bye.mp4")) as c:
        assert sum(1 for _ in c.decode(video=0)) == 5  # mp4.frames 0:4 overrides --frames 0:2
    assert Image.open(out / "gumi__mei_bye" / "gumi__mei_bye.png").size == (64, 48)
    with np.load(out / "gumi__mei_bye" / "gumi__mei_bye.npz") as d:
        assert len(d["frames"]) == 3
    code, _, err = mmdkit_cli("batch", "-o", out)
    assert code == 2 and "mmdkit: error: MANIFEST: give a manifest file or --models" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model": "x.pmx", "outputs": ["npz"]}\n{"model": "x.pmx", "outputs": ["obj"]}\n')
    code, _, err = mmdkit_cli("batch", bad, "-o", out)
    assert code == 2 and f"mmdkit: error: {bad} line 2: unknown output 'obj'" in err


def test_ray_local_instance(tmp_path, manifest, mmdkit_cli):
    import ray  # pip install 'mmdkit[ray]' (scripts/setup.sh installs it)

    out = tmp_path / "out"
    try:
        with KillOnce(".slow.npz.") as killer:
            code, _, err = mmdkit_cli("batch", manifest, "-o", f"file://{out}", "--ray", "local", "--workers", "2",
                                      "-q")
        assert code == 1, err
        rows = read_results(out / "results.jsonl")
        check_first_run(out, rows, killer, url="file://")
        assert all(r["node"] for r in rows if r["status"] != "skipped" and "node" in r)
        code, _, err = mmdkit_cli("batch", manifest, "-o", f"file://{out}", "--ray", "local", "-q")
        assert [r["status"] for r in read_results(out / "results.jsonl")] == ["skipped", "skipped", "failed",
                                                                              "skipped"]
    finally:
        ray.shutdown()
