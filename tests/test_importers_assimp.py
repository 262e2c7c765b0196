"""FBX / .x / COLLADA / BVH / ... through the Assimp bridge (mmdkit.importers.assimp).

References: each file's own scene skinned as Assimp defines it (Σ w·node_world(bone)·offset·v,
the ``gltf_skinning`` of test_importers_gltf over the asset the bridge built), and for glTF files the
native reader: both readers must pose the same vertices (matched as point sets: Assimp joins
identical vertices, so its vertex order and count differ).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_importers_gltf import engine_skinning, gltf_skinning, run, size_of

import mmdkit
from mmdkit.errors import FormatError, OptionError
from mmdkit.importers import clips_of, load_gltf_scene
from mmdkit.importers.assimp import DEFAULT_FLAGS, EXTENSIONS, assimp_asset, load_assimp_scene, read_assimp_raw

CHARACTERS = [  # file, bones, vertices, clips
    ("X/anim_test.x", 4, 485, ["cylinder_test"]),
    ("X/BCN_Epileptic.X", 54, 3014, ["Epileptisch"]),
    ("X/Testwuson.X", 37, 3205, ["Wuson_Run", "Wuson_Walk", "Wuson_Bind"]),
    ("FBX/animation_with_skeleton.fbx", 14, 2464, ["Armature|ArmatureAction"]),
    ("Collada/library_animation_clips.dae", 4, 72, ["combinedAnim_0", "combinedAnim_1"]),
    ("BVH/01_01.bvh", 34, 492, ["Motion"]),
    ("BVH/Boxing_Toes.bvh", 26, 396, ["Motion"]),
]


@pytest.fixture(scope="module")
def models(assets):
    return assets / "assimp" / "models"


def nearest(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``a`` (n, 3) the index of the nearest row of ``b`` and the distance."""
    idx, dist = np.empty(len(a), np.int64), np.empty(len(a))
    for s in range(0, len(a), 256):
        d = ((a[s:s + 256, None, :] - b[None]) ** 2).sum(-1)
        idx[s:s + 256], dist[s:s + 256] = d.argmin(1), np.sqrt(d.min(1))
    return idx, dist


