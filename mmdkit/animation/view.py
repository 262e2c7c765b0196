"""Camera matrices: MMD camera values → OpenGL view and projection (renderer, glTF camera export).

In: an MMD camera (target point, Euler rotation in radians as the VMD stores it, distance) in
MMD's left-handed coordinates, or GL-space eye/target/up, or a vertical fov and aspect. Out: (4,4)
float64 matrices for OpenGL (right-handed, looking down −z): ``mmd_view`` takes MMD points (its
last factor is ``FLIP_Z``, the one place a camera flips handedness), ``perspective`` a GL
projection. ``mmdkit.render.camera`` frames boxes with these; ``mmdkit.export.gltf`` turns
``mmd_view`` back into a glTF camera node.
"""

from __future__ import annotations

import math

import numpy as np

FLIP_Z = np.diag([1.0, 1.0, -1.0, 1.0])
"""(4,4) float64: MMD points → GL (right-handed) points, z negated (its own inverse)."""


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


def perspective(fov_y_deg: float, aspect: float, near: float = 0.5, far: float = 2000.0) -> np.ndarray:
    """OpenGL perspective projection (4,4) float64: vertical fov in degrees, width/height, clip planes."""
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
