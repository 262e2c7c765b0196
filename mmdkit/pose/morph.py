"""Morph stage of one frame: group/flip expansion, bone, vertex, UV and material morphs.

In: sampled morph weights (N,) float64 and the Model's per-kind morph tables.
Out (in place): effective weights (N,), per-bone animated translation/rotation composed with
bone morphs, vertex offsets (V,3) float32, UV offsets (V,4) / additional UV (V,A,4) float32,
material multiply/add factors. Only rows of morphs with non-zero weight (this frame or the
last) are touched, so an idle face costs nothing.
Groups: a group's weight scales its members' (flattened, cycle-safe); flip morphs are treated
like groups (their members applied with the flip weight).
"""

from __future__ import annotations

import math

from numba import njit

from mmdkit.mathutil import put4, qmul_scalar, qscale_angle_scalar

_NB = dict(cache=True, nogil=True, _nrt=False)  # no reference counting: nothing is allocated (see bones._NB)
_UNIT_TOLERANCE = 1e-3  # |q|² this close to 1 is left as is (float32 file keys are off by ~2e-5)


@njit(inline="always", **_NB)
def unit_or_identity_scalar(x, y, z, w):
    """(x, y, z, w) scaled to unit length; a zero, tiny or non-finite quaternion → identity.
    Quaternions already unit within _UNIT_TOLERANCE come back unchanged."""
    n2 = x * x + y * y + z * z + w * w
    d = n2 - 1.0
    if -_UNIT_TOLERANCE <= d <= _UNIT_TOLERANCE:
        return x, y, z, w
    if not (1e-24 < n2 < 1e300):  # zero, tiny, inf or NaN
        return 0.0, 0.0, 0.0, 1.0
    n = math.sqrt(n2)
    return x / n, y / n, z / n, w / n


@njit(**_NB)
def unit_rotations(anim_q):
    """anim_q (B,4) float64 rows made unit in place (zero/non-finite → identity): key and morph
    rotations as files give them (VMD keys are not normalised; a zero key is seen in the wild)."""
    for b in range(anim_q.shape[0]):
        q = unit_or_identity_scalar(anim_q[b, 0], anim_q[b, 1], anim_q[b, 2], anim_q[b, 3])
        put4(anim_q, b, q[0], q[1], q[2], q[3])


@njit(**_NB)
def expand_weights(raw, is_leaf, group_start, group_target, group_weight, out):
    """out (N,) float64 = raw (N,) float64, plus each group's weight × member weight added to its
    leaf members. is_leaf (N,) bool; group_start (N+1,) int32 CSR into group_target (G,) int32
    leaf morphs and group_weight (G,) float64 (``Rig.morph_group_*``)."""
    for m in range(raw.shape[0]):
        out[m] = raw[m]
    for g in range(raw.shape[0]):
        if is_leaf[g] or raw[g] == 0.0:
            continue
        for r in range(group_start[g], group_start[g + 1]):
            out[group_target[r]] += raw[g] * group_weight[r]


@njit(**_NB)
def apply_bone_morphs(weight, start, bone, translation, rotation, anim_t, anim_q):
    """Compose bone morphs onto the sampled local pose: t += w·t_m; q = q ⊗ slerp(I, q_m, w)
    (q_m made unit first, a zero q_m is the identity).

    weight (N,) float64; start (N+1,) CSR into the rows bone (R,), translation (R,3),
    rotation (R,4) xyzw; anim_t (B,3) / anim_q (B,4) float64 parent-local, updated in place."""
    for m in range(weight.shape[0]):
        w = weight[m]
        if w == 0.0:
            continue
        for r in range(start[m], start[m + 1]):
            b = bone[r]
            for c in range(3):
                anim_t[b, c] += w * translation[r, c]
            u = unit_or_identity_scalar(rotation[r, 0], rotation[r, 1], rotation[r, 2], rotation[r, 3])
            s = qscale_angle_scalar(u[0], u[1], u[2], u[3], w)
            q = qmul_scalar(anim_q[b, 0], anim_q[b, 1], anim_q[b, 2], anim_q[b, 3], s[0], s[1], s[2], s[3])
            for c in range(4):
                anim_q[b, c] = q[c]


