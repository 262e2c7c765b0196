"""Batch manifests and planning, in this process: JSONL/CSV/globs → jobs, errors naming the line,
stable unique names, shards, content-hash keys and what a re-run skips."""

from __future__ import annotations

import os

import pytest

from mmdkit.batch import FileHasher, Store, cross_product, option_table, plan, read_manifest, shard
from mmdkit.batch.plan import job_key
from mmdkit.errors import FormatError, OptionError

from helpers import write_jsonl


@pytest.fixture
def files(tmp_path, assets):
    """Two model and two motion paths (real files) and a manifest writer."""
    low = assets / "low_miku"
    motions = [assets / "mei" / "Motion" / "mei_bye" / "mei_bye.vmd",
               assets / "mei" / "Motion" / "mei_wait" / "mei_wait.vmd"]
    return {"models": [str(low / "miku.pmd"), str(low / "gumi.pmd")], "motions": [str(m) for m in motions]}


def test_jsonl_and_csv_give_the_same_jobs(tmp_path, files):
    m, v = files["models"][0], files["motions"][0]
    jsonl = write_jsonl(tmp_path / "jobs.jsonl", [
        {"model": m, "motion": v, "frames": "0:30", "outputs": ["npz", "bvh"], "npz": {"joints": "humanoid"}},
        "# a comment line",
        {"model": m, "motion": v, "frames": "10:20:2", "outputs": "npz", "name": "short", "physics": False}])
    csv = tmp_path / "jobs.csv"
    csv.write_text("model,motion,frames,outputs,npz.joints,name,physics\n"
                   f"{m},{v},0:30,npz;bvh,humanoid,,\n{m},{v},10:20:2,npz,,short,false\n")
    a, b = read_manifest(jsonl), read_manifest(csv)
    assert [j.name for j in a] == [j.name for j in b] == ["miku__mei_bye", "short"]
    for x, y in zip(a, b):
        assert (x.model, x.motion, x.outputs, x.frames, x.options, x.physics) == \
               (y.model, y.motion, y.outputs, y.frames, y.options, y.physics)
    assert a[0].outputs == ("npz", "bvh") and a[0].options == {"npz": {"joints": "humanoid"}}
    assert a[1].physics is False and a[1].output_settings("npz")["frames"] == "10:20:2"


def test_relative_paths_and_default_options(tmp_path, files):
    os.symlink(files["models"][0], tmp_path / "m.pmd")
    jobs = read_manifest(write_jsonl(tmp_path / "j.jsonl", [
        {"model": "m.pmd", "outputs": ["npz", "mp4"], "mp4": {"size": "320x240"}}]),
        option_table(["npz.joints=humanoid", "mp4.size=640x360", "mp4.frames=0:300"]))
    assert jobs[0].model == str(tmp_path / "m.pmd") and jobs[0].motion is None
    assert jobs[0].options == {"npz": {"joints": "humanoid"}, "mp4": {"size": "320x240", "frames": "0:300"}}


@pytest.mark.parametrize("line, message", [
    ('{"model": "a.pmx", "outputs": ["npz"]', "line 2: not JSON"),
    ('{"model": "a.pmx", "outputs": ["fbx"]}', "line 2: unknown output 'fbx'"),
    ('{"model": "a.pmx", "outputs": ["npz"], "npz": {"size": "1x1"}}', "line 2: size: does not apply to .npz output"),
    ('{"model": "a.pmx", "outputs": ["npz"], "frames": "5:1"}', "line 2: frames: '5:1': the end 1 is before the start 5"),
    ('{"model": "a.pmx", "outputs": ["npz"], "frames": "a:b"}', "line 2: frames: 'a:b': the start 'a' is not a number"),
    ('{"model": "a.pmx", "outputs": []}', "line 2: 'outputs' must list"),
    ('{"motion": "a.vmd", "outputs": ["npz"]}', "line 2: no 'model'"),
    ('{"model": "a.pmx", "outputs": ["npz"], "colour": 1}', "line 2: unknown key 'colour'"),
    ('[1, 2]', "line 2: a job line must be a JSON object"),
    ('{"model": "a.pmx", "outputs": ["npz"], "name": "x/y"}', "line 2: name 'x/y'"),
    ('{"model": "b.pmx", "outputs": ["npz"], "name": "one"}', "line 2: name 'one' is already used on"),
])
def test_manifest_errors_name_the_line(tmp_path, line, message):
    path = write_jsonl(tmp_path / "bad.jsonl", ['{"model": "a.pmx", "outputs": ["npz"], "name": "one"}', line])
    with pytest.raises(FormatError) as e:
        read_manifest(path)
    assert f"{path} {message}" in str(e.value) and "\n" not in str(e.value)


