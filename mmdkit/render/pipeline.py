"""Render a model dancing to a motion: pose (worker thread) → GPU draw → encode (worker thread).

In: Model, Motion, optional camera Motion, frames, size/fps/msaa, physics on/off, crowd size.
Out: a video, a picture or PNG frames (atomic, see ``video``), plus stats (frames, seconds, fps,
warnings). Output fps is real time: by default the motion (30 frames a second) is sampled at
``animation.frames.output_frames(0, last, fps)``, fractional frames included.
Posing frame n+1 overlaps drawing frame n, and encoding overlaps both, so the renderer never
waits on Python for long. A crowd draws N characters of one Model with instancing; each has
its own Character (and physics world) and a motion offset; material morphs are those of the
first character (the renderer takes one set of material values per frame).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mmdkit.animation.camera import sample_camera, sample_light, sample_shadow
from mmdkit.animation.frames import check_frames, output_frames
from mmdkit.errors import OptionError
from mmdkit.physics import physics_for
from mmdkit.runtime import Character, play, seconds_at
from mmdkit.runtime.crowd import CROWD_FRAME_OFFSET, crowd_offsets, crowd_spacing, rest_box
from mmdkit.render.camera import auto_view, fit_view, mmd_view, perspective
from mmdkit.render.framing import motion_box
from mmdkit.render.geometry import morph_rows
from mmdkit.render.gl import Renderer
from mmdkit.render.materials import MaterialValues
from mmdkit.render.video import open_writer


class _Crowd:
    """N Characters of one model playing the same motion through ``frames``, each
    ``frame_offset`` frames later than the one before."""

    def __init__(self, model, motion, n: int, physics: bool, frames, frame_offset: float):
        self.model = model
        self.chars = [Character(model, motion, physics_for(model, physics)) for _ in range(n)]
        self._playing = play(self.chars, frames, offsets=[k * frame_offset for k in range(n)])
        self.rows = morph_rows(model)
        # two sets of outputs, filled in turn: the renderer draws from one while the next frame
        # is posed into the other (``_draw_frames``)
        self._outputs = [(np.empty((n, model.num_bones, 4, 4), np.float32),
                          np.empty((n, len(self.rows[0]), 3), np.float32),
                          np.empty((n, len(self.rows[1]), 4), np.float32)) for _ in range(2)]
        self._turn = 0

    def pose_next(self):
        """The renderer's inputs for the next frame: bone_skin (N,B,4,4), vertex offsets (N,M,3)
        and UV offsets (N,U,4) float32 of the vertices morphs reach (``morph_rows``), and the
        first character's MaterialValues. The arrays stay valid until the call after next (the
        renderer runs on another thread)."""
        next(self._playing)
        skins, voff, uvoff = self._outputs[self._turn]
        self._turn ^= 1
        for k, ch in enumerate(self.chars):
            skins[k] = ch.bone_skin if ch.visible else 0.0  # hidden by a property key: collapsed, draws nothing
            np.take(ch.vertex_offset, self.rows[0], axis=0, out=voff[k])
            np.take(ch.uv_offset, self.rows[1], axis=0, out=uvoff[k])
        return skins, voff, uvoff, MaterialValues.of_character(self.chars[0])


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
            self.auto, self.auto_dist = fit_view(*self.box, 30.0, aspect)

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


def _draw_frames(frames, crowd: _Crowd, shots: _Shots, ren: Renderer, writer, bar) -> None:
    """Pose frame i+1 on one thread and encode frame i−1 on another while frame i is drawn."""
    with ThreadPoolExecutor(1) as pose_pool, ThreadPoolExecutor(1) as enc_pool:
        nxt = pose_pool.submit(crowd.pose_next)
        enc = None
        for i in range(len(frames)):
            skins, voff, uvoff, materials = nxt.result()
            if i + 1 < len(frames):
                nxt = pose_pool.submit(crowd.pose_next)
            kw = shots(i)
            img = ren.render(skins, kw.pop("view"), kw.pop("proj"), vertex_offset=voff, uv_offset=uvoff,
                             materials=materials, **kw)
            if enc is not None:
                enc.result()
            enc = enc_pool.submit(writer.write, img)
            if bar is not None:
                bar.update(1)
        if enc is not None:
            enc.result()


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
    frames = check_frames(list(frames))
    if crowd < 1:
        raise OptionError("crowd", f"must be at least 1, got {crowd}")
    writer = open_writer(output, size, fps, audio, frames=frames, audio_start=seconds_at(frames[0]))
    ren = bar = None
    try:
        ren = Renderer(model, size, msaa, instances=crowd, palette_size=palette_size, ground_shadow=ground_shadow,
                       self_shadow=self_shadow, floor=floor)
        for w in ren.warnings:
            warn(w)
        dancers = _Crowd(model, motion, crowd, physics, frames, crowd_frame_offset)
        offsets = crowd_offsets(crowd, crowd_spacing(*rest_box(model)))
        ren.set_instance_offsets(offsets)
        shots = _Shots(model, motion, camera, frames, size[0] / size[1], offsets)
        if shots.box is not None:
            lo, hi = shots.box
            ren.place_floor((lo + hi) / 2, 4.0 * shots.auto_dist)  # reaches past the horizon
        else:
            ren.place_floor((0.0, 0.0, 0.0), 500.0)
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(frames), desc="rendering", unit="frame")
        t0 = time.perf_counter()
        _draw_frames(frames, dancers, shots, ren, writer, bar)
        writer.close()
        secs = time.perf_counter() - t0
    except BaseException:
        writer.abort()
        raise
    finally:
        if bar is not None:
            bar.close()
        if ren is not None:
            ren.release()
    return {"frames": len(frames), "seconds": secs, "fps": len(frames) / secs if secs else 0.0,
            "warnings": list(ren.warnings), "output": output}


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