@njit(inline="always", **_NB)
def _same_weights(weight, prev_weight):
    """True when weight (N,) equals prev_weight (N,) float64 exactly (the sums need no update)."""
    for m in range(weight.shape[0]):
        if weight[m] != prev_weight[m]:
            return False
    return True


@njit(**_NB)
def apply_offset_morphs(weight, prev_weight, start, vertex, offset, out):
    """out (V, C) float32 += w·offset for active morphs; rows of morphs active last frame are
    cleared first (so out holds exactly this frame's sum). weight, prev_weight (N,) float64
    (prev_weight updated); start (N+1,) CSR into vertex (R,) and offset (R, C) float32. Weights
    as last frame's: out is already this frame's sum, nothing is touched."""
    if _same_weights(weight, prev_weight):
        return
    for m in range(weight.shape[0]):
        if prev_weight[m] != 0.0:
            for r in range(start[m], start[m + 1]):
                for c in range(out.shape[1]):
                    out[vertex[r], c] = 0.0
    for m in range(weight.shape[0]):
        w = weight[m]
        prev_weight[m] = w
        if w == 0.0:
            continue
        for r in range(start[m], start[m + 1]):
            for c in range(out.shape[1]):
                out[vertex[r], c] += w * offset[r, c]


@njit(**_NB)
def apply_uv_morphs(weight, prev_weight, kind, start, vertex, offset, out_uv, out_add):
    """UV morphs: kind 3 → out_uv (V,4) float32; kinds 4..7 → out_add[:, kind-4] (V,A,4) float32.

    weight, prev_weight (N,) float64 (prev_weight updated); kind (N,) int64; start (N+1,) CSR
    into vertex (R,) and offset (R,4) float32. Rows of last frame's morphs are cleared first;
    weights as last frame's leave everything as it is."""
    if _same_weights(weight, prev_weight):
        return
    for m in range(weight.shape[0]):
        if prev_weight[m] != 0.0:
            ch = kind[m] - 3
            for r in range(start[m], start[m + 1]):
                for c in range(4):
                    if ch == 0:
                        out_uv[vertex[r], c] = 0.0
                    elif ch - 1 < out_add.shape[1]:
                        out_add[vertex[r], ch - 1, c] = 0.0
    for m in range(weight.shape[0]):
        w = weight[m]
        prev_weight[m] = w
        if w == 0.0:
            continue
        ch = kind[m] - 3
        for r in range(start[m], start[m + 1]):
            for c in range(4):
                if ch == 0:
                    out_uv[vertex[r], c] += w * offset[r, c]
                elif ch - 1 < out_add.shape[1]:
                    out_add[vertex[r], ch - 1, c] += w * offset[r, c]


@njit(**_NB)
def apply_material_morphs(weight, start, material, op, values, mul, add):
    """Material morphs. weight (N,) float64; start (N+1,) CSR into material (E,) (−1 = all
    materials), op (E,) (0 multiply, 1 add) and values (E, C) float64 packing every property
    (``rig.MATERIAL_MORPH_CHANNELS``); mul (M, C) float64 reset to 1 and add (M, C) to 0, then
    multiply rows lerp toward the value (1 + w·(v − 1)), add rows accumulate w·v."""
    M = mul.shape[0]
    C = mul.shape[1]
    for i in range(M):
        for c in range(C):
            mul[i, c] = 1.0
            add[i, c] = 0.0
    for m in range(weight.shape[0]):
        w = weight[m]
        if w == 0.0:
            continue
        for r in range(start[m], start[m + 1]):
            lo = material[r]
            hi = lo + 1
            if lo < 0:
                lo = 0
                hi = M
            for i in range(lo, hi):
                for c in range(C):
                    if op[r] == 0:
                        mul[i, c] *= 1.0 + w * (values[r, c] - 1.0)
                    else:
                        add[i, c] += w * values[r, c]
