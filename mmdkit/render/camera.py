"""Camera matrices for the renderer: MMD camera values or an automatic framing camera.

In: MMD camera values (target, Euler rotation, distance, fov) or a bounding box (``auto_view``
with room around it, ``fit_view`` as tight as asked), all in MMD's left-handed coordinates.
Out: (4,4) float32 view and projection matrices for OpenGL (right-handed): the only place the
handedness flips (z → −z).
"""

from __future__ import annotations

import math

import numpy as np

FLIP_Z = np.diag([1.0, 1.0, -1.0, 1.0])


def _rot(axis: int, a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    m = np.eye(3)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def look_at_gl(eye, target, up) -> np.ndarray:
    """Right-handed OpenGL view matrix (4,4) float64 from GL-space eye/target/up."""
    eye, target, up = (np.asarray(v, np.float64) for v in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, up)
    s /= np.linalg.norm(s) + 1e-12
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def light_view_proj(direction, center, radius: float) -> np.ndarray:
    """(4,4) view-projection of the orthographic light camera for self-shadow maps: looking
    along ``direction`` (the light's travel) at a sphere (center, radius) in MMD coordinates.
    Only ever used for both writing and reading the map, so no handedness flip is needed."""
    d = np.asarray(direction, np.float64)
    d = d / (np.linalg.norm(d) + 1e-12)
    c = np.asarray(center, np.float64)
    r = max(float(radius), 1e-3)
    up = (0.0, 1.0, 0.0) if abs(d[1]) < 0.99 else (0.0, 0.0, 1.0)
    view = look_at_gl(c - d * 2.0 * r, c, up)
    near, far = 0.5 * r, 3.5 * r
    proj = np.diag([1.0 / r, 1.0 / r, -2.0 / (far - near), 1.0])
    proj[2, 3] = -(far + near) / (far - near)
    return proj @ view


def perspective(fov_y_deg: float, aspect: float, near: float = 0.5, far: float = 2000.0) -> np.ndarray:
    f = 1.0 / math.tan(math.radians(fov_y_deg) / 2)
    m = np.zeros((4, 4))
    m[0, 0] = f / aspect
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2 * far * near / (near - far)
    m[3, 2] = -1
    return m


def mmd_view(target, rotation, distance) -> np.ndarray:
    """View matrix (GL) of an MMD camera: eye = target + R·(0, 0, distance), R = Ry·Rx·Rz of
    the negated stored angles (MMD's yaw-pitch-roll); model matrices stay in MMD space."""
    rx, ry, rz = (float(v) for v in rotation)
    R = _rot(1, -ry) @ _rot(0, -rx) @ _rot(2, -rz)
    target = np.asarray(target, np.float64)
    eye = target + R @ np.array([0.0, 0.0, float(distance)])
    up = R @ np.array([0.0, 1.0, 0.0])
    flip = np.array([1.0, 1.0, -1.0])
    return look_at_gl(eye * flip, target * flip, up * flip) @ FLIP_Z


def auto_view(bbox_min, bbox_max, fov_y_deg: float, aspect: float, yaw_deg: float = 0.0):
    """(view, eye distance) framing a box from the front (MMD characters face −Z), with room
    around it (still pictures; ``fit_view`` frames a box as tightly as asked)."""
    lo, hi = np.asarray(bbox_min, np.float64), np.asarray(bbox_max, np.float64)
    centre = (lo + hi) / 2
    half = (hi - lo) / 2
    h_fov = math.radians(fov_y_deg) / 2
    need_h = half[1] / math.tan(h_fov)
    need_w = max(half[0], half[2]) / (math.tan(h_fov) * aspect)
    dist = 1.15 * max(need_h, need_w) + max(half[2], half[0])
    return mmd_view(centre, (math.radians(-5), math.radians(yaw_deg), 0.0), -dist), dist


def _fits(view, proj, corners, fill: float) -> bool:
    """All (8, 4) homogeneous corners in front of the eye and within ±fill of the picture."""
    clip = corners @ (proj @ view).T
    if (clip[:, 3] <= 1e-6).any():
        return False
    return bool((np.abs(clip[:, :2] / clip[:, 3:]) <= fill).all())


def fit_view(bbox_min, bbox_max, fov_y_deg: float, aspect: float, fill: float = 0.95):
    """(view, eye distance): the nearest camera looking at the box's centre from the front (MMD
    characters face −Z), 5° down as ``auto_view``, that sees every corner of the box within
    ``fill`` of the picture's half width and height (a bisection on the distance)."""
    lo, hi = np.asarray(bbox_min, np.float64), np.asarray(bbox_max, np.float64)
    centre = (lo + hi) / 2
    half = np.maximum((hi - lo) / 2, 1e-3)
    t = math.tan(math.radians(fov_y_deg) / 2)
    guess = max(half[1] / t, half[0] / (t * aspect)) / fill + half[2]
    corners = np.array([[x, y, z, 1.0] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    proj = perspective(fov_y_deg, aspect, near=1e-3, far=1e9)
    rotation = (math.radians(-5), 0.0, 0.0)
    near, far = 0.5 * guess, 2.0 * guess
    for _ in range(40):  # the box looks smaller the farther the eye
        mid = 0.5 * (near + far)
        near, far = (near, mid) if _fits(mmd_view(centre, rotation, -mid), proj, corners, fill) else (mid, far)
    return mmd_view(centre, rotation, -far), far