def sample_frames(motion) -> list[int]:
    last = int(motion.last_frame)
    return sorted({0, last // 3, (2 * last) // 3, last})


def test_default_flags_are_the_bridges():
    from mmdkit.importers import _assimp

    assert _assimp.DEFAULT_FLAGS == np.bitwise_or.reduce([_assimp.FLAGS[n] for n in DEFAULT_FLAGS])
    assert _assimp.VERSION.startswith("5.")


def test_extensions_are_registered():
    from mmdkit.formats.registry import known_extensions, reader_for

    assert {".fbx", ".x", ".dae", ".bvh", ".obj"} <= set(EXTENSIONS) <= set(known_extensions("model"))
    assert {reader_for(ext=e).fn for e in EXTENSIONS} == {mmdkit._read_assimp}  # one reader: the Assimp bridge's
    assert reader_for(ext=".X").fn == reader_for(ext=".x").fn  # any case


@pytest.mark.parametrize("name,bones,vertices,clips", CHARACTERS)
def test_counts_rest_and_a_clip_frame(models, name, bones, vertices, clips):
    """Counts; an empty motion skins to the bind mesh; a frame of each clip is finite and moves."""
    model = mmdkit.load(models / name)
    clip_set = clips_of(model)
    assert (model.num_bones, model.num_vertices, list(clip_set)) == (bones, vertices, clips)
    size = size_of(model)
    np.testing.assert_allclose(engine_skinning(model, None, 0), model.vertex_position, atol=1e-5 * size)
    for clip in clips:
        motion = clip_set[clip]
        if motion.last_frame == 0:  # Wuson_Bind: one key
            continue
        posed = engine_skinning(model, motion, motion.last_frame // 2)
        assert np.isfinite(posed).all()
        assert 0.01 * size < np.abs(posed - model.vertex_position).max() < 10 * size, clip


@pytest.mark.parametrize("name", ["X/BCN_Epileptic.X", "X/anim_test.x", "FBX/animation_with_skeleton.fbx",
                                  "Collada/library_animation_clips.dae", "BVH/Boxing_Toes.bvh"])
def test_clips_skin_as_the_scene_defines(models, name):
    """Engine frames = Σ w·node_world(bone)·offset·v over the scene the bridge read (frame f = f/30 s)."""
    path = str(models / name)
    raw = read_assimp_raw(None, path)
    asset = assimp_asset(raw, path)
    model, clips = load_assimp_scene(path, scale=12.5)
    size = size_of(model)
    for k, clip in enumerate(clips):
        for f in sample_frames(clips[clip])[:3]:
            want = gltf_skinning(asset, k, min(f / 30, asset.animations[k].duration))
            got = engine_skinning(model, clips[clip], f)
            assert np.abs(got - want).max() < 1e-4 * size, (clip, f)


TWO_READERS = ["gltf/CesiumMan.glb", "gltf/Fox.glb", "gltf/RobotExpressive.glb", "gltf/SimpleSkin.gltf",
               "assimp/models/glTF2/simple_skin/simple_skin.gltf",
               "assimp/models/glTF2/AnimatedMorphCube/glTF/AnimatedMorphCube.gltf",
               "assimp/models/glTF2/MorphStressTest/glTF/MorphStressTest.gltf",
               "assimp/models/glTF2/AnimatedMorphSphere/glTF/AnimatedMorphSphere.gltf",
               "assimp/models/glTF2/MorphPrimitivesTest/glTF/MorphPrimitivesTest.gltf",
               "assimp/models/glTF2/SimpleMorph/glTF/SimpleMorph.gltf", "assimp/models/glTF2/simple_skin/quad_skin.glb"]


@pytest.mark.parametrize("name", TWO_READERS)
def test_two_readers_agree(assets, name):
    """The same glTF read natively and through Assimp: same bones and clips, and the same skinned
    vertices (within 1e-4 of the model's size) at rest and on sampled frames of (up to 4 of) its clips."""
    native, native_clips = load_gltf_scene(assets / name)
    model, clips = load_assimp_scene(assets / name)
    assert (model.num_bones, list(clips)) == (native.num_bones, list(native_clips))
    assert model.num_vertices <= native.num_vertices  # joined identical vertices
    size = size_of(native)
    match, dist = nearest(engine_skinning(model, None, 0), engine_skinning(native, None, 0))
    assert dist.max() < 1e-4 * size
    for clip in list(clips)[:4]:
        for f in sample_frames(clips[clip]):
            got, want = engine_skinning(model, clips[clip], f), engine_skinning(native, native_clips[clip], f)
            assert np.abs(got - want[match]).max() < 1e-4 * size, (clip, f)


def test_weights_limited_to_four_and_renormalised(models):
    model = mmdkit.load(models / "FBX/animation_with_skeleton.fbx")
    assert any("1515 vertices had more than 4 bone weights" in w for w in model.warnings)
    np.testing.assert_allclose(model.vertex_bone_weight.sum(1), 1.0, atol=1e-5)


def test_bone_without_a_node_follows_its_chain(models):
    """anim_test.x weighs vertices to 'joint3'/'joint4', which it never defines as frames."""
    model = mmdkit.load(models / "X/anim_test.x")
    assert list(model.bone_name) == ["joint1", "joint2", "joint3", "joint4"]
    assert list(model.bone_parent) == [-1, 0, 1, 2]
    assert "bones without a node" in model.warnings[0]


def test_textures_are_read(models):
    """Files beside the model (IQM), and textures the file holds (FBX), named by their own file name."""
    model = mmdkit.load(models / "IQM/mrfixit.iqm")
    assert model.texture_path == ("Body.jpg", "Head.jpg")
    assert model.source_extras["embedded_textures"]["Body.jpg"][:2] == b"\xff\xd8"
    model = mmdkit.load(models / "FBX/embedded_ascii/box.FBX")
    assert model.texture_path == ("uv_test.png",)
    assert model.source_extras["embedded_textures"]["uv_test.png"][:4] == b"\x89PNG"
    assert mmdkit.load(models / "FBX/box_orphant_embedded_texture.fbx").texture_path == ("GridGrey.tga",)


def test_cli_info_convert_and_render(models, tmp_path):
    info = json.loads(run("info", "--json", models / "BVH/01_01.bvh").stdout)
    got = (info["format"], info["bones"], info["skin_joints"], info["names"]["clips"])
    assert got == ("bvh", 34, 34, ["Motion"])
    r = run("convert", models / "X/anim_test.x", tmp_path / "anim.pmx")
    assert r.returncode == 0 and "dropped 1 clips (cylinder_test)" in r.stderr, r.stderr
    r = run("convert", models / "X/anim_test.x", tmp_path / "anim.vmd", "--clip", "0")
    assert r.returncode == 0, r.stderr
    model, clips = load_assimp_scene(models / "X/anim_test.x")
    pmx, vmd = mmdkit.load(tmp_path / "anim.pmx"), mmdkit.load(tmp_path / "anim.vmd")
    np.testing.assert_allclose(engine_skinning(pmx, vmd, 15), engine_skinning(model, clips["cylinder_test"], 15),
                               atol=1e-3 * size_of(model))
    out = tmp_path / "wuson.png"
    r = run("render", models / "X/Testwuson.X", "--clip", "Wuson_Walk", "--frames", "30", "--size", "160x120",
            "-o", out)
    assert r.returncode == 0, r.stderr
    from PIL import Image

    img = np.asarray(Image.open(out).convert("RGB")).astype(int)
    assert 0.02 < (img.sum(-1) < 600).mean() < 0.6  # the grey pig on white


def test_bad_files_are_one_line(models, tmp_path):
    fbx = (models / "FBX/animation_with_skeleton.fbx").read_bytes()
    (tmp_path / "cut.fbx").write_bytes(fbx[:3000])
    (tmp_path / "garbage.x").write_bytes(b"xof 0303txt 0032 garbage {{{ ]]")
    (tmp_path / "cut.x").write_bytes((models / "X/Testwuson.X").read_bytes()[:20000])
    cases = [tmp_path / "cut.fbx", tmp_path / "garbage.x", tmp_path / "cut.x", tmp_path / "missing.fbx",
             models / "X/malformed_skinweights_oob.x"]
    for path in cases:
        r = run("info", path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"mmdkit: error: {path}"), r.stderr
    with pytest.raises(FormatError, match="Assimp: FBX-Tokenize"):
        mmdkit.load(tmp_path / "cut.fbx")


def test_missing_extension_says_what_to_install(models):
    code = ("import sys; sys.modules['mmdkit.importers._assimp'] = None\nimport mmdkit\n"
            "from mmdkit.errors import UnavailableError\n"
            f"try:\n    mmdkit.load({str(models / 'X/anim_test.x')!r})\n"
            "except UnavailableError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.strip() == "Assimp support needs libassimp-dev: run scripts/setup.sh"


# --- Assimp runs in a helper process's workers: crashes, hangs and limits are one line ---------------------------

FUZZ = json.loads((Path(__file__).parent / "data" / "assimp_fuzz" / "cases.json").read_text())["cases"]
NONNUMERIC_SKIN_WEIGHTS = (b'xof 0303txt 0032\nMesh m {\n 3;\n 0;0;0;,\n 1;0;0;,\n 0;1;0;;\n 1;\n 3;0,1,2;;\n'
                           b' SkinWeights {\n  "b";\n  2;\n  `,\n  1;\n  1.0,\n  1.0;\n'
                           b'  1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1;;\n }\n}\n')


def fuzz_case(models, folder, case_id: str) -> Path:
    """The fuzz case's file, rebuilt from its seed (tests/data/assimp_fuzz/cases.json)."""
    c = next(c for c in FUZZ if c["id"] == case_id)
    seed = (models / c["seed"]).read_bytes()
    path = folder / (c["id"] + c["ext"])
    path.write_bytes(seed[:c["prefix"]] + bytes.fromhex(c["middle_hex"]) + seed[c["seed_suffix_from"]:])
    return path


def one_line_error(path) -> str:
    """``mmdkit.load(path)``'s FormatError message (one line, naming the file)."""
    with pytest.raises(FormatError) as e:
        mmdkit.load(path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{path}: "), text
    return text[len(f"{path}: "):]


@pytest.mark.parametrize("case_id", [c["id"] for c in FUZZ if c["status"] == "crash"])
def test_a_crash_inside_assimp_is_one_line(models, tmp_path, case_id):
    """Each file that killed the calling process (SIGSEGV, SIGABRT double free) is a FormatError now,
    and this process lives on. The FBX double frees corrupt the heap without always crashing: those
    may also load."""
    path = fuzz_case(models, tmp_path, case_id)
    if path.suffix == ".FBX":
        try:
            mmdkit.load(path)
        except FormatError as e:
            assert "\n" not in str(e) and str(e).startswith(f"{path}: "), str(e)
        return
    assert one_line_error(path) == "Assimp crashed (SIGSEGV) while reading this file"


def test_a_hang_inside_assimp_is_stopped_at_the_time_limit(models, tmp_path, monkeypatch):
    """A NUL in an SMD node name loops forever ignoring SIGTERM and SIGINT: SIGKILLed at the limit."""
    monkeypatch.setenv("MMDKIT_ASSIMP_SECONDS", "2")
    path = fuzz_case(models, tmp_path, "a0135")
    start = time.monotonic()
    assert one_line_error(path) == ("Assimp did not finish reading this file within 2 s (stopped; "
                                    "MMDKIT_ASSIMP_SECONDS sets the limit)")
    assert time.monotonic() - start < 30
    assert mmdkit.load(models / "SMD/triangle.smd").num_vertices == 3  # the next file reads as usual


def test_memory_limit_and_bad_limits(models, monkeypatch):
    from mmdkit.importers import assimp_process

    # a fresh helper: one that read many files has free heap its workers could fill without
    # growing their address space (the limit counts growth beyond the helper's own size)
    assimp_process._HELPER.stop()
    monkeypatch.setenv("MMDKIT_ASSIMP_MEMORY_MB", "1")
    assert one_line_error(models / "X/Testwuson.X") == ("Assimp needed more than 1 MiB reading this file "
                                                        "(stopped; MMDKIT_ASSIMP_MEMORY_MB sets the limit)")
    monkeypatch.setenv("MMDKIT_ASSIMP_MEMORY_MB", "-1")
    with pytest.raises(OptionError, match="MMDKIT_ASSIMP_MEMORY_MB: must be a finite number > 0, not -1"):
        mmdkit.load(models / "X/test.x")


def test_tracebacks_of_the_fuzz_are_one_line(models, tmp_path):
    """Non-numeric SkinWeights broke the .x pre-check (ValueError); an infinite node matrix broke the
    SVD of the bind pose (LinAlgError). The pre-check still refuses a vertex the mesh lacks."""
    x = tmp_path / "skinweights_nonnumeric.x"
    x.write_bytes(NONNUMERIC_SKIN_WEIGHTS)
    assert one_line_error(x) == "Assimp: Line 11: Number expected."
    assert one_line_error(fuzz_case(models, tmp_path, "a0138")) == "node 'Root': matrix: value [inf] is not finite"
    assert one_line_error(models / "X/malformed_skinweights_oob.x").startswith("SkinWeights of bone 'Cube' name vertex")


def test_cli_crash_and_hang_exit_2(models, tmp_path):
    crash, hang = fuzz_case(models, tmp_path, "a0034"), fuzz_case(models, tmp_path, "a0135")
    env = dict(os.environ, MMDKIT_ASSIMP_SECONDS="2")
    for path, detail in ((crash, "Assimp crashed (SIGSEGV) while reading this file"),
                         (hang, "Assimp did not finish reading this file within 2 s")):
        r = subprocess.run([sys.executable, "-m", "mmdkit", "info", str(path)], capture_output=True, text=True,
                           timeout=120, env=env)
        assert r.returncode == 2 and r.stderr.startswith(f"mmdkit: error: {path}: {detail}"), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_batch_rows_say_the_same(models, tmp_path, mmdkit_cli):
    crash = fuzz_case(models, tmp_path, "a0034")
    manifest = tmp_path / "jobs.jsonl"
    jobs = [{"model": str(crash), "outputs": ["npz"], "name": "crash"},
            {"model": str(models / "X/anim_test.x"), "outputs": ["npz"], "name": "good"}]
    manifest.write_text("".join(json.dumps(dict(j, frames="0:1", physics=False)) + "\n" for j in jobs))
    code, _, err = mmdkit_cli("batch", manifest, "-o", tmp_path / "out", "--workers", "1", "-q")
    rows = {r["name"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert rows["crash"]["status"] == "failed" and rows["good"]["status"] == "ok", err
    assert rows["crash"]["error"] == f"{crash}: Assimp crashed (SIGSEGV) while reading this file"


def same(a, b) -> bool:
    """Equal scene dicts. Exact: both are the bridge's own output for the same file on this machine
    (the helper's copy comes through a pickle), not two computations."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", ["X/Testwuson.X", "FBX/animation_with_skeleton.fbx", "BVH/01_01.bvh",
                                  "IQM/mrfixit.iqm", "glTF2/simple_skin/simple_skin.gltf"])
def test_the_helper_gives_the_bridges_scene(models, name):
    from mmdkit.importers import _assimp

    path = str(models / name)
    data = (models / name).read_bytes()
    raw = read_assimp_raw(None, path)
    assert (raw.pop("warnings"), raw.pop("source_bytes")) == ([], len(data))
    assert same(raw, _assimp.load(path))  # the bridge in this process: safe for a good file
    raw = read_assimp_raw(data, "in-memory" + Path(name).suffix)
    assert (raw.pop("warnings"), raw.pop("source_bytes")) == ([], len(data))
    assert same(raw, _assimp.load("x" + Path(name).suffix, data))


def test_threads_take_turns_and_a_lost_helper_is_replaced(models):
    """The helper dies with the thread that started it (PR_SET_PDEATHSIG): the next read starts another."""
    from mmdkit.importers import assimp_process

    path = str(models / "X/anim_test.x")
    want = read_assimp_raw(None, path)
    assimp_process._HELPER.stop()
    got = []
    threads = [threading.Thread(target=lambda: got.append(read_assimp_raw(None, path))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3 and all(same(g, want) for g in got)
    assert same(read_assimp_raw(None, path), want)


def test_a_forked_child_starts_its_own_helper(models):
    """A child forked while this process's helper runs must not talk to it (both would read its
    answers): it starts its own, and this process's helper still answers afterwards."""
    from mmdkit.importers import assimp_process

    path = str(models / "X/test.x")
    want = read_assimp_raw(None, path)
    ours = assimp_process._HELPER.proc.pid
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads running
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if same(read_assimp_raw(None, path), want) and assimp_process._HELPER.proc.pid != ours else 1
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert same(read_assimp_raw(None, path), want) and assimp_process._HELPER.proc.pid == ours


def children(pid: int) -> list[int]:
    """Live (not zombie) child processes of ``pid``."""
    out = []
    for d in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{d}/stat").read_text() if d.isdigit() else ""
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields and int(fields[1]) == pid and fields[0] not in "ZX":
            out.append(int(d))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


@pytest.mark.parametrize("how,code", [(signal.SIGKILL, -9), (signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_helper_and_worker_end_with_the_caller(models, tmp_path, how, code):
    """A caller killed, terminated or interrupted while Assimp loops takes its helper and worker along."""
    hang = fuzz_case(models, tmp_path, "a0135")
    env = dict(os.environ, MMDKIT_ASSIMP_SECONDS="300")
    caller = subprocess.Popen([sys.executable, "-m", "mmdkit", "info", str(hang)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, helpers, workers = time.monotonic() + 120, [], []
        while not workers and time.monotonic() < deadline:
            time.sleep(0.1)
            helpers = children(caller.pid)
            workers = [w for h in helpers for w in children(h)]
        assert workers, "no Assimp worker started"
        caller.send_signal(how)
        assert caller.wait(timeout=60) == code
        deadline = time.monotonic() + 20
        while any(map(alive, helpers + workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(alive, helpers + workers))
    finally:
        caller.kill()
        caller.wait()
        caller.stderr.close()
