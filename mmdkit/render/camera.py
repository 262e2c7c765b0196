"""The renderer's cameras: a framing camera for a box, and the light's camera for self-shadows.

In: a bounding box (``auto_view`` with room around it, ``fit_view`` as tight as asked) or a light
direction and the sphere it must cover, in MMD's left-handed coordinates. Out: (4,4) float64
view (and view-projection) matrices for OpenGL. The MMD camera maths itself (``mmd_view``,
``perspective``, the z flip) is ``mmdkit.animation.view``'s, named here too for the pipeline.
"""

from __future__ import annotations

import math

import numpy as np

from mmdkit.animation.view import look_at_gl, mmd_view, perspective

__all__ = ["auto_view", "fit_view", "light_view_proj", "mmd_view", "perspective"]


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


def fit_view(bbox_min, bbox_max, fov_y_deg: float, aspect: float, fill: float = 0.95, yaw_deg: float = 0.0):
    """(view, eye distance): the nearest camera looking at the box's centre from the front (MMD
    characters face −Z; ``yaw_deg`` turns the camera about the vertical: 180 for a character facing
    +Z, ``framing.facing_yaw``), 5° down as ``auto_view``, that sees every corner of the box within
    ``fill`` of the picture's half width and height (a bisection on the distance)."""
    lo, hi = np.asarray(bbox_min, np.float64), np.asarray(bbox_max, np.float64)
    centre = (lo + hi) / 2
    half = np.maximum((hi - lo) / 2, 1e-3)
    t = math.tan(math.radians(fov_y_deg) / 2)
    guess = max(half[1] / t, half[0] / (t * aspect)) / fill + half[2]
    corners = np.array([[x, y, z, 1.0] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    proj = perspective(fov_y_deg, aspect, near=1e-3, far=1e9)
    rotation = (math.radians(-5), math.radians(yaw_deg), 0.0)
    near, far = 0.5 * guess, 2.0 * guess
    for _ in range(40):  # the box looks smaller the farther the eye
        mid = 0.5 * (near + far)
        near, far = (near, mid) if _fits(mmd_view(centre, rotation, -mid), proj, corners, fill) else (mid, far)
    return mmd_view(centre, rotation, -far), far
