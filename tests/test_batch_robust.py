"""`mmdkit batch` under faults: a FIFO or device as an input, the driver killed outright, two batches
on one folder, Ctrl-C, a write that fails mid-output; and jobs that load like `mmdkit pose` (a glTF
model's own clips, VPD poses) with the same message for the same mistake."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest

from mmdkit.batch import Store, plan, read_manifest, read_results

from helpers import descendants, process_stat, wait_for, write_jsonl

BATCH = [sys.executable, "-m", "mmdkit", "batch"]


@pytest.fixture(scope="module", autouse=True)
def kernels_cached(assets, tmp_path_factory):
    """Compile (or load) numba's kernels once here, so worker processes load them from the cache."""
    import mmdkit
    from mmdkit.export import export

    model = mmdkit.load(assets / "low_miku" / "miku.pmd")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    export(model, motion, tmp_path_factory.mktemp("warm") / "warm.npz", frames=[0.0, 1.0], physics=True)


def long_jobs(assets, n, frames="0:1500"):
    """``n`` jobs of a few seconds to a minute each (a small model, a long dance with physics)."""
    return [{"name": f"j{i}", "model": str(assets / "low_miku" / "miku.pmd"),
             "motion": str(assets / "wavefile" / "wavefile_v2.vmd"), "frames": frames, "outputs": ["npz"]}
            for i in range(n)]


def running(procs: dict) -> list:
    """Those of ``procs`` (pid → start time) still running (not gone, not a zombie, not a new process)."""
    return [p for p, start in procs.items() if (s := process_stat(p)) and s[1] == start and s[0] not in "ZX"]


def test_fifo_and_device_inputs_fail_only_their_job(tmp_path, assets):
    os.mkfifo(tmp_path / "fifo.pmd")
    (tmp_path / "zero.vmd").symlink_to("/dev/zero")
    miku, bye = assets / "low_miku" / "miku.pmd", assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd"
    base = {"frames": "0:2", "outputs": ["npz"], "physics": False}
    jobs = write_jsonl(tmp_path / "jobs.jsonl", [dict(base, name="good", model=str(miku), motion=str(bye)),
                                                dict(base, name="fifo", model="fifo.pmd"),
                                                dict(base, name="zero", model=str(miku), motion="zero.vmd")])
    r = subprocess.run([*BATCH, jobs, "-o", tmp_path / "out", "--workers", "1", "-q"], capture_output=True,
                       text=True, timeout=240)  # the batch used to hang here, hashing the FIFO
    assert r.returncode == 1, r.stderr
    rows = {row["name"]: row for row in read_results(tmp_path / "out" / "results.jsonl")}
    assert {n: row["status"] for n, row in rows.items()} == {"good": "ok", "fifo": "failed", "zero": "failed"}
    for name, line, path in (("fifo", 2, tmp_path / "fifo.pmd"), ("zero", 3, tmp_path / "zero.vmd")):
        assert rows[name]["error"].startswith(f"{jobs} line {line}: {path}: not a regular file")
        assert f"mmdkit: batch: {name} failed: {rows[name]['error']}\n" in r.stderr
    assert "Traceback" not in r.stderr


