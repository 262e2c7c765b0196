"""`mmdkit view --demo` in headless Chromium: how soon the first posed frame is drawn, and the page's
frame times while it plays Gene with physics.

In: Debian's chromium + chromium-driver (Selenium), WebGL in software: SwiftShader (default) or
Mesa's llvmpipe (--gl llvmpipe), or the GPU (--gl gpu); the page composited in software (default:
what Chromium does on a machine without a GPU) or by the GL backend (--compositing gpu: what
--use-angle=swiftshader alone gives); --page adds a query to the page's URL (res=1: full-size
drawing buffer, lod=1: the whole model, skin=texture: three.js' bone texture, order=0: the model's
triangle order, pdb=1: preserveDrawingBuffer, aa=1, mat=lambert). Out: seconds from the command
to the URL and to the first posed frame (the page's own clock), the WebGL renderer, the page's
timing marks and drawing choices, the server's bake time and per-stage ms, then over 12 s of
playback from frame 600 (after the bake is done) the page's frame times (mean, median, p95) and
its own posing ms per frame. The browser is started before the command (a warm browser).
Run: python3 benchmarks/bench_viewer.py [--size 1280x720] [--crowd N] [--shot out.png]
     [--gl swiftshader|llvmpipe|gpu] [--compositing software|gpu] [--page lod=1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


GL_FLAGS = {
    "swiftshader": ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    "llvmpipe": ["--use-gl=angle", "--use-angle=gl-egl", "--ignore-gpu-blocklist", "--enable-unsafe-swiftshader"],
    "gpu": [],
}
"""Chromium flags per WebGL backend: SwiftShader (Chromium's own software GL), Mesa's llvmpipe through
ANGLE's OpenGL back end over EGL (``--use-angle=gl`` over GLX hangs headless here), or whatever the browser picks (a GPU)."""


COMPOSITING_FLAGS = {"software": ["--disable-gpu-compositing"], "gpu": []}
"""Chromium flags per compositing: in software (Skia on the CPU; the page's WebGL canvas read back), as
Chromium composites on a machine without a GPU, or through the GL backend (SwiftShader / llvmpipe
drawing the whole window again every frame: 8 ms (llvmpipe) to 20 ms (SwiftShader) more CPU a frame
at 1280×720)."""


def _browser(size: str, gl: str, compositing: str = "software"):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", f"--window-size={size.replace('x', ',')}", "--mute-audio",
              *GL_FLAGS[gl], *(COMPOSITING_FLAGS[compositing] if gl != "gpu" else [])]:
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def _poll(driver, script: str, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while not driver.execute_script(f"return {script}"):
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {script}")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--gl", default="swiftshader", choices=sorted(GL_FLAGS), help="Chromium's WebGL backend")
    ap.add_argument("--compositing", default="software", choices=sorted(COMPOSITING_FLAGS),
                    help="Chromium's compositing in software GL (--gl gpu: the browser's choice)")
    ap.add_argument("--page", default="", help="query string for the page, e.g. lod=1")
    ap.add_argument("--crowd", type=int, default=1, help="characters (mmdkit view --crowd)")
    ap.add_argument("--shot", default=None, help="save a screenshot of the page at the end (PNG)")
    ap.add_argument("--seconds", type=float, default=12.0, help="playback measured")
    args = ap.parse_args()
    driver = _browser(args.size, args.gl, args.compositing)
    driver.get("about:blank")
    print("load average", [round(x, 1) for x in os.getloadavg()])
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "mmdkit", "view", "--demo", "--no-browser", "-q",
                             "--crowd", str(args.crowd)],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\S+/", proc.stdout.readline()).group(0)
        t_url = time.time()
        driver.get(url + ("?" + args.page if args.page else ""))
        _poll(driver, "window.__mmdkit && window.__mmdkit.ready()")
        first = driver.execute_script("return performance.timeOrigin + __mmdkit.firstFrameMs()") / 1000
        print(f"URL printed {t_url - t0:.2f} s; first posed frame drawn {first - t0:.2f} s after the command")
        marks = driver.execute_script("return __mmdkit.marks()")
        print("WebGL renderer:", driver.execute_script("return __mmdkit.glRenderer"))
        print("page marks, ms after the page opened:", {k: round(v) for k, v in marks.items()},
              "shader programs", driver.execute_script("return __mmdkit.three.renderer.info.programs.length"))
        end = time.monotonic() + 300
        while time.monotonic() < end:
            state = json.load(urllib.request.urlopen(url + "state.json"))
            if state["baked"]["physics"] >= driver.execute_script("return __mmdkit.info.num_frames"):
                break
            time.sleep(0.5)
        print(f"bake: {state['bake_seconds']:.1f} s;", {k: round(v, 3) for k, v in state["stage_ms"].items()})
        _poll(driver, "__mmdkit.quality.lodDone")
        print("drawing:", driver.execute_script("return __mmdkit.quality"), "simplified in",
              driver.execute_script("return __mmdkit.marks().lodMs"), "ms")
        driver.execute_script("__mmdkit.seek(600); __mmdkit.play(); __mmdkit.resetTimes()")
        time.sleep(args.seconds)
        driver.execute_script("__mmdkit.pause()")
        if args.shot:
            time.sleep(0.5)
            driver.save_screenshot(args.shot)
        ft = driver.execute_script("return __mmdkit.frameTimes()")
        pt = driver.execute_script("return __mmdkit.poseTimes()")
        print(f"{args.size} {args.gl} {args.compositing} compositing frame ms: n={len(ft)} mean {statistics.mean(ft):.1f} median {statistics.median(ft):.1f} "
              f"p95 {statistics.quantiles(ft, n=20)[-1]:.1f} ({1000 / statistics.mean(ft):.1f} fps); "
              f"page posing ms mean {statistics.mean(pt):.2f} max {max(pt):.2f}")
        print("load average", [round(x, 1) for x in os.getloadavg()])
    finally:
        driver.quit()
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
