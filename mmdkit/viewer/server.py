"""The viewer's local web server: the page, the model's GLB, and frames streamed as they are baked.

In: host and port (0: a free one), then (``show``) a ``ViewerContent``: GLB bytes, the
``FrameStore``, scene info, optional camera track and audio bytes, notes for the page. The page
and its scripts are served at once; what needs the content waits for it (the browser starts while
the model loads). Out: ``ViewerServer`` serving
  /                 the page (static/index.html), /static/…: its scripts and vendored three.js
  /model.glb        the character, rest pose (skinned mesh + skeleton, morph targets)
  /info.json        scene info, frame count, stride, notes (binding report, load timings)
  /state.json       bake progress and per-stage ms (polled by the page)
  /frames?physics=1&start=S&count=N   (n, stride) little-endian float32 rows (``FrameStore``)
  /camera.bin       (F, 8) float32: eye x y z, quaternion x y z w, fov degrees (glTF space)
  /audio            the song's bytes as given
Each request runs on its own thread: a closed tab stops only its own requests.
"""

from __future__ import annotations

import errno
import json
import mimetypes
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import numpy as np

from mmdkit.errors import OptionError

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
MAX_ROWS = 600
"""Most frames one /frames request returns."""
CONTENT_WAIT_SECONDS = 600.0
"""Longest a request waits for the model to be loaded and exported."""


@dataclass
class ViewerContent:
    """Everything the server hands out. camera: (F, 8) float32 or None; audio: (bytes, mime) or None."""

    glb: bytes
    frames: object
    info: dict
    camera: np.ndarray | None = None
    audio: tuple | None = None
    notes: dict = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    server_version = "mmdkit-viewer"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet: the terminal shows the URL, not every request
        pass

    def _send(self, body: bytes, mime: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj) -> None:
        self._send(json.dumps(obj, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):  # the tab went away: only this request ends
            pass

    def _route(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path in ("/", "/index.html"):
            return self._static("index.html")
        if path.startswith("/static/"):
            return self._static(path[len("/static/"):])
        if path == "/model.glb":  # may come before the rest (``ViewerServer.show_glb``)
            if not self.server.glb_ready.wait(CONTENT_WAIT_SECONDS):
                return self._send(b"the model is still loading", "text/plain", 503)
            return self._send(self.server.glb, "model/gltf-binary")
        if not self.server.ready.wait(CONTENT_WAIT_SECONDS):
            return self._send(b"the model is still loading", "text/plain", 503)
        content: ViewerContent = self.server.content
        if path == "/info.json":
            return self._json(self.server.info_json())
        if path == "/state.json":
            return self._json(self.server.state_json())
        if path == "/frames":
            q = parse_qs(url.query)
            try:
                physics = q.get("physics", ["1"])[0] == "1"
                start, count = int(q.get("start", ["0"])[0]), min(MAX_ROWS, int(q.get("count", ["60"])[0]))
            except ValueError:
                return self._send(b"bad frame range", "text/plain", 400)
            rows = content.frames.rows(physics, start, count)
            return self._send(np.ascontiguousarray(rows, "<f4").tobytes(), "application/octet-stream")
        if path == "/camera.bin" and content.camera is not None:
            return self._send(np.ascontiguousarray(content.camera, "<f4").tobytes(), "application/octet-stream")
        if path == "/audio" and content.audio is not None:
            return self._send(*content.audio)
        self._send(b"not found", "text/plain", 404)

    def _static(self, rel: str) -> None:
        full = os.path.realpath(os.path.join(STATIC, rel))
        if not full.startswith(os.path.realpath(STATIC) + os.sep) or not os.path.isfile(full):
            return self._send(b"not found", "text/plain", 404)
        mime = "text/javascript" if full.endswith(".js") else mimetypes.guess_type(full)[0] or "application/octet-stream"
        with open(full, "rb") as f:
            self._send(f.read(), mime)


class ViewerServer(ThreadingHTTPServer):
    """``ViewerServer(host, port)``: bound at once (OptionError('port') when taken); ``start()``
    serves on a daemon thread; ``show(content)`` hands over the model and starts its bake; ``url``;
    ``show_glb(glb)``: the model's GLB alone, ahead of ``show`` (from the cache, before the model
    is read: the page parses it meanwhile); ``stop()`` ends serving and the bake."""

    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.content: ViewerContent | None = None
        self.ready = threading.Event()
        self.glb: bytes | None = None
        self.glb_ready = threading.Event()
        try:
            super().__init__((host, int(port)), _Handler)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise OptionError("port", f"{port} is in use on {host}; choose another (0 picks a free one)") from None
            raise OptionError("port", f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        self._thread = threading.Thread(target=self.serve_forever, name="mmdkit-viewer-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def info_json(self) -> dict:
        c = self.content
        return {**c.info, "num_frames": c.frames.num_frames, "stride": c.frames.stride, "fps": 30,
                "has_physics": c.frames.has_physics, "has_camera": c.camera is not None,
                "has_audio": c.audio is not None, "notes": c.notes}

    def state_json(self) -> dict:
        f = self.content.frames
        return {"baked": {"physics": f.baked[True], "kinematic": f.baked[False]}, "stage_ms": f.stage_ms,
                "bake_seconds": f.bake_seconds, "error": f.error}

    def start(self) -> "ViewerServer":
        self._thread.start()
        return self

    def show(self, content: ViewerContent) -> None:
        if self.content is not None:
            self.content.frames.stop()
        self.content = content
        content.frames.start()
        self.show_glb(content.glb)
        self.ready.set()

    def show_glb(self, glb: bytes) -> None:
        self.glb = glb
        self.glb_ready.set()

    def stop(self) -> None:
        if self._thread.is_alive():
            self.shutdown()
        self.server_close()
        if self.content is not None:
            self.content.frames.stop()