def test_other_manifest_kinds_and_options_are_refused(tmp_path):
    with pytest.raises(OptionError, match="use a .jsonl"):
        read_manifest(tmp_path / "jobs.txt")
    with pytest.raises(OptionError, match="'npz=1' is not OUTPUT.KEY=VALUE"):
        option_table(["npz=1"])


def test_names_are_unique_and_stable(tmp_path, files):
    m, v = files["models"][0], files["motions"][0]
    entries = [{"model": m, "motion": v, "outputs": ["npz"], "frames": "0:10"},
               {"model": m, "motion": v, "outputs": ["npz"], "frames": "0:20"},
               {"model": files["models"][1], "motion": v, "outputs": ["npz"]}]
    a = [j.name for j in read_manifest(write_jsonl(tmp_path / "a.jsonl", entries))]
    b = [j.name for j in read_manifest(write_jsonl(tmp_path / "b.jsonl", entries[::-1]))]
    assert len(set(a)) == 3 and a[0].startswith("miku__mei_bye-") and a[2] == "gumi__mei_bye"
    assert sorted(a) == sorted(b)  # a name depends on the job, not on its place in the manifest
    with pytest.raises(FormatError, match="line 2: the same job as .* line 1"):
        read_manifest(write_jsonl(tmp_path / "c.jsonl", [entries[0], entries[0]]))


def test_cross_product_and_shards(tmp_path, files):
    low = os.path.dirname(files["models"][0])
    jobs = cross_product([os.path.join(low, "*.pmd")], files["motions"], ["npz"], frames="0:5")
    assert [(os.path.basename(j.model), os.path.basename(j.motion)) for j in jobs] == [
        ("gumi.pmd", "mei_bye.vmd"), ("gumi.pmd", "mei_wait.vmd"), ("miku.pmd", "mei_bye.vmd"),
        ("miku.pmd", "mei_wait.vmd")]
    parts = [shard(jobs, f"{i}/3") for i in range(3)]
    assert sorted(j.name for p in parts for j in p) == sorted(j.name for j in jobs)
    assert all(len(p) >= 1 for p in parts)
    with pytest.raises(OptionError, match="--shard: '3/3'"):
        shard(jobs, "3/3")
    with pytest.raises(OptionError, match="--models: .*nothing-here"):
        cross_product([str(tmp_path / "nothing-here*.pmx")], [], ["npz"])


def test_keys_follow_contents_and_options(tmp_path, files):
    model = tmp_path / "m.pmd"
    model.write_bytes(open(files["models"][0], "rb").read())
    entry = {"model": str(model), "motion": files["motions"][0], "outputs": ["npz"]}
    job, = read_manifest(write_jsonl(tmp_path / "j.jsonl", [entry]))
    hasher = FileHasher()
    key = job_key(job, hasher)
    job2, = read_manifest(write_jsonl(tmp_path / "j.jsonl", [dict(entry, npz={"joints": "humanoid"})]))
    assert job_key(job2, hasher) != key  # an option changed
    data = bytearray(model.read_bytes())
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    os.utime(model, ns=(1, 1))  # a new mtime: hashed again in the next planning pass
    assert job_key(job, hasher) == key  # within a pass each file is looked at once
    hasher.begin()
    assert job_key(job, hasher) != key


def test_plan_skips_done_jobs_and_fails_missing_inputs(tmp_path, files):
    entries = [{"model": files["models"][0], "motion": files["motions"][0], "outputs": ["npz"], "name": "done"},
               {"model": files["models"][1], "motion": files["motions"][0], "outputs": ["npz"], "name": "todo"},
               {"model": files["models"][0], "motion": str(tmp_path / "gone.vmd"), "outputs": ["npz"], "name": "x"}]
    jobs = read_manifest(write_jsonl(tmp_path / "j.jsonl", entries))
    store = Store(tmp_path / "out")
    store.prepare()
    done = plan(jobs, store).todo[0]
    assert done.name == "done"
    os.makedirs(tmp_path / "out" / "done")
    (tmp_path / "out" / "done" / "done.npz").write_bytes(b"12345")
    store.write_record("done", {"key": done.key, "outputs": [{"filename": "done.npz", "size": 5}], "frames": 3})
    p = plan(jobs, store)
    assert [j.name for j in p.todo] == ["todo"]
    assert [(r["name"], r["frames"]) for r in p.skipped] == [("done", 3)]
    assert p.failed[0]["name"] == "x" and "j.jsonl line 3: " in p.failed[0]["error"]
    (tmp_path / "out" / "done" / "done.npz").write_bytes(b"123")  # an output damaged: run again
    assert [j.name for j in plan(jobs, store).todo] == ["done", "todo"]
    assert len(plan(jobs, store, force=True).todo) == 2


