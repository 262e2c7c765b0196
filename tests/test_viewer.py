"""`mmdkit view` in a real browser: Debian's Chromium, headless, WebGL in software (SwiftShader).

One server (`mmdkit view --demo --no-browser`, Gene_light dancing WAVEFILE with physics) and one
browser serve the whole module. The page exposes ``window.__mmdkit`` (its shown frame, the world
positions of the skeleton it renders); poses are compared with ``mmdkit.runtime.pose``. Waits are
generous (a loaded 2-core machine renders a frame in software in ~0.2 s); nothing asserts time.
"""

from __future__ import annotations

import atexit
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
import time
import urllib.request
import wave

import numpy as np
import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

import mmdkit
import mmdkit.demo
from mmdkit.animation.builder import MotionBuilder
from mmdkit.cli import main
from mmdkit.demo import demo_character
from mmdkit.export.gltf.animation import camera_pose
from mmdkit.model.space import Space, quaternions_from_rotations
from mmdkit.physics import physics_for
from mmdkit.runtime import pose
from mmdkit.runtime.crowd import CROWD_FRAME_OFFSET, crowd_offsets, crowd_spacing
from mmdkit.viewer.cache import cached_glb, glb_cache_key, store_glb

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
BACKGROUND = np.array([0xE8, 0xEB, 0xF0])  # the page's clear colour (viewer.js)
HAIR = "髪"  # Gene's hair bones: 前髪…, 右横髪…, 後髪…
SCRUB = 240  # a frame mid-dance, hair swinging
CACHE = tempfile.mkdtemp(prefix="mmdkit-test-viewer-cache-")
atexit.register(shutil.rmtree, CACHE, True)


