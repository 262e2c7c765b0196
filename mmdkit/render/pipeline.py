"""Render a model dancing to a motion: the frame loop's ``RenderSink`` (GPU draw on its own thread
→ encode on another), and ``render_motion`` for one output from Python.

In: a LoadedTake's characters as the driver (``mmdkit.runtime.driver``) poses them: Model, Motion,
optional camera Motion, frames, fps, crowd; the sink's size/msaa/shadows/floor/audio. Out: a
video, a picture or PNG frames (atomic, see ``video``), plus stats (frames, seconds, fps,
warnings). Output fps is real time: by default the motion (30 frames a second) is sampled at
``animation.frames.output_frames(0, last, fps)``, fractional frames included.
Posing frame n+1 (the driver) overlaps drawing frame n, and encoding overlaps both, so the
renderer never waits on Python for long. A crowd draws N characters of one Model with instancing; each has
its own Character (and physics world) and a motion offset; material morphs are those of the
first character (the renderer takes one set of material values per frame).
"""

from __future__ import annotations

import time

import numpy as np

from mmdkit.animation.camera import sample_camera, sample_light, sample_shadow
from mmdkit.animation.frames import check_frames, output_frames
from mmdkit.runtime.driver import run
from mmdkit.runtime.playback import seconds_at
from mmdkit.runtime.take import LoadedTake
from mmdkit.runtime.crowd import CROWD_FRAME_OFFSET, crowd_offsets, crowd_spacing, rest_box
from mmdkit.render.camera import auto_view, fit_view, mmd_view, perspective
from mmdkit.render.framing import facing_yaw, motion_box
from mmdkit.render.gl import Renderer
from mmdkit.render.glsink import GLSink
from mmdkit.render.video import open_writer


class _Shots:
    """Per rendered frame i: the camera (the camera motion's, else an automatic one framing what
    the crowd's motion sweeps over ``frames``: ``framing.motion_box``), the light and the
    self-shadow switch (the camera motion's keys, else the dance's). ``box`` (lo, hi) is what the
    automatic camera frames (None with a camera motion)."""

    def __init__(self, model, motion, camera, frames, aspect: float, offsets):
        self.aspect = aspect
        self.cam = sample_camera(camera, frames) if camera is not None else None
        self.light = sample_light(camera, frames) or sample_light(motion, frames)
        self.shadow = sample_shadow(camera, frames) or sample_shadow(motion, frames)
        self.box = self.auto = None
        self.auto_dist = 0.0
        if self.cam is None:
            self.box = motion_box(model, motion, frames, offsets)
            self.auto, self.auto_dist = fit_view(*self.box, 30.0, aspect, yaw_deg=facing_yaw(model))

    def __call__(self, i: int) -> dict:
        """Renderer.render keyword arguments for frame i (view, proj and the rest)."""
        cam = self.cam
        if cam is not None:
            kw = dict(view=mmd_view(cam["position"][i], cam["rotation"][i], cam["distance"][i]),
                      proj=perspective(float(cam["fov"][i]), self.aspect), eye_distance=abs(float(cam["distance"][i])))
        else:
            kw = dict(view=self.auto, proj=perspective(30.0, self.aspect, far=max(2000.0, 3 * self.auto_dist)),
                      eye_distance=self.auto_dist)  # far enough for large imported models (Fox.glb: 1900 units)
        if self.light is not None:
            kw.update(light_dir=self.light["direction"][i], light_color=self.light["color"][i])
        kw["self_shadow"] = None if self.shadow is None else bool(self.shadow["mode"][i] != 0)  # VMD keys
        return kw


