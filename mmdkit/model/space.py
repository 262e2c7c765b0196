"""MMD space and the spaces other files use: the handedness flip, units, rotation conversions.

MMD space (every ``Model``/``Motion``) is left-handed, +y up, the character facing −z, in MMD
units (1 unit = 8 cm: ``MMD_UNITS_PER_METRE`` = 12.5). glTF, BVH, Assimp's scenes and OpenGL are
right-handed: a point crosses over as (x, y, −z), a rotation S·R·S with S = diag(1, 1, −1), i.e.
a quaternion (x, y, z, w) → (−x, −y, z, w). The flip is its own inverse, so one ``Space`` serves
both ways: the importers take scene points to MMD units (scale 12.5 for metres) and the glTF/BVH
writers take MMD points out (scale 1/12.5 for metres). Rotation matrices become quaternions with
``quaternions_from_rotations``. Convert only at these edges; everything between stays MMD.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MMD_UNITS_PER_METRE = 12.5
"""1 MMD unit = 8 cm."""

FLIP_Z_QUATERNION = np.array([-1.0, -1.0, 1.0, 1.0])
"""(4,) float64: a quaternion (x, y, z, w) times this is its rotation with z flipped, S·R·S."""


@dataclass(frozen=True)
class Space:
    """One space → another: points ``scale·S·p``, rotations ``S·R·S`` with S = diag(1, 1, −1)
    when ``flip_z`` (right-handed ⇄ MMD's left-handed), else S = I. The default takes a
    right-handed scene in metres to MMD units (``scale`` 12.5); ``Space(1 / 12.5)`` takes MMD
    points to right-handed metres."""

    scale: float = MMD_UNITS_PER_METRE
    flip_z: bool = True

    @property
    def axis(self) -> np.ndarray:
        """(3,) float64 diagonal of S."""
        return np.array([1.0, 1.0, -1.0 if self.flip_z else 1.0])

    def points(self, p: np.ndarray) -> np.ndarray:
        """(…, 3) points or offsets → the other space's units (float64)."""
        return np.asarray(p, np.float64) * (self.scale * self.axis)

    def directions(self, n: np.ndarray) -> np.ndarray:
        """(…, 3) directions (normals) → the other space, not rescaled."""
        return np.asarray(n, np.float64) * self.axis

    def quaternions(self, q: np.ndarray) -> np.ndarray:
        """(…, 4) x y z w rotations → the other space: S·R·S is (−x, −y, z, w) for the z flip."""
        return np.asarray(q, np.float64) * (FLIP_Z_QUATERNION if self.flip_z else 1.0)


def quaternions_from_rotations(r: np.ndarray) -> np.ndarray:
    """(…, 3, 3) rotations → (…, 4) float64 unit quaternions x y z w (w ≥ 0), vectorised Shepperd."""
    r = np.asarray(r, np.float64)
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    cand = np.stack([
        np.stack([1 + m00 - m11 - m22, r[..., 0, 1] + r[..., 1, 0], r[..., 0, 2] + r[..., 2, 0],
                  r[..., 2, 1] - r[..., 1, 2]], -1),
        np.stack([r[..., 0, 1] + r[..., 1, 0], 1 - m00 + m11 - m22, r[..., 1, 2] + r[..., 2, 1],
                  r[..., 0, 2] - r[..., 2, 0]], -1),
        np.stack([r[..., 0, 2] + r[..., 2, 0], r[..., 1, 2] + r[..., 2, 1], 1 - m00 - m11 + m22,
                  r[..., 1, 0] - r[..., 0, 1]], -1),
        np.stack([r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1],
                  1 + m00 + m11 + m22], -1)], -2)  # (…, 4 candidates, 4)
    best = np.argmax(np.stack([m00 - m11 - m22, m11 - m00 - m22, m22 - m00 - m11, m00 + m11 + m22], -1), -1)
    q = np.take_along_axis(cand, best[..., None, None], -2)[..., 0, :]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:] < 0, -q, q)