def _start(args, timeout=180.0):
    """(process, url): `mmdkit view ARGS --no-browser` started, its URL read from stdout."""
    env = dict(os.environ, MMDKIT_CACHE=CACHE)  # the GLB cache of these tests, not the user's
    proc = subprocess.Popen([sys.executable, "-m", "mmdkit", "view", *args, "--no-browser", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()  # blocks until the URL (or EOF when it failed)
    m = re.search(r"http://\S+/", line)
    if not m:
        proc.kill()
        pytest.fail(f"mmdkit view printed no URL: {line!r} {proc.stderr.read()}")
    return proc, m.group(0)


def _stop(proc) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture(scope="module")
def extras(tmp_path_factory):
    """(camera .vmd, song .wav, camera Motion): a camera moving over 600 frames and 3 s of a tone."""
    folder = tmp_path_factory.mktemp("viewer")
    cam = MotionBuilder()
    cam.add_camera_key(0, -45.0, (0, 10, 0), (0, 0, 0), fov=30)
    cam.add_camera_key(600, -30.0, (0, 12, 0), (0.1, 0.6, 0), fov=40)
    camera = cam.build()
    mmdkit.save(camera, folder / "camera.vmd")
    rate = 22050
    tone = (8000 * np.sin(2 * np.pi * 440 * np.arange(3 * rate) / rate)).astype("<i2")
    with wave.open(str(folder / "song.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(tone.tobytes())
    return folder / "camera.vmd", folder / "song.wav", camera


@pytest.fixture(scope="module")
def server(extras):
    proc, url = _start(["--demo", "--camera", str(extras[0]), "--audio", str(extras[1])])
    yield url
    _stop(proc)


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--use-angle=swiftshader",
              "--enable-unsafe-swiftshader", "--window-size=800,560", "--mute-audio", "--autoplay-policy=no-user-gesture-required"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_script_timeout(120)
    yield driver
    driver.quit()


def _wait(driver, script: str, timeout: float = 120.0, what: str = ""):
    """Poll ``return <script>`` until truthy; its value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"page never showed {what or script}")


@pytest.fixture(scope="module")
def page(server, browser):
    browser.get(server)
    _wait(browser, "window.__mmdkit && window.__mmdkit.ready()", what="the character's first frame")
    browser.find_element(By.ID, "floor").click()  # the floor off: what is not background is the character
    browser.find_element(By.ID, "follow").click()  # the orbit camera (framing the character), not the VMD's
    return browser


def _canvas(driver) -> np.ndarray:
    """(H, W, 3) uint8 screenshot of the 3D view (left of the panel)."""
    png = driver.get_screenshot_as_png()
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    width = driver.execute_script("return document.getElementById('view').clientWidth")
    return img[:, :width]


def _seek(driver, frame: int, physics: bool):
    """Pause, go to ``frame`` with physics on/off, wait until the page shows exactly that."""
    driver.execute_script(f"__mmdkit.pause(); __mmdkit.setPhysics({str(physics).lower()}); __mmdkit.seek({frame})")
    _wait(driver, f"__mmdkit.frame() === {frame} && __mmdkit.physics() === {str(physics).lower()}",
          what=f"frame {frame}")
    _drawn(driver)


def _drawn(driver, frames: int = 2):
    """Wait until the page has drawn ``frames`` more frames (what it shows now is on the canvas)."""
    start = driver.execute_script("return __mmdkit.drawn()")
    _wait(driver, f"__mmdkit.drawn() >= {start + frames}", what=f"{frames} more frames drawn")


def _bone_positions(driver) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bone indices (J,), positions (J, 3), rotations (J, 4) x y z w), MMD space, of the skeleton
    the page renders."""
    rows = driver.execute_script("return __mmdkit.bonePositions()")
    return (np.array([r["bone"] for r in rows]), np.array([r["position"] for r in rows], np.float64),
            np.array([r["rotation"] for r in rows], np.float64))


def _degrees(q: np.ndarray, bone_world: np.ndarray) -> np.ndarray:
    """(J,) angle in degrees between rotations q (J, 4) and those of bone_world (J, 4, 4)."""
    dot = np.abs((q * quaternions_from_rotations(bone_world[:, :3, :3])).sum(axis=1))
    return np.degrees(2 * np.arccos(np.clip(dot, 0.0, 1.0)))


@pytest.fixture(scope="module")
def reference():
    """Gene + WAVEFILE posed by mmdkit at frames 0..SCRUB, with and without physics."""
    model, motion = demo_character()
    frames = np.arange(SCRUB + 1, dtype=np.float64)
    out = pose(model, motion, frames, physics=True)
    return model, out["bone_world"][SCRUB], pose(model, motion, [SCRUB])["bone_world"][0], out["morph_weight"]


def test_page_shows_the_character_and_plays(page, tmp_path):
    _seek(page, 0, True)
    first = _canvas(page)
    drawn = np.abs(first.astype(int) - BACKGROUND).sum(axis=2) > 30
    assert drawn.mean() > 0.01, "the canvas is blank"
    ys, xs = np.nonzero(drawn)
    H, W = drawn.shape
    assert W * 0.25 < xs.mean() < W * 0.75 and H * 0.15 < ys.mean() < H * 0.85  # the character, framed
    assert ys.max() - ys.min() > 0.5 * H  # ... filling most of the height
    _seek(page, 600, True)  # mid-dance
    first = _canvas(page)
    page.find_element(By.ID, "play").click()
    _wait(page, "__mmdkit.frame() > 630", what="playback past frame 630")
    page.find_element(By.ID, "play").click()
    later = _canvas(page)
    changed = np.abs(later.astype(int) - first.astype(int)).sum(axis=2) > 30
    assert changed.mean() > 0.002, "the picture did not change while playing"


def test_scrubbing_shows_that_frames_pose(page, reference):
    model, with_physics, _, morph_weight = reference
    _seek(page, SCRUB, True)
    bone, shown, rotation = _bone_positions(page)
    assert (bone >= 0).all() and len(bone) > 100
    err = np.linalg.norm(shown - with_physics[bone, :3, 3], axis=1)
    assert err.max() < 0.02, f"bone {model.bone_name[bone[err.argmax()]]} off by {err.max():.4f} MMD units"
    angle = _degrees(rotation, with_physics[bone])
    assert angle.max() < 0.5, f"bone {model.bone_name[bone[angle.argmax()]]} turned {angle.max():.2f}° off"
    for frame in (SCRUB, 0):  # the face too: morph weights (frame 0: a blink at full weight)
        if frame != SCRUB:
            _seek(page, frame, True)
        shown = {int(k): v for k, v in page.execute_script("return __mmdkit.morphWeights()").items()}
        assert len(shown) > 50
        assert max(abs(v - morph_weight[frame, k]) for k, v in shown.items()) < 1e-5
    assert max(shown.values()) == 1.0


def test_physics_toggle_changes_the_hair(page, reference):
    model, with_physics, without, _ = reference
    _seek(page, SCRUB, True)
    bone, _, on = _bone_positions(page)
    picture_on = _canvas(page)
    page.find_element(By.ID, "physics").click()  # the page's own toggle, off
    _wait(page, f"__mmdkit.physics() === false && __mmdkit.frame() === {SCRUB}", what="physics off")
    _drawn(page)
    _, off_position, off = _bone_positions(page)
    picture_off = _canvas(page)
    page.find_element(By.ID, "physics").click()
    hair = np.array([HAIR in model.bone_name[b] for b in bone])
    turned = _degrees(on, with_physics[bone])  # on: physics' pose ...
    assert turned.max() < 0.5
    assert _degrees(off, without[bone]).max() < 0.5  # off: the keys' pose
    assert np.linalg.norm(off_position - without[bone, :3, 3], axis=1).max() < 0.02
    swing = _degrees(off, with_physics[bone])  # ... and they differ in the hair
    assert swing[hair].max() > 5.0, "the hair did not change with physics"
    assert swing[bone == model.bone_name.index("頭")].max() < 0.5  # the head is the same either way
    assert (np.abs(picture_on.astype(int) - picture_off.astype(int)).sum(axis=2) > 30).mean() > 0.0005


def test_overlays_draw_bones_and_rigid_bodies(page):
    _seek(page, SCRUB, True)
    plain = _canvas(page)
    for toggle in ("bones", "bodies", "hitboxes"):
        page.find_element(By.ID, toggle).click()
        _drawn(page)
        shown = _canvas(page)
        page.find_element(By.ID, toggle).click()
        assert (np.abs(shown.astype(int) - plain.astype(int)).sum(axis=2) > 30).mean() > 0.001, toggle
    text = page.find_element(By.ID, "report").text
    assert "bone tracks" in text  # the binding report is on the page
    assert "physics" in page.find_element(By.ID, "timings").text  # per-stage timings too


def test_a_closed_tab_does_not_stop_the_others(page, server):
    first = page.current_window_handle
    page.switch_to.new_window("tab")
    page.get(server)
    _wait(page, "window.__mmdkit && window.__mmdkit.ready()", what="the second tab's first frame")
    page.close()
    page.switch_to.window(first)
    _seek(page, 1500, True)  # frames the first tab never fetched: the server still answers
    assert page.execute_script("return __mmdkit.frame()") == 1500


def test_camera_motion_and_song(page, extras):
    _, _, camera = extras
    _seek(page, 300, True)
    page.find_element(By.ID, "follow").click()  # follow the camera VMD
    _drawn(page)
    shown = page.execute_script("return __mmdkit.camera()")
    page.find_element(By.ID, "follow").click()
    scale = page.execute_script("return __mmdkit.info.notes.scale")
    eye, _, fov = camera_pose(camera, np.array([300.0]), Space(scale=scale))
    assert shown["following"]
    assert np.linalg.norm(np.array(shown["position"]) - eye[0]) < 1e-3 and abs(shown["fov"] - fov[0]) < 1e-3
    _wait(page, "__mmdkit.audio().decoded", what="the song decoded")
    assert abs(page.execute_script("return __mmdkit.audio().duration") - 3.0) < 0.01
    page.find_element(By.ID, "play").click()  # a click: the browser lets the song start
    clock = _wait(page, "__mmdkit.audio().clock === 'audio' && __mmdkit.audio().clock", what="the song playing")
    times = page.execute_script("return __mmdkit.frameTimes()")
    page.find_element(By.ID, "play").click()
    assert clock == "audio"  # the playhead follows the song's clock
    assert len(times) > 5 and all(t > 0 for t in times)  # the page reports its frame times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_port_in_use_is_one_line_and_sigterm_leaves_nothing(assets, capsys):
    model = str(assets / "low_miku" / "miku.pmd")  # small, with rigid bodies: a physics world to free
    motion = str(assets / "wavefile" / "wavefile_v2.vmd")
    port = _free_port()
    proc, url = _start([model, motion, "--port", str(port)])
    assert url == f"http://127.0.0.1:{port}/"
    with urllib.request.urlopen(url + "frames?physics=1&start=0&count=30", timeout=120) as r:
        assert len(r.read()) > 0  # the bake is under way
    with pytest.raises(SystemExit) as taken:  # the command, in this process
        main(["view", model, "--port", str(port), "--no-browser"])
    assert taken.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--port" in err and "in use" in err
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
    assert _stop(proc) == 128 + signal.SIGTERM
    assert not children.strip()  # it started no processes of its own
    assert proc.stderr.read().strip() == "mmdkit: terminated"  # and freed what it made (no leak report)
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_view_in_python_gives_a_notebook_iframe(assets):
    model = mmdkit.load(assets / "gltf" / "CesiumMan.glb")
    viewer = mmdkit.view(model)
    try:
        html = viewer._repr_html_()
        assert "<iframe" in html and viewer.url in html
        with urllib.request.urlopen(viewer.url + "info.json", timeout=30) as r:
            info = __import__("json").load(r)
        assert info["num_frames"] == 1 and min(info["joint_bone"]) >= 0
        with urllib.request.urlopen(viewer.url + "frames?physics=1&start=0&count=1", timeout=60) as r:
            row = np.frombuffer(r.read(), "<f4")
        assert row.shape == (info["stride"],) and np.isfinite(row).all()
    finally:
        viewer.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(viewer.url, timeout=5)


@pytest.mark.parametrize("args, flag", [([], "MODEL"), (["--demo", "MODEL_FILE"], "--demo"),
                                        (["MODEL_FILE", "--audio", "SONG_TXT"], "--audio")])
def test_bad_arguments_are_one_line_before_serving(args, flag, tmp_path, capsys):
    song = tmp_path / "song.txt"
    song.write_text("not a song")
    model = mmdkit.demo.demo_paths()[0]
    argv = ["view", "--no-browser", *(str(model) if a == "MODEL_FILE" else str(song) if a == "SONG_TXT" else a
                                      for a in args)]
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr()
    assert done.value.code == 2 and "http://" not in out.out  # refused before a server started
    assert out.err.strip().count("\n") == 0 and out.err.startswith(f"mmdkit: error: {flag}")


def test_glb_cache_follows_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("MMDKIT_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "m.pmx").write_bytes(b"model")
    (folder / "tex.png").write_bytes(b"texture")
    key = glb_cache_key(folder / "m.pmx")
    assert cached_glb(key) is None
    store_glb(key, b"glTF...")
    assert cached_glb(key) == b"glTF..." and glb_cache_key(folder / "m.pmx") == key
    (folder / "tex.png").write_bytes(b"another texture")  # a texture beside the model changed
    assert glb_cache_key(folder / "m.pmx") != key
    assert glb_cache_key(None) is None and cached_glb(None) is None


def test_software_gl_draws_half_size_upscaled(page):
    # SwiftShader: the drawing buffer has half the canvas's CSS pixels (the browser upscales it)
    assert re.search("swiftshader", page.execute_script("return __mmdkit.glRenderer"), re.I)
    css_w, buf_w, css_h, buf_h = page.execute_script(
        "const c = __mmdkit.three.renderer.domElement; return [c.clientWidth, c.width, c.clientHeight, c.height]")
    assert css_w > 100 and abs(buf_w - css_w / 2) <= 1 and abs(buf_h - css_h / 2) <= 1


def test_software_gl_draws_a_lighter_character_that_looks_the_same(page, server):
    # the page reports how it draws; in software GL, once the first frame is drawn, the character
    # is simplified (meshoptimizer) to under half its triangles and skinned from uniforms ...
    quality = _wait(page, "__mmdkit.quality.lodDone && __mmdkit.quality", what="the simplified character")
    assert quality["software"] and not quality["antialias"] and quality["skinning"] == "uniform"
    assert quality["triangles"] < 0.5 * quality["trianglesBefore"]
    assert "of the model's" in page.find_element(By.ID, "timings").text
    # ... and looks as the whole model does (?lod=1), both in fresh tabs (the same orbit camera)
    light, light_triangles = _fresh_picture(page, server, "")
    whole, whole_triangles = _fresh_picture(page, server, "?lod=1")
    assert light_triangles == quality["triangles"] and whole_triangles == quality["trianglesBefore"]
    assert whole.mean() > 0.01
    assert (light & whole).sum() / (light | whole).sum() > 0.9  # the same outline (measured 0.96)


def _fresh_picture(page, server, query):
    """(H, W) bool: where a new tab of the page at ``query`` draws the character at SCRUB (orbit
    camera as framed at load, no floor), and its triangle count."""
    first = page.current_window_handle
    page.switch_to.new_window("tab")
    try:
        page.get(server + query)
        _wait(page, "window.__mmdkit && window.__mmdkit.ready() && __mmdkit.quality.lodDone", what=f"{query} drawn")
        page.find_element(By.ID, "floor").click()
        page.find_element(By.ID, "follow").click()
        _seek(page, SCRUB, True)
        drawn = np.abs(_canvas(page).astype(int) - BACKGROUND).sum(axis=2) > 30
        return drawn, page.execute_script("return __mmdkit.quality.triangles")
    finally:
        page.close()
        page.switch_to.window(first)


def test_the_page_is_served_before_numba_and_the_glb_before_the_model():
    # start() serves at once (nothing of numba loaded yet); show_glb hands out the GLB alone
    code = ("import sys, urllib.request; from mmdkit.viewer import start; v = start(); "
            "v.server.show_glb(b'glTF-bytes'); "
            "page = urllib.request.urlopen(v.url).read(); glb = urllib.request.urlopen(v.url + 'model.glb').read(); "
            "print('numba' in sys.modules, b'viewer.js' in page, glb); v.stop()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True", "b'glTF-bytes'"], out.stderr


def test_crowd_shows_n_characters_each_posed(browser):
    # last in this module: it takes the shared browser to another server
    proc, url = _start(["--demo", "--crowd", "3", "--no-physics"])
    try:
        browser.get(url)
        _wait(browser, "window.__mmdkit && window.__mmdkit.ready()", what="the crowd's first frame")
        skinned_roots = browser.execute_script(
            "return __mmdkit.three.scene.children.filter((c) => { let s = false; "
            "c.traverse((o) => { s = s || !!o.isSkinnedMesh; }); return s; }).length")
        assert skinned_roots == 3
        model, _ = demo_character()
        lo, hi = model.vertex_position.min(0), model.vertex_position.max(0)
        members = browser.execute_script("return __mmdkit.crowd()")
        expected = crowd_offsets(3, crowd_spacing(lo, hi))  # render's layout
        np.testing.assert_allclose([m["offset"] for m in members], expected, atol=1e-3)
        assert [m["frames"] for m in members] == [k * CROWD_FRAME_OFFSET for k in range(3)]
        _seek(browser, 300, False)
        crowd_now = [_crowd_positions(browser, k) for k in range(3)]
        for k in (1, 2):  # character k shows the pose the first one has CROWD_FRAME_OFFSET·k frames later
            _seek(browser, 300 + int(k * CROWD_FRAME_OFFSET), False)
            first_later = _crowd_positions(browser, 0)
            assert np.abs(crowd_now[k] - first_later).max() < 0.02
            assert np.abs(crowd_now[k] - crowd_now[0]).max() > 0.1  # ... not the first one's pose now
    finally:
        _stop(proc)


def _crowd_positions(driver, k: int) -> np.ndarray:
    """(J, 3) MMD-space joint positions of crowd character k, less its offset."""
    return np.array([r["position"] for r in driver.execute_script(f"return __mmdkit.bonePositions({k})")], np.float64)