def test_killed_driver_takes_its_workers_along(tmp_path, assets):
    jobs = write_jsonl(tmp_path / "jobs.jsonl", long_jobs(assets, 6))
    out = tmp_path / "out"
    proc = subprocess.Popen([*BATCH, jobs, "-o", out, "--workers", "2", "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    procs = {}
    try:
        # jobs are running: a job folder exists, and the forkserver, two workers and the resource tracker
        assert wait_for(lambda: out.is_dir() and any(p.is_dir() for p in out.iterdir())
                        and len(descendants(proc.pid)) >= 4), "no job started"
        procs = descendants(proc.pid)
        proc.kill()
        proc.wait()
        wait_for(lambda: not running(procs), timeout=15)
        left = running(procs)
    finally:
        proc.kill()
        for p in running(procs):  # only what this test started
            os.kill(p, signal.SIGKILL)
    assert left == [], f"still running 15 s after the driver was killed: {left}"
    assert len(procs) >= 4


def test_second_batch_on_a_busy_folder_is_refused(tmp_path, assets):
    jobs = write_jsonl(tmp_path / "jobs.jsonl", long_jobs(assets, 3, frames="0:600"))
    out = tmp_path / "out"
    first = subprocess.Popen([*BATCH, jobs, "-o", out, "--workers", "1", "-q"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: (out / "j0").is_dir()), "the first batch started no job"
        frozen = [first.pid, *descendants(first.pid)]  # held still (its lock kept) however fast its jobs are
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        try:
            second = subprocess.run([*BATCH, jobs, "-o", out, "--workers", "1", "-q"], capture_output=True,
                                    text=True, timeout=240)
            shard = subprocess.run([*BATCH, jobs, "-o", out, "--shard", "0/2", "-q"], capture_output=True,
                                   text=True, timeout=240)
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        _, err = first.communicate(timeout=400)
    finally:
        first.kill()
    assert second.returncode == 2
    assert second.stderr == (f"mmdkit: error: -o: {out} is in use by another batch (PID {first.pid}); wait for "
                             f"it to end or give another output folder\n")
    assert shard.returncode == 2 and shard.stderr == second.stderr  # a shard's jobs are the whole run's too
    assert first.returncode == 0, err  # no job of the first batch lost its files to the second
    rows = read_results(out / "results.jsonl")
    assert [(r["name"], r["status"], r["attempts"]) for r in rows] == [(f"j{i}", "ok", 1) for i in range(3)]
    # the shards of a manifest run side by side, each with its own results table
    shards = [subprocess.Popen([*BATCH, jobs, "-o", out, "--shard", f"{i}/2", "--force", "--workers", "1", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in shards:
        _, err = p.communicate(timeout=400)
        assert p.returncode == 0, err
    assert [[r["status"] for r in read_results(out / f"results-{i}-of-2.jsonl")] for i in range(2)] == \
        [["ok"], ["ok", "ok"]]
    assert not [p.name for p in out.iterdir() if p.name.endswith(".pid")]  # each went with its batch
    # the lock went with the first batch; a temporary file a killed run left in the folder is removed
    (out / ".results.jsonl.k1ll3d.part").write_bytes(b"half a table")
    again = subprocess.run([*BATCH, jobs, "-o", out, "-q"], capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr
    assert [r["status"] for r in read_results(out / "results.jsonl")] == ["skipped"] * 3
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]


def test_ctrl_c_records_what_finished_and_says_how_to_resume(tmp_path, assets):
    quick = dict(long_jobs(assets, 1, frames="0:2")[0], name="quick")
    jobs = write_jsonl(tmp_path / "jobs.jsonl", [quick, *long_jobs(assets, 3)])
    out = tmp_path / "out"
    proc = subprocess.Popen([*BATCH, jobs, "-o", out, "--workers", "1", "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: (out / "quick" / ".mmdkit-job.json").exists()), "the first job did not finish"
        before = len(list(out.glob("*/.mmdkit-job.json")))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    done = sorted(p.parent.name for p in out.glob("*/.mmdkit-job.json"))
    assert len(done) <= before + 1  # at most the job running at the signal finished; no queued job started
    assert err.splitlines()[-1] == (f"mmdkit: batch: interrupted: {len(done)} of 4 jobs done; run the same command "
                                    f"again to resume")
    assert sorted(r["name"] for r in read_results(out / "results.jsonl") if r["status"] == "ok") == done
    assert not [p for p in out.rglob("*") if p.name.endswith(".part")]  # the running job's files went


def test_a_failed_write_names_the_file_and_leaves_nothing(tmp_path, assets):
    """A write that fails with no file name of its own (disk full: ENOSPC; here a file size limit:
    EFBIG) is reported naming the output, and its temporary file is gone."""
    from mmdkit.batch.worker import run_job

    jobs = read_manifest(write_jsonl(tmp_path / "jobs.jsonl", [dict(long_jobs(assets, 1, frames="0:30")[0],
                                                                   physics=False)]))
    warm, store = Store(tmp_path / "warm"), Store(tmp_path / "out")
    for s in (warm, store):
        s.prepare()
    job = plan(jobs, store).todo[0]
    assert run_job(job, warm)["status"] == "ok"  # the same job, nothing written under the limit
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))  # Python ignores SIGXFSZ: writes fail with EFBIG
    try:
        row = run_job(job, store)
        with pytest.raises(OSError) as table:  # the results table: the same
            store.write_text("results.jsonl", "x" * 20000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert table.value.filename == str(tmp_path / "out" / "results.jsonl") and table.value.errno == 27
    assert not (tmp_path / "out" / "results.jsonl").exists()
    assert row["status"] == "failed"
    assert row["error"] == f"{tmp_path / 'out' / 'j0' / 'j0.npz'}: {os.strerror(27)}"
    assert os.listdir(tmp_path / "out" / "j0") == []


def _vpd(path, bone="頭", quaternion=(0.0, 0.0, 0.38268343, 0.92387953)):
    text = ("Vocaloid Pose Data file\r\n\r\nmiku.osm;\r\n1;\r\n\r\nBone0{" + bone + "\r\n 0.000000,0.000000,0.000000;\r\n"
            + " " + ",".join(f"{q:.6f}" for q in quaternion) + ";\r\n}\r\n")
    path.write_bytes(text.encode("cp932"))
    return path


def test_jobs_load_like_the_cli_clips_poses_and_mistakes(tmp_path, assets, mmdkit_cli):
    import mmdkit
    from mmdkit.animation.vpd import apply_pose
    from mmdkit.export import export
    from mmdkit.importers import clips_of

    fox, miku = assets / "gltf" / "Fox.glb", assets / "low_miku" / "miku.pmd"
    bye = assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd"
    _vpd(tmp_path / "head.vpd")
    base = {"frames": "0:3", "outputs": ["npz"], "physics": False}
    jobs = write_jsonl(tmp_path / "jobs.jsonl", [
        dict(base, name="first", model=str(fox)), dict(base, name="run", model=str(fox), clip="Run"),
        dict(base, name="trot", model=str(fox), clip="Trot"),
        dict(base, name="posed", model=str(miku), motion=str(bye), vpd=["head.vpd@2"])])
    out = tmp_path / "out"
    code, _, err = mmdkit_cli("batch", jobs, "-o", out, "--workers", "1", "-q")
    assert code == 1, err
    rows = {r["name"]: r for r in read_results(out / "results.jsonl")}
    assert {n: r["status"] for n, r in rows.items()} == {"first": "ok", "run": "ok", "trot": "failed", "posed": "ok"}

    def joints(name):
        with np.load(out / name / f"{name}.npz") as d:
            return d["joint_position"]

    def expected(model, motion, name):
        path = tmp_path / f"want_{name}.npz"
        export(model, motion, path, frames=np.arange(4.0), physics=False)
        with np.load(path) as d:
            return d["joint_position"]

    model = mmdkit.load(fox)
    clips = clips_of(model)
    for name, clip in (("first", "Survey"), ("run", "Run")):  # no motion: the first clip, as `mmdkit pose` takes
        want = expected(model, clips[clip], name)
        np.testing.assert_allclose(joints(name), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert np.abs(joints("first") - joints("first")[:1]).max() > 0.1  # it moves: not the rest pose
    model = mmdkit.load(miku)
    posed = apply_pose(model, mmdkit.load(bye), mmdkit.load(tmp_path / "head.vpd"), 2)
    want = expected(model, posed, "posed")
    np.testing.assert_allclose(joints("posed"), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert np.abs(expected(model, mmdkit.load(bye), "plain") - want).max() > 0.01  # the pose changed a joint
    # the same mistake, the same message: from a manifest row and from the command line
    code, _, cli_err = mmdkit_cli("pose", fox, "--clip", "Trot", "-o", tmp_path / "x.npz")
    detail = f"'Trot' is not a clip of {fox} (clips: 'Survey', 'Walk', 'Run')"
    assert code == 2 and cli_err == f"mmdkit: error: --clip: {detail}\n"
    assert rows["trot"]["error"] == f"clip: {detail}"
