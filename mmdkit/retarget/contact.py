"""The contact pass: feet planted in the source stay planted on the target, above the floor.

In: the source's foot (ankle) world positions (F,3) model space, its rest height and leg length;
the target's foot positions (F,3) as the rotations alone put them, its rest foot height; the
target's leg world rotations and joint positions. Out: ``contacts`` (F,) bool per foot,
``foot_targets`` (F,3) where the target's foot must be, and ``two_bone`` — new upper/lower leg
world rotations (F,4) that put the foot there (the foot keeps its world rotation).

Rules (units: the skeleton's own leg length L, hips → foot):
- a source foot is in contact where its height above its rest height is < ``CONTACT_HEIGHT``·L and
  its horizontal speed < ``CONTACT_SPEED``·L per frame, for at least ``CONTACT_FRAMES`` frames;
- during a contact the target foot stays where it was at the contact's first frame; after it, the
  offset fades out over ``BLEND_FRAMES`` frames; at every frame the target foot is kept at or above
  its rest height (the floor: MMD's y = 0 under the rest pose's feet);
- a planted foot out of the leg's reach (beyond ``REACH`` of its length) pulls the root towards it;
- two-bone IK: the knee angle from the law of cosines (reach clamped just short of a straight
  leg), bent in the plane the leg already bends in (a straight leg: about the thigh's left axis),
  then the whole leg turned about the hip onto the target.
"""

from __future__ import annotations

import numpy as np

from mmdkit.retarget.quat import angle_between, qarc, qmul, qnormalize, qrot

CONTACT_HEIGHT = 0.05
CONTACT_SPEED = 0.012
CONTACT_FRAMES = 3
BLEND_FRAMES = 6
REACH = 0.995


def contacts(foot_p: np.ndarray, rest_y: float, leg: float, frames: np.ndarray) -> np.ndarray:
    """(F,) bool contact frames of one foot (see module); ``frames`` (F,) motion frames (speed per frame)."""
    F = len(foot_p)
    if F == 0:
        return np.zeros(0, bool)
    low = foot_p[:, 1] - rest_y < CONTACT_HEIGHT * leg
    step = np.maximum(np.diff(frames), 1e-9)
    v = np.linalg.norm(np.diff(foot_p[:, [0, 2]], axis=0), axis=1) / step
    speed = np.zeros(F)
    speed[1:] = v
    speed[:-1] = np.maximum(speed[:-1], v) if F > 1 else speed[:-1]
    slow = speed < CONTACT_SPEED * leg
    on = low & slow
    out = np.zeros(F, bool)
    for a, b in runs(on):
        if b - a + 1 >= CONTACT_FRAMES:
            out[a:b + 1] = True
    return out


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[(first, last)] of the True runs of a (F,) bool mask."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(d == 1).tolist(), (np.flatnonzero(d == -1) - 1).tolist()))


def foot_targets(free_p: np.ndarray, contact: np.ndarray, rest_y: float) -> np.ndarray:
    """(F,3) where the target foot goes: locked during contacts, faded out after, never below rest_y."""
    out = free_p.copy()
    offset = np.zeros_like(free_p)
    F = len(free_p)
    for a, b in runs(contact):
        lock = free_p[a] + offset[a]
        lock[1] = max(lock[1], rest_y)
        offset[a:b + 1] = lock - free_p[a:b + 1]
        n = min(BLEND_FRAMES, F - 1 - b)
        if n > 0:
            fade = 1.0 - np.arange(1, n + 1) / (BLEND_FRAMES + 1)
            offset[b + 1:b + 1 + n] = (lock - free_p[b])[None, :] * fade[:, None]
    out += offset
    out[:, 1] = np.maximum(out[:, 1], rest_y)
    return out


def reach_shift(legs) -> np.ndarray:
    """(F,3) the root's move that brings every planted foot within ``REACH`` of its leg's length:
    ``legs`` [(hip (F,3), foot target (F,3), contact (F,) bool, leg length)], taken in turn."""
    shift = np.zeros_like(legs[0][0])
    for hip, goal, on, length in legs:
        e = goal - (hip + shift)
        n = np.linalg.norm(e, axis=1)
        over = np.where(on, np.maximum(n - REACH * length, 0.0), 0.0)
        shift += e / np.maximum(n, 1e-12)[:, None] * over[:, None]
    return shift


def _axis_angle(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    return np.concatenate([axis * np.sin(angle / 2)[..., None], np.cos(angle / 2)[..., None]], -1)


def two_bone(hip, knee, foot, target, upper_q, lower_q, left_axis):
    """(upper_q, lower_q) (F,4) world rotations moving the foot (F,3) onto ``target`` (F,3) by bending
    the knee and turning the leg about the hip (see module); frames already there keep theirs.
    ``left_axis`` (3,): the character's left at rest (the knee's hinge axis of a straight leg)."""
    u, v = hip - knee, foot - knee
    a, b = np.linalg.norm(u, axis=1), np.linalg.norm(v, axis=1)
    reach = np.linalg.norm(target - hip, axis=1)
    d = np.clip(reach, np.abs(a - b) + 1e-6, (a + b) * (1.0 - 1e-4))
    want = np.arccos(np.clip((a * a + b * b - d * d) / np.maximum(2 * a * b, 1e-12), -1.0, 1.0))
    now = angle_between(u, v)
    n = np.cross(u, v)
    nn = np.linalg.norm(n, axis=1)
    fallback = qrot(upper_q, np.broadcast_to(left_axis, u.shape))
    n = np.where((nn > 1e-6 * a * b)[:, None], n / np.maximum(nn, 1e-300)[:, None], fallback)
    bend = _axis_angle(n, want - now)
    new_foot = knee + qrot(bend, v)
    turn = qarc(new_foot - hip, target - hip)
    new_upper = qnormalize(qmul(turn, upper_q))
    new_lower = qnormalize(qmul(turn, qmul(bend, lower_q)))
    move = np.linalg.norm(target - foot, axis=1) > 1e-5 * (a + b)
    return np.where(move[:, None], new_upper, upper_q), np.where(move[:, None], new_lower, lower_q)
