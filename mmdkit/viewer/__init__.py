"""Interactive viewer: a local web page that plays a character with its physics, in any browser.

In: a ``Model``, a ``Motion`` / ``Pose`` (or None), the model's GLB bytes (skinned mesh + skeleton
in its rest pose, as mmdkit's glTF exporter writes them), options. Out: a running ``Viewer``
(``start()``: its ``url`` at once; ``show(...)``: the model; ``stop()``; inline in Jupyter through
``_repr_html_``). The page (static/, three.js vendored under static/three/, MIT) loads the GLB
once, then fetches each frame's bone transforms and morph weights, which a background thread bakes
with ``mmdkit.runtime.Character`` (Bullet physics on and off) ahead of the playhead; the browser
interpolates between frames at its own rate.
A sink beside render and export: it imports runtime, physics and below, never render or export.
"""

from __future__ import annotations

import html
import os
import threading
import time

from mmdkit.animation.motion import Motion
from mmdkit.errors import OptionError
from mmdkit.viewer.server import ViewerContent, ViewerServer

# What poses and describes the model (numba kernels, Bullet) is imported when a model is shown, so
# that ``start()`` serves the page before numba is loaded (~1 s): the browser starts meanwhile.

__all__ = ["Viewer", "start", "num_frames", "binding_report", "read_audio"]

AUDIO_TYPES = {".wav": "audio/wav", ".mp3": "audio/mpeg", ".ogg": "audio/ogg", ".m4a": "audio/mp4",
               ".aac": "audio/aac", ".flac": "audio/flac"}
"""Song extensions the page can play (Web Audio decodes them) → MIME type."""


def num_frames(motion, camera=None) -> int:
    """Frames the viewer plays: 0 … the last key of the motion or camera motion (1 for a pose)."""
    last = [m.last_frame for m in (motion, camera) if isinstance(m, Motion)]
    return int(max(last, default=0)) + 1


def binding_report(model, motion) -> str:
    """How the motion's tracks bound to the model (``BindingReport`` as text), or a note."""
    from mmdkit.animation.vpd import binding_report as report

    return "no motion: the rest pose" if motion is None else str(report(model, motion))


class Viewer:
    """A running viewer: ``url``; ``show(...)`` hands it a model (the page waits until then);
    ``stop()``; ``wait()`` (until stopped). Jupyter shows the page inline."""

    def __init__(self, server: ViewerServer):
        self.server = server
        self.url = server.url
        self._stopped = threading.Event()

    def show(self, model, motion, glb: bytes, *, scale: float, physics: bool = True, camera_track=None,
             audio_path=None, frames: int | None = None, notes: dict | None = None, crowd: int = 1) -> "Viewer":
        """Serve ``model`` posed by ``motion`` (the GLB written with ``scale`` glTF units per MMD
        unit); ``camera_track`` (F, 8) float32 eye, quaternion, fov in glTF space; ``audio_path``
        a song; ``frames`` how many to play (default: the motion's); ``crowd`` characters, laid
        out as ``mmdkit render --crowd`` lays them out (``mmdkit.runtime.crowd``)."""
        from mmdkit.physics import physics_for
        from mmdkit.viewer.frames import FrameStore
        from mmdkit.viewer.scene import glb_json, scene_info, skin_map

        t0 = time.perf_counter()
        audio = read_audio(audio_path) if audio_path is not None else None
        joint_bone, target_morph = skin_map(model, glb_json(glb))
        store = FrameStore(model, motion, physics_for(model, physics), scale=scale,
                           num_frames=frames or num_frames(motion))
        info = scene_info(model, scale=scale, joint_bone=joint_bone, target_morph=target_morph)
        info.update(crowd_info(model, crowd, scale))
        notes = dict(notes or {}, scale=scale, report=(notes or {}).get("report") or binding_report(model, motion))
        notes.setdefault("timings", {})["viewer setup"] = 1e3 * (time.perf_counter() - t0)
        self.server.show(ViewerContent(glb=glb, frames=store, info=info, camera=camera_track, audio=audio,
                                       notes=notes))
        return self

    def stop(self) -> None:
        if not self._stopped.is_set():
            self.server.stop()
            self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``stop()`` (or ``timeout`` seconds); True when stopped."""
        return self._stopped.wait(timeout)

    def _repr_html_(self) -> str:
        url = html.escape(self.url, quote=True)
        return (f'<iframe src="{url}" width="100%" height="560" style="border:0" allow="autoplay"></iframe>'
                f'<div><a href="{url}" target="_blank">{url}</a></div>')

    def __repr__(self) -> str:
        return f"Viewer({self.url})"


def crowd_info(model, n: int, scale: float) -> dict:
    """The page's crowd: ``crowd_offset`` (n, 3) glTF-space offsets of each character (the grid
    of ``mmdkit.runtime.crowd``, spaced by the rest pose's box: the page has no motion box) and
    ``crowd_frame_offset`` (character k shows motion frame f + k × it)."""
    import numpy as np

    from mmdkit.model.space import Space
    from mmdkit.runtime.crowd import CROWD_FRAME_OFFSET, crowd_offsets, crowd_spacing, rest_box

    if int(n) < 1:
        raise OptionError("crowd", f"must be at least 1 character, got {n}")
    offsets = crowd_offsets(int(n), crowd_spacing(*rest_box(model)))
    return {"crowd_offset": np.round(Space(scale=scale, flip_z=True).points(offsets), 6).tolist(),
            "crowd_frame_offset": CROWD_FRAME_OFFSET}


def read_audio(path) -> tuple[bytes, str]:
    """(bytes, MIME type) of a song; OptionError('audio') for a kind the page cannot play."""
    mime = AUDIO_TYPES.get(os.path.splitext(os.fspath(path))[1].lower())
    if mime is None:
        raise OptionError("audio", f"{os.fspath(path)}: not a song the page can play; use {', '.join(AUDIO_TYPES)}")
    with open(path, "rb") as f:
        return f.read(), mime


def start(host: str = "127.0.0.1", port: int = 0) -> Viewer:
    """A viewer serving its page at once on ``host``:``port`` (0: a free one; OptionError('port')
    when taken); ``Viewer.show`` gives it the model."""
    return Viewer(ViewerServer(host, port).start())