class RenderSink(GLSink):
    """A video, a picture or a folder of PNG frames of the take's characters (see ``video``): drawn
    on the GL thread while the driver poses the next frame, encoded on the writer thread while the
    next is drawn (``glsink.GLSink``); two pictures filled in turn."""

    def __init__(self, output: str, *, size=(1280, 720), msaa: int = 4, palette_size: int | None = None,
                 ground_shadow: bool = True, self_shadow: bool = False, floor: bool = False,
                 audio: str | None = None, warn=print):
        self.output, self.size, self.msaa, self.audio, self.warn = output, tuple(size), msaa, audio, warn
        self.options = dict(palette_size=palette_size, ground_shadow=ground_shadow, self_shadow=self_shadow,
                            floor=floor)
        self.seconds = 0.0

    def open(self, loaded) -> None:
        model, frames, crowd = loaded.model, loaded.frames, loaded.crowd
        self.num_frames = len(frames)
        self.writer = open_writer(self.output, self.size, loaded.fps, self.audio, frames=frames,
                                  audio_start=seconds_at(frames[0]))
        self.start(model, crowd, "mmdkit-encode")
        offsets = crowd_offsets(crowd, crowd_spacing(*rest_box(model)))
        self.shots = _Shots(model, loaded.motion, loaded.camera, frames, self.size[0] / self.size[1], offsets)
        self.ren = self._gl.submit(self._build, model, crowd, offsets).result()
        for w in self.ren.warnings:
            self.warn(w)
        self._images = [np.empty((self.size[1], self.size[0], 3), np.uint8) for _ in range(2)]
        self._t0 = time.perf_counter()

    def _build(self, model, crowd: int, offsets) -> Renderer:
        """On the GL thread: the renderer, its instance offsets and the floor (around what the
        automatic camera frames, else the origin)."""
        ren = Renderer(model, self.size, self.msaa, instances=crowd, **self.options)
        ren.set_instance_offsets(offsets)
        if self.shots.box is not None:
            lo, hi = self.shots.box
            ren.place_floor((lo + hi) / 2, 4.0 * self.shots.auto_dist)  # reaches past the horizon
        else:
            ren.place_floor((0.0, 0.0, 0.0), 500.0)
        return ren

    def frame(self, i: int, characters) -> None:
        self.submit_draw(i, self._draw, i, *self.fill(i, characters))

    def _draw(self, i: int, skins, voff, uvoff, materials) -> None:
        """On the GL thread: draw frame i, then hand the picture to the encoder once it is free."""
        kw = self.shots(i)
        img = self.ren.render(skins, kw.pop("view"), kw.pop("proj"), vertex_offset=voff, uv_offset=uvoff,
                              materials=materials, out=self._images[i & 1], **kw)  # frame i-2's is encoded
        self.hand_over(self.writer.write, img)

    def close(self) -> dict:
        try:
            self.drain()
            self.writer.close()
            self.seconds = time.perf_counter() - self._t0
            warnings = list(self.ren.warnings)
        finally:
            self.release()
        n = self.num_frames
        return {"frames": n, "seconds": self.seconds, "fps": n / self.seconds if self.seconds else 0.0,
                "warnings": warnings, "output": self.output}


def render_motion(model, motion, output: str, *, frames=None, camera=None, size=(1280, 720),
                  fps: float = 30.0, msaa: int = 4, physics: bool = True, crowd: int = 1,
                  crowd_frame_offset: float = CROWD_FRAME_OFFSET, audio: str | None = None, progress: bool = True,
                  palette_size: int | None = None, ground_shadow: bool = True, self_shadow: bool = False,
                  floor: bool = False, warn=print) -> dict:
    """Render ``frames`` (motion frames, fractional allowed; default ``output_frames(0, last,
    fps)``) into ``output`` (a video, a .png for one frame, or a folder: see ``video``), with
    ``audio`` from the first frame's time (frame / 30 s) on; ``floor`` draws a ground under the
    character (around what the automatic camera frames, else the origin). Returns stats (frames, seconds,
    fps, warnings, output)."""
    if frames is None:
        frames = output_frames(0.0, max(motion.last_frame if motion is not None else 0, 1), fps)
    loaded = LoadedTake.of(model, motion, check_frames(list(frames)), fps=fps, physics=bool(physics), camera=camera,
                           crowd=crowd, crowd_frame_offset=crowd_frame_offset)
    sink = RenderSink(output, size=size, msaa=msaa, palette_size=palette_size, ground_shadow=ground_shadow,
                      self_shadow=self_shadow, floor=floor, audio=audio, warn=warn)
    return run(loaded, [sink], progress=progress, desc="rendering")[0]


def render_still(model, bone_skin=None, size=(640, 480), msaa=4, *, vertex_offset=None, yaw_deg=0.0,
                 ctx=None) -> np.ndarray:
    """One picture of a model (bind pose unless bone_skin is given), auto-framed."""
    ren = Renderer(model, size, msaa, ctx=ctx)
    if bone_skin is None:
        bone_skin = np.broadcast_to(np.eye(4, dtype=np.float32), (model.num_bones, 4, 4))
    lo, hi = model.vertex_position.min(0), model.vertex_position.max(0)
    view, dist = auto_view(lo, hi, 30.0, size[0] / size[1], yaw_deg)
    img = ren.render(bone_skin, view, perspective(30.0, size[0] / size[1], far=max(2000.0, 3 * dist)),
                     vertex_offset=vertex_offset,
                     eye_distance=dist)
    if ctx is None:
        ren.release()
    return img
