"""Bézier interpolation curves for a baked VMD's reduced keys: does one span fit, and with which curves.

In: one bone's baked keys — frame (F,) float64 ascending, key_t (F,B,3), key_q (F,B,4) float64
parent space — a span from kept key a to key j (indices), the bone's error share tol (units) and
reach (units, ``vmd.bone_reach``). Out: whether two keys at a and j, with the VMD interpolation
curve chosen here per channel (X, Y, Z, rotation; stored on key j, as playback reads it),
reproduce every frame in between within tol — translation distance + rotation angle × reach, as
playback samples them (``sampling.bezier_weight``, ``qslerp_scalar``) — and those curves as (4, 4)
uint8 rows (x1, y1, x2, y2) in 0..127.
How: a straight line first (``LINEAR_CURVE`` on every channel). Otherwise each channel that moves
gets the curve with x1, x2 at 1/3 and 2/3 (``FIT_X``: then x(t) ≈ t, and y is the cubic
s(u) = 3(1-u)²u·y1 + 3(1-u)u²·y2 + u³) whose y1, y2 follow, in least squares, where the frames lie
along that channel (s_k: the fraction of the key-to-key change reached at frame k; for the
rotation, the angle along the great circle from key a to key j over the whole arc), rounded into
0..127; the span is then checked exactly as playback will evaluate it. Closed form, one pass per
channel: curves with other x (an S-curve with x1 > x2) are only approximated.
"""

from __future__ import annotations

import math

from numba import njit

from mmdkit.animation.curves import LINEAR_CURVE
from mmdkit.animation.sampling import bezier_weight
from mmdkit.mathutil import qslerp_scalar

_NB = dict(cache=True, nogil=True, error_model="numpy")
FIT_X = (42, 85)
"""x1, x2 of a fitted curve (0..127): ≈ 1/3 and 2/3, where x(t) ≈ t."""
_STILL = 1e-9  # a channel that changes less than this (units, radians) over the span stays linear


@njit(inline="always", **_NB)
def _fraction_t(key_t, b, a, j, k, c):
    """(s, moves) of frame k on translation channel c: how far along a → j, and whether the
    channel changes at all."""
    d = key_t[j, b, c] - key_t[a, b, c]
    if abs(d) < _STILL:
        return 0.0, False
    return (key_t[k, b, c] - key_t[a, b, c]) / d, True


@njit(inline="always", **_NB)
def _fraction_r(key_q, b, a, j, k):
    """(s, moves) of frame k on the rotation: its angle along the great circle from key a to key j
    (key j on key a's side, as slerp turns) over the arc's angle."""
    ax, ay, az, aw = key_q[a, b, 0], key_q[a, b, 1], key_q[a, b, 2], key_q[a, b, 3]
    jx, jy, jz, jw = key_q[j, b, 0], key_q[j, b, 1], key_q[j, b, 2], key_q[j, b, 3]
    d = ax * jx + ay * jy + az * jz + aw * jw
    if d < 0.0:
        jx, jy, jz, jw, d = -jx, -jy, -jz, -jw, -d
    px, py, pz, pw = jx - d * ax, jy - d * ay, jz - d * az, jw - d * aw  # key j's part off key a
    n = math.sqrt(px * px + py * py + pz * pz + pw * pw)
    th = math.atan2(n, d)
    if th < _STILL:
        return 0.0, False
    kx, ky, kz, kw = key_q[k, b, 0], key_q[k, b, 1], key_q[k, b, 2], key_q[k, b, 3]
    c1 = kx * ax + ky * ay + kz * az + kw * aw
    if c1 < 0.0:
        kx, ky, kz, kw, c1 = -kx, -ky, -kz, -kw, -c1
    c2 = (kx * px + ky * py + kz * pz + kw * pw) / n
    return math.atan2(c2, c1) / th, True


@njit(**_NB)
def _cubic(frame, key_t, key_q, b, a, j, c):
    """(y1, y2) in 0..127 of the cubic that best follows channel c (0-2 translation, 3 rotation)
    over the frames strictly between a and j (least squares); (-1, -1) when it does not move."""
    s11 = s12 = s22 = r1 = r2 = 0.0
    for k in range(a + 1, j):
        u = (frame[k] - frame[a]) / (frame[j] - frame[a])
        if c < 3:
            s, moves = _fraction_t(key_t, b, a, j, k, c)
        else:
            s, moves = _fraction_r(key_q, b, a, j, k)
        if not moves:
            return -1, -1
        b1 = 3.0 * (1.0 - u) * (1.0 - u) * u
        b2 = 3.0 * (1.0 - u) * u * u
        r = s - u * u * u
        s11 += b1 * b1
        s12 += b1 * b2
        s22 += b2 * b2
        r1 += b1 * r
        r2 += b2 * r
    det = s11 * s22 - s12 * s12
    if det <= 1e-9 * s11 * s22:  # too few frames for two coefficients (one between): y1 = y2
        y1 = y2 = (r1 + r2) / (s11 + 2.0 * s12 + s22)
    else:
        y1 = (r1 * s22 - r2 * s12) / det
        y2 = (r2 * s11 - r1 * s12) / det
    return int(round(min(1.0, max(0.0, y1)) * 127.0)), int(round(min(1.0, max(0.0, y2)) * 127.0))


@njit(**_NB)
def _span_ok(frame, key_t, key_q, b, a, j, tol, reach, curve):
    """True when keys a and j with ``curve`` ((4,4) uint8 rows x1, y1, x2, y2 in 0..127 for X, Y,
    Z, rotation) reproduce every frame between them for bone b within tol units."""
    for k in range(a + 1, j):
        u = (frame[k] - frame[a]) / (frame[j] - frame[a])
        d = 0.0
        for c in range(3):
            w = bezier_weight(curve[c, 0] / 127.0, curve[c, 1] / 127.0, curve[c, 2] / 127.0, curve[c, 3] / 127.0, u)
            e = key_t[a, b, c] + (key_t[j, b, c] - key_t[a, b, c]) * w - key_t[k, b, c]
            d += e * e
        w = bezier_weight(curve[3, 0] / 127.0, curve[3, 1] / 127.0, curve[3, 2] / 127.0, curve[3, 3] / 127.0, u)
        q = qslerp_scalar(key_q[a, b, 0], key_q[a, b, 1], key_q[a, b, 2], key_q[a, b, 3],
                          key_q[j, b, 0], key_q[j, b, 1], key_q[j, b, 2], key_q[j, b, 3], w)
        dot = abs(q[0] * key_q[k, b, 0] + q[1] * key_q[k, b, 1] + q[2] * key_q[k, b, 2] + q[3] * key_q[k, b, 3])
        if math.sqrt(d) + 2.0 * math.acos(min(1.0, dot)) * reach > tol:
            return False
    return True


@njit(**_NB)
def fit_span(frame, key_t, key_q, b, a, j, tol, reach, curve_out):
    """True when keys a and j fit bone b within tol (see module docstring); curve_out (4,4) uint8
    gets the curves that do (linear where a straight line is enough or a channel does not move)."""
    for c in range(4):
        for p in range(4):
            curve_out[c, p] = LINEAR_CURVE[p]
    if _span_ok(frame, key_t, key_q, b, a, j, tol, reach, curve_out):
        return True
    for c in range(4):
        y1, y2 = _cubic(frame, key_t, key_q, b, a, j, c)
        if y1 >= 0:
            curve_out[c, 0], curve_out[c, 1], curve_out[c, 2], curve_out[c, 3] = FIT_X[0], y1, FIT_X[1], y2
    return _span_ok(frame, key_t, key_q, b, a, j, tol, reach, curve_out)
