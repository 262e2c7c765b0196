"""Calibrated views for annotated renders: OpenCV K, R, t ⇄ the renderer's GL view/projection.

In: a ring spec (``--views N`` with height/radius/fov, around what the motion sweeps:
``framing.motion_box``), a cameras.json (the layout ``cameras_json`` writes), or an MMD camera
motion sampled at the rendered frames. Out: ``Views`` — for C views and F frames, ``view`` (C,F,4,4)
float64 GL view matrices (MMD points, MMD units → GL eye space) and ``proj`` (C,F,4,4) GL
projections, as ``Renderer.render`` takes them, plus K (C,F,3,3), R (C,F,3,3), t (C,F,3) in the
dataset's convention.
Convention: world = glTF's (right-handed, +y up, metres; a MMD point p is 0.08·(x, y, −z)),
camera = OpenCV's (x right, y down, z forward, metres), pixel centres at integer coordinates
((0, 0) the centre of the top-left pixel). With S = diag(1, 1, −1) and D = diag(1, −1, −1):
R = D·V₃·S, t = 0.08·D·V_t where V is the GL view matrix (V₃ its rotation, V_t its translation).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from mmdkit.animation.camera import sample_camera
from mmdkit.animation.view import FLIP_Z, look_at_gl, mmd_view, perspective
from mmdkit.errors import OptionError
from mmdkit.model.space import MMD_UNITS_PER_METRE
from mmdkit.render.camera import fit_view

METRES_PER_UNIT = 1.0 / MMD_UNITS_PER_METRE
S_AXIS = np.diag([1.0, 1.0, -1.0])
"""MMD ⇄ glTF world axes (the z flip)."""
D_AXIS = np.diag([1.0, -1.0, -1.0])
"""GL eye ⇄ OpenCV camera axes (y and z flipped)."""
NEAR, FAR = 0.5, 2000.0
"""Clip planes of the views, MMD units (4 cm to 160 m)."""
DEFAULT_FOV = 30.0
MAX_VIEWS = 64


@dataclass
class Views:
    """C calibrated views over F frames (see the module docstring); ``names`` (C,) str, ``cut``
    (C,F) bool: the camera jumps between the previous frame and this one (an MMD camera's cut)."""

    names: list
    width: int
    height: int
    view: np.ndarray
    proj: np.ndarray
    cut: np.ndarray

    @property
    def K(self) -> np.ndarray:
        return intrinsics(self.proj, self.width, self.height)

    @property
    def R(self) -> np.ndarray:
        return np.einsum("ij,...jk,kl->...il", D_AXIS, self.view[..., :3, :3], S_AXIS)

    @property
    def t(self) -> np.ndarray:
        return METRES_PER_UNIT * np.einsum("ij,...j->...i", D_AXIS, self.view[..., :3, 3])

    def __len__(self) -> int:
        return len(self.names)


def intrinsics(proj, width: int, height: int) -> np.ndarray:
    """(…,3,3) OpenCV K of GL projections (…,4,4) for a width × height picture."""
    P = np.asarray(proj, np.float64)
    K = np.zeros(P.shape[:-2] + (3, 3))
    K[..., 0, 0] = P[..., 0, 0] * width / 2
    K[..., 0, 1] = -P[..., 0, 1] * width / 2
    K[..., 1, 1] = P[..., 1, 1] * height / 2
    K[..., 0, 2] = (1.0 - P[..., 0, 2]) * width / 2 - 0.5
    K[..., 1, 2] = (1.0 + P[..., 1, 2]) * height / 2 - 0.5
    K[..., 2, 2] = 1.0
    return K


def projection(K, width: int, height: int, near: float = NEAR, far: float = FAR) -> np.ndarray:
    """(4,4) GL projection drawing what OpenCV's K (3,3) sees on a width × height picture."""
    K = np.asarray(K, np.float64)
    P = np.zeros((4, 4))
    P[0, 0] = 2 * K[0, 0] / width
    P[0, 1] = -2 * K[0, 1] / width
    P[0, 2] = 1.0 - (2 * K[0, 2] + 1) / width
    P[1, 1] = 2 * K[1, 1] / height
    P[1, 2] = (2 * K[1, 2] + 1) / height - 1.0
    P[2, 2] = (far + near) / (near - far)
    P[2, 3] = 2 * far * near / (near - far)
    P[3, 2] = -1.0
    return P


def gl_view(R, t) -> np.ndarray:
    """(…,4,4) GL view matrices (MMD points → GL eye, MMD units) of OpenCV R (…,3,3), t (…,3) metres."""
    R, t = np.asarray(R, np.float64), np.asarray(t, np.float64)
    V = np.zeros(R.shape[:-2] + (4, 4))
    V[..., :3, :3] = np.einsum("ij,...jk,kl->...il", D_AXIS, R, S_AXIS)
    V[..., :3, 3] = MMD_UNITS_PER_METRE * np.einsum("ij,...j->...i", D_AXIS, t)
    V[..., 3, 3] = 1.0
    return V


def ring_views(box, count: int, size, frames: int, *, height=None, radius=None, fov=DEFAULT_FOV) -> Views:
    """``count`` cameras on a circle around the box (lo, hi) (3,) MMD units: the first in front of
    the character (MMD characters face −z), then every 360°/count, all looking at the box's centre.
    ``radius`` (metres, default: the distance at which the box, seen from any side, fills 95 % of
    the picture: ``fit_view``), ``height`` (metres above the floor, default the centre's plus
    radius·tan 5°), ``fov`` vertical degrees."""
    w, h = size
    lo, hi = (np.asarray(v, np.float64) for v in box)
    centre = (lo + hi) / 2
    half_xz = max(hi[0] - lo[0], hi[2] - lo[2]) / 2
    square = (np.array([centre[0] - half_xz, lo[1], centre[2] - half_xz]),
              np.array([centre[0] + half_xz, hi[1], centre[2] + half_xz]))
    r = float(radius) * MMD_UNITS_PER_METRE if radius is not None else fit_view(*square, fov, w / h)[1]
    y = float(height) * MMD_UNITS_PER_METRE if height is not None else centre[1] + r * math.tan(math.radians(5))
    flip = np.array([1.0, 1.0, -1.0])
    views = []
    for k in range(count):
        a = 2 * math.pi * k / count
        eye = np.array([centre[0] + r * math.sin(a), y, centre[2] - r * math.cos(a)])
        views.append(look_at_gl(eye * flip, centre * flip, (0.0, 1.0, 0.0)) @ FLIP_Z)
    view = np.repeat(np.stack(views)[:, None], frames, axis=1)
    proj = np.broadcast_to(perspective(fov, w / h, NEAR, max(FAR, 3 * r)), view.shape).copy()
    return Views([f"ring_{k:02d}" for k in range(count)], w, h, view, proj, np.zeros((count, frames), bool))


def auto_view(box, size, frames: int) -> Views:
    """The render's automatic camera (``fit_view`` of the box from the front, 30°) as one view."""
    w, h = size
    view, dist = fit_view(*box, DEFAULT_FOV, w / h)
    proj = perspective(DEFAULT_FOV, w / h, NEAR, max(FAR, 3 * dist))
    return Views(["auto"], w, h, np.broadcast_to(view, (1, frames, 4, 4)).copy(),
                 np.broadcast_to(proj, (1, frames, 4, 4)).copy(), np.zeros((1, frames), bool))


def mmd_camera_view(camera, frames, size) -> Views:
    """An MMD camera motion sampled at ``frames`` as one view (its fov may change per frame);
    ``cut`` where the camera's keys are one frame apart (MMD's cuts) between two rendered frames."""
    w, h = size
    cam = sample_camera(camera, np.asarray(frames, np.float64))
    F = len(frames)
    view = np.stack([mmd_view(cam["position"][i], cam["rotation"][i], cam["distance"][i]) for i in range(F)])
    proj = np.stack([perspective(float(cam["fov"][i]), w / h, NEAR, FAR) for i in range(F)])
    keys = np.sort(np.asarray(camera.camera_key_frame, np.float64))
    cut_keys = keys[1:][np.diff(keys) <= 1.0]  # a key one frame after another: a jump
    f = np.asarray(frames, np.float64)
    cut = np.zeros(F, bool)
    for i in range(1, F):
        cut[i] = bool(((cut_keys > f[i - 1]) & (cut_keys <= f[i])).any())
    return Views(["mmd_camera"], w, h, view[None], proj[None], cut[None])


def joined(parts: list) -> Views:
    """One Views of several (same picture size)."""
    first = parts[0]
    return Views(sum((p.names for p in parts), []), first.width, first.height,
                 np.concatenate([p.view for p in parts]), np.concatenate([p.proj for p in parts]),
                 np.concatenate([p.cut for p in parts]))


def _matrix(value, shape, where: str, option: str) -> np.ndarray:
    try:
        a = np.asarray(value, np.float64)
    except (TypeError, ValueError):
        a = None
    if a is None or a.shape != shape or not np.isfinite(a).all():
        raise OptionError(option, f"{where}: must be {'x'.join(map(str, shape))} finite numbers")
    return a


def read_cameras(path: str, frames: int, option: str = "--views") -> tuple[Views, tuple[int, int]]:
    """The views of a cameras.json (``cameras_json``'s layout: views [{name, width, height, K, frames:
    [{R, t}, ...]}]; one frame entry = a still camera, else one per rendered frame) and the
    picture size they share; a missing or malformed field is an OptionError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise OptionError(option, f"{path}: not a cameras JSON file ({e})") from None
    views = doc.get("views") if isinstance(doc, dict) else None
    if not isinstance(views, list) or not views or len(views) > MAX_VIEWS:
        raise OptionError(option, f"{path}: needs 'views', a list of 1 to {MAX_VIEWS} cameras")
    names, Vs, Ps, size = [], [], [], None
    for c, v in enumerate(views):
        where = f"{path}: views[{c}]"
        if not isinstance(v, dict):
            raise OptionError(option, f"{where} is not an object")
        for key in ("width", "height", "K", "frames"):
            if key not in v:
                raise OptionError(option, f"{where} has no '{key}'")
        wh = v["width"], v["height"]
        if not all(isinstance(x, int) and not isinstance(x, bool) and 16 <= x <= 8192 for x in wh):
            raise OptionError(option, f"{where}: width and height must be whole numbers of pixels (16..8192)")
        if size is not None and wh != size:
            raise OptionError(option, f"{where}: {wh[0]}x{wh[1]}; every view must share one size ({size[0]}x{size[1]})")
        size = wh
        K = _matrix(v["K"], (3, 3), f"{where}.K", option)
        fr = v["frames"]
        if not isinstance(fr, list) or len(fr) not in (1, frames):
            raise OptionError(option, f"{where}.frames: give 1 camera pose (a still camera) or {frames} "
                                      f"(one per rendered frame), not {len(fr) if isinstance(fr, list) else fr!r}")
        Rt = [(_matrix(e.get("R") if isinstance(e, dict) else None, (3, 3), f"{where}.frames[{i}].R", option),
               _matrix(e.get("t") if isinstance(e, dict) else None, (3,), f"{where}.frames[{i}].t", option))
              for i, e in enumerate(fr)]
        V = gl_view(np.stack([r for r, _ in Rt]), np.stack([t for _, t in Rt]))
        Vs.append(np.broadcast_to(V, (frames, 4, 4)))
        Ps.append(np.broadcast_to(projection(K, *wh), (frames, 4, 4)))
        names.append(str(v.get("name", f"view_{c:02d}")))
    return Views(names, size[0], size[1], np.stack(Vs), np.stack(Ps), np.zeros((len(names), frames), bool)), size


def cameras_json(views: Views, frames) -> dict:
    """The cameras.json document (see the module docstring for the convention)."""
    K, R, t = views.K, views.R, views.t
    out = []
    for c, name in enumerate(views.names):
        still_K = bool(np.allclose(K[c], K[c, :1]))
        entries = []
        for i, f in enumerate(frames):
            e = {"frame": float(f), "R": R[c, i].round(9).tolist(), "t": t[c, i].round(9).tolist()}
            if not still_K:
                e["K"] = K[c, i].round(6).tolist()
            if views.cut[c, i]:
                e["cut"] = True
            entries.append(e)
        out.append({"name": name, "width": views.width, "height": views.height, "K": K[c, 0].round(6).tolist(),
                    "frames": entries})
    return {"convention": "world: glTF (right-handed, +y up, metres; MMD point p -> 0.08*(x, y, -z)); "
                          "camera: OpenCV (x right, y down, z forward); x_cam = R @ x_world + t; "
                          "pixel = K @ x_cam / z, pixel centres at integer coordinates",
            "views": out}


def is_cameras_file(value) -> bool:
    """True when a --views value names a file (a cameras.json), False for a count."""
    return isinstance(value, (str, os.PathLike)) and not str(value).strip().isdigit()
