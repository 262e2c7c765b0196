"""Render a model dancing to a motion: pose (worker thread) → GPU draw → encode (worker thread).

In: Model, Motion, optional camera Motion, frames, size/fps/msaa, physics on/off, crowd size.
Out: an MP4 or a folder of PNGs (atomic), plus stats (frames, seconds, fps, warnings).
Posing frame n+1 overlaps drawing frame n, and encoding overlaps both, so the renderer never
waits on Python for long. A crowd draws N characters of one Model with instancing; each has
its own Character (and physics world) and a motion offset.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mmdkit.animation.camera import sample_camera, sample_light, sample_shadow
from mmdkit.pose import Character
from mmdkit.render.camera import auto_view, mmd_view, perspective
from mmdkit.render.gl import Renderer
from mmdkit.render.video import open_writer


def _physics(model, enabled: bool, warn):
    if not enabled or model.num_rigid_bodies == 0:
        return None
    try:
        from mmdkit.physics import MMDPhysics
    except ImportError as e:
        warn(f"physics unavailable ({e}); rendering without")
        return None
    return MMDPhysics(model)


def crowd_offsets(n: int, spacing: float) -> np.ndarray:
    """(n, 3) grid positions, front row first, centred on x."""
    cols = max(1, math.ceil(math.sqrt(n)))
    out = []
    for i in range(n):
        r, c = divmod(i, cols)
        out.append(((c - (min(cols, n - r * cols) - 1) / 2) * spacing, 0.0, r * spacing))
    return np.array(out, np.float32)


def render_motion(model, motion, output: str, *, frames=None, camera=None, size=(1280, 720),
                  fps: float = 30.0, msaa: int = 4, physics: bool = True, crowd: int = 1,
                  crowd_frame_offset: float = 7.0, audio: str | None = None, progress: bool = True,
                  palette_size: int | None = None, ground_shadow: bool = True, self_shadow: bool = False,
                  warn=print) -> dict:
    """Render ``frames`` (iterable; default 0..last key frame) into ``output`` (.mp4 or folder)."""
    if frames is None:
        frames = np.arange(0, max(motion.last_frame if motion is not None else 0, 1) + 1)
    frames = np.asarray(list(frames), np.float64)
    chars = [Character(model, motion, _physics(model, physics, warn)) for _ in range(crowd)]
    ren = Renderer(model, size, msaa, instances=crowd, palette_size=palette_size, ground_shadow=ground_shadow,
                   self_shadow=self_shadow)
    for w in ren.warnings:
        warn(w)
    lo, hi = model.vertex_position.min(0), model.vertex_position.max(0)
    spacing = float(max(hi[0] - lo[0], hi[2] - lo[2]) * 1.3 + 2.0)
    offs = crowd_offsets(crowd, spacing)
    ren.set_instance_offsets(offs)
    aspect = size[0] / size[1]
    cam = sample_camera(camera, frames) if camera is not None else None
    # light and self-shadow keys: the camera motion's, else the dance's
    light = sample_light(camera, frames) or sample_light(motion, frames)
    shadow = sample_shadow(camera, frames) or sample_shadow(motion, frames)
    box_lo = lo + offs.min(0) - np.array([2.0, 0.0, 2.0])
    box_hi = hi + offs.max(0) + np.array([2.0, 1.0, 2.0])
    auto, auto_dist = auto_view(box_lo, box_hi, 30.0, aspect)
    writer = open_writer(output, size, fps, audio)

    def pose_frame(f):
        skins = np.empty((crowd, model.num_bones, 4, 4), np.float32)
        voff = np.empty((crowd,) + chars[0].vertex_offset.shape, np.float32)
        uvoff = np.empty((crowd,) + chars[0].uv_offset.shape, np.float32)
        for k, ch in enumerate(chars):
            ch.update(f + k * crowd_frame_offset)
            skins[k] = ch.bone_skin if ch.visible else 0.0  # hidden by a property key: collapsed, draws nothing
            voff[k] = ch.vertex_offset
            uvoff[k] = ch.uv_offset
        c0 = chars[0]
        tints = {k: tuple(a.copy() for a in c0.material_tint(k)) for k in ("texture", "sphere", "toon")}
        return skins, voff, uvoff, c0.material_diffuse.copy(), tints

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(frames), desc="rendering", unit="frame")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(1) as pose_pool, ThreadPoolExecutor(1) as enc_pool:
        try:
            nxt = pose_pool.submit(pose_frame, frames[0])
            enc = None
            for i in range(len(frames)):
                skins, voff, uvoff, diffuse, tints = nxt.result()
                if i + 1 < len(frames):
                    nxt = pose_pool.submit(pose_frame, frames[i + 1])
                if cam is not None:
                    view = mmd_view(cam["position"][i], cam["rotation"][i], cam["distance"][i])
                    proj = perspective(float(cam["fov"][i]), aspect)
                    dist = abs(float(cam["distance"][i]))
                else:
                    view, proj, dist = auto, perspective(30.0, aspect), auto_dist
                lk = {} if light is None else {"light_dir": light["direction"][i], "light_color": light["color"][i]}
                on = None if shadow is None else bool(shadow["mode"][i] != 0)  # VMD self-shadow keys
                img = ren.render(skins, view, proj, vertex_offset=voff, uv_offset=uvoff, diffuse=diffuse,
                                 eye_distance=dist, tints=tints, self_shadow=on, **lk)
                if enc is not None:
                    enc.result()
                enc = enc_pool.submit(writer.write, img)
                if bar is not None:
                    bar.update(1)
            if enc is not None:
                enc.result()
            writer.close()
        except BaseException:
            writer.abort()
            raise
        finally:
            if bar is not None:
                bar.close()
            ren.release()
    secs = time.perf_counter() - t0
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
    img = ren.render(bone_skin, view, perspective(30.0, size[0] / size[1]), vertex_offset=vertex_offset,
                     eye_distance=dist)
    if ctx is None:
        ren.release()
    return img