def test_clip_and_vpd_keys(tmp_path, files):
    """A model's own clip by name or index and VPD poses (FILE relative to the manifest) as `mmdkit pose
    --clip/--vpd` take them; both are part of the job's key; a malformed one names the manifest line."""
    m, v = files["models"][0], files["motions"][0]
    (tmp_path / "p.vpd").write_bytes(b"Vocaloid Pose Data file\r\n\r\nm.osm;\r\n0;\r\n")
    jobs = read_manifest(write_jsonl(tmp_path / "j.jsonl", [
        {"model": "fox.glb", "clip": 2, "outputs": ["npz"]}, {"model": "fox.glb", "clip": "Run", "outputs": ["npz"]},
        {"model": m, "motion": v, "vpd": ["p.vpd@10:0.5"], "outputs": ["npz"], "name": "posed"},
        {"model": m, "motion": v, "vpd": "p.vpd@10;p.vpd@20:0", "outputs": ["npz"], "name": "two"},
        {"model": m, "motion": v, "outputs": ["npz"], "name": "plain"}]))
    assert [(j.name, j.clip) for j in jobs[:2]] == [("fox__2", "2"), ("fox__Run", "Run")]
    assert jobs[2].vpd == (f"{tmp_path / 'p.vpd'}@10:0.5",)
    assert jobs[3].vpd == (f"{tmp_path / 'p.vpd'}@10:1", f"{tmp_path / 'p.vpd'}@20:0")
    assert jobs[2].inputs()["vpd0"] == str(tmp_path / "p.vpd")
    hasher = FileHasher()
    assert len({job_key(j, hasher) for j in jobs[2:]}) == 3
    for entry, message in (({"clip": True}, "'clip' must be a clip's name or index"),
                           ({"vpd": "p.vpd"}, "vpd: 'p.vpd' is not FILE.vpd@FRAME[:WEIGHT]"),
                           ({"vpd": ["p.vpd@x"]}, "vpd: 'p.vpd@x': FRAME must be an integer, WEIGHT a number"),
                           ({"vpd": [3]}, "'vpd' must list FILE.vpd@FRAME[:WEIGHT] poses")):
        path = write_jsonl(tmp_path / "bad.jsonl", [dict({"model": m, "outputs": ["npz"]}, **entry)])
        with pytest.raises(FormatError) as e:
            read_manifest(path)
        assert str(e.value).startswith(f"{path} line 1: ") and message in str(e.value)


def test_hashing_reads_a_file_as_far_as_its_size(tmp_path):
    """An input is hashed up to the size it had when opened (a /proc file says 0 and never ends for
    some); a file is hashed in pieces, equal to hashing it whole."""
    import hashlib

    hasher = FileHasher()
    assert hasher.digest("/proc/self/status") == hashlib.sha256(b"").hexdigest()
    data = os.urandom(3 * (1 << 20) + 5)
    (tmp_path / "big.wav").write_bytes(data)
    assert hasher.digest(str(tmp_path / "big.wav")) == hashlib.sha256(data).hexdigest()


def test_docs_list_every_key():
    """docs/batch.md names every key a job line takes and every option an output table takes."""
    from pathlib import Path

    from mmdkit.batch.manifest import COMMON_OPTIONS, JOB_KEYS, OUTPUTS, RENDER_OPTIONS
    from mmdkit.io import EXPORT_OPTIONS

    text = (Path(__file__).resolve().parents[1] / "docs" / "batch.md").read_text()
    missing = [k for k in JOB_KEYS + OUTPUTS + COMMON_OPTIONS + RENDER_OPTIONS + EXPORT_OPTIONS if f"`{k}`" not in text]
    assert missing == []
