"""A source's dance on the user's SMPL/SMPL-H/SMPL-X body model, as AMASS-layout arrays and .npz.

In: the source ``Model`` and ``Motion`` (as ``retarget`` takes them), a ``smpl.BodyModel``, shape
coefficients ``betas`` (default zeros: min(S, 16) of them), key frames, ``up`` ('z': AMASS's world,
z up; 'y': the body model's own space). Out (``retarget_amass``): {'poses' (F, 3J) float64
axis-angle per joint in SMPL's local frames (joint 0: the global orientation; J = 24/52/55 →
72/156/165), 'trans' (F,3) float64 metres, 'betas' (nb,) float64, 'gender' str, 'mocap_framerate'
30.0 (MMD frames)}; ``write_amass(path, arrays)`` writes them as .npz (``fileutil.atomic_path``).

How: the body's rest skeleton (a T-pose) becomes a bones-only MMD model (``smpl.skeleton_model``)
that ``retarget`` dances (alignment, root scaling by leg length, contact pass as for any target).
Its local rotations (MMD space, rest = identity as SMPL's) cross to the body's right-handed space
as S·R·S (S = diag(1, 1, −1): quaternion (−x, −y, z, w)); the pelvis translation (MMD units, from
its rest position) becomes metres the same way. SMPL poses the pelvis at J₀ + trans, so with
up = 'z' the whole body turns by Q = +90° about x: root R₀ → Q·R₀, trans → Q·(J₀ + trans) − J₀.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import OptionError
from mmdkit.fileutil import atomic_path
from mmdkit.model.space import FLIP_Z_QUATERNION, MMD_UNITS_PER_METRE, Space
from mmdkit.retarget.motion import retarget
from mmdkit.retarget.quat import qmul, qrot
from mmdkit.retarget.smpl import BodyModel, skeleton_model, smpl_map

FRAME_RATE = 30.0
"""MMD motions count 30 frames per second."""
Z_UP = np.array([np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4)])
"""(4,) +90° about x: the body's y-up space → AMASS's z-up world."""
TO_METRES = Space(1.0 / MMD_UNITS_PER_METRE)


def axis_angle(q: np.ndarray) -> np.ndarray:
    """(…, 3) axis·angle (radians, angle in [0, π]) of unit quaternions (…, 4) x y z w."""
    q = np.where(q[..., 3:] < 0, -q, q)
    s = np.linalg.norm(q[..., :3], axis=-1)
    angle = 2.0 * np.arctan2(s, q[..., 3])
    scale = np.where(s > 1e-12, angle / np.maximum(s, 1e-300), 2.0)
    return q[..., :3] * scale[..., None]


def _betas(body: BodyModel, betas) -> np.ndarray:
    if betas is None:
        return np.zeros(min(body.num_shapes, 16))
    b = np.asarray(betas, np.float64).reshape(-1)
    if len(b) > body.num_shapes or not np.all(np.isfinite(b)):
        raise OptionError("betas", f"{len(b)} numbers; {body.path} has {body.num_shapes} shape directions "
                                   "(give at most that many finite numbers)")
    return b


def _keys(motion, names, F: int) -> tuple[np.ndarray, np.ndarray]:
    """(local_q (F,J,4) MMD space, identity where a joint has no keys; pelvis translation (F,3))."""
    J = len(names)
    local_q = np.tile([0.0, 0.0, 0.0, 1.0], (F, J, 1))
    root_t = np.zeros((F, 3))
    track = np.asarray(motion.bone_key_track)
    rot = np.asarray(motion.bone_key_rotation, np.float64)
    move = np.asarray(motion.bone_key_translation, np.float64)
    for k, name in enumerate(motion.bone_track_name):
        rows = np.flatnonzero(track == k)  # one key per frame, frames in order (``keys.build_keys``)
        j = names.index(name)
        local_q[:, j] = rot[rows]
        if j == 0:
            root_t = move[rows]
    return local_q, root_t


def retarget_amass(source_model, source_motion, body: BodyModel, *, betas=None, frames=None, source_map=None,
                   contact: bool = True, up: str = "z", source_name: str = "", source_pose=None) -> dict:
    """AMASS-layout arrays of ``source_motion`` on ``body`` (see module)."""
    if up not in ("y", "z"):
        raise OptionError("up", f"{up!r}: 'z' (AMASS) or 'y' (the body model's space)")
    b = _betas(body, betas)
    target = skeleton_model(body, b)
    motion = retarget(source_model, source_motion, target, frames=frames, source_map=source_map,
                      target_map=smpl_map(target), contact=contact, source_name=source_name,
                      target_name=body.path, source_pose=source_pose)
    F = len(np.unique(np.asarray(motion.bone_key_frame)))
    local_q, root_t = _keys(motion, list(body.names), F)
    q = local_q * FLIP_Z_QUATERNION
    trans = TO_METRES.points(root_t)
    if up == "z":
        j0 = body.joints(b)[0]
        q[:, 0] = qmul(Z_UP, q[:, 0])
        trans = qrot(Z_UP, j0 + trans) - j0
    return dict(poses=axis_angle(q).reshape(F, -1), trans=trans, betas=b, gender=np.str_(body.gender),
                mocap_framerate=np.float64(FRAME_RATE))


def write_amass(path, arrays: dict) -> None:
    """``arrays`` (``retarget_amass``) as an uncompressed .npz at ``path`` (atomically)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
