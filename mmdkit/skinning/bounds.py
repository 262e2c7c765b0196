"""Bone hit boxes: one box per bone in its rest space, following the bone each frame.

In: a ``Model`` (boxes around the vertices whose strongest weight is the bone, optionally every
vertex the bone weights ≥ ``threshold``), per frame bone_world (B, 4, 4) float32. Out: oriented
world boxes — centre (B, 3), axes (B, 3, 3) (row k = world direction of box axis k), half extents
(B, 3) — and point/ray queries returning the hit bone (or -1); ``gap_report`` over a motion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from mmdkit.model.deform import effective_weights

__all__ = ["BoneBoxes", "GapReport", "strongest_bone"]


def strongest_bone(model):
    """(V,) int32: the bone with the largest weight of each vertex (first slot on ties)."""
    bw = effective_weights(model.vertex_deform, model.vertex_bone_weight)
    k = np.argmax(bw, axis=1)
    return np.asarray(model.vertex_bone_index, np.int32)[np.arange(model.num_vertices), k]


@njit(cache=True, nogil=True)
def _world(bone_world, box_rest_center, box_center, box_axes):
    """Posed boxes: box_center (B, 3) float32 = bone_world[b] @ box_rest_center[b]; box_axes (B, 3, 3)
    float32, row k = world direction of box axis k (the bone's rotation columns).

    bone_world (B, 4, 4) float32 model space; box_rest_center (B, 3) float32 rest space;
    box_center, box_axes: state out, model space, written in full.
    """
    for b in range(bone_world.shape[0]):
        for i in range(3):
            box_center[b, i] = (bone_world[b, i, 0] * box_rest_center[b, 0]
                                + bone_world[b, i, 1] * box_rest_center[b, 1]
                                + bone_world[b, i, 2] * box_rest_center[b, 2] + bone_world[b, i, 3])
            for k in range(3):
                box_axes[b, k, i] = bone_world[b, i, k]


@njit(cache=True, nogil=True, inline="always")
def _local(box_center, box_axes, b, px, py, pz):
    """Point (px, py, pz) model space → its coordinates (x, y, z) in box b's frame (scalars).
    box_center (B, 3), box_axes (B, 3, 3) float32 from ``_world``."""
    dx = px - box_center[b, 0]; dy = py - box_center[b, 1]; dz = pz - box_center[b, 2]
    return (box_axes[b, 0, 0] * dx + box_axes[b, 0, 1] * dy + box_axes[b, 0, 2] * dz,
            box_axes[b, 1, 0] * dx + box_axes[b, 1, 1] * dy + box_axes[b, 1, 2] * dz,
            box_axes[b, 2, 0] * dx + box_axes[b, 2, 1] * dy + box_axes[b, 2, 2] * dz)


@njit(cache=True, nogil=True)
def _hit_point(box_center, box_axes, box_half, box_valid, px, py, pz, eps):
    """The box containing point (px, py, pz) (model space, grown by eps) whose centre is nearest,
    or -1. box_center (B, 3), box_axes (B, 3, 3), box_half (B, 3) float32 half extents,
    box_valid (B,) bool (bone has a box)."""
    best = -1
    bd = np.inf
    for b in range(box_center.shape[0]):
        if not box_valid[b]:
            continue
        lx, ly, lz = _local(box_center, box_axes, b, px, py, pz)
        if abs(lx) <= box_half[b, 0] + eps and abs(ly) <= box_half[b, 1] + eps and abs(lz) <= box_half[b, 2] + eps:
            d = lx * lx + ly * ly + lz * lz
            if d < bd:
                bd = d
                best = b
    return best


@njit(cache=True, nogil=True)
def _hit_ray(box_center, box_axes, box_half, box_valid, ox, oy, oz, dx, dy, dz, tmax):
    """First box hit by the ray o + t·d, 0 ≤ t ≤ tmax (model space; slab test per box) → (box or -1,
    t of the hit or tmax). Box arrays as ``_hit_point``."""
    best = -1
    bt = tmax
    for b in range(box_center.shape[0]):
        if not box_valid[b]:
            continue
        o = _local(box_center, box_axes, b, ox, oy, oz)
        t0 = 0.0
        t1 = bt
        hit = True
        for k in range(3):
            dk = box_axes[b, k, 0] * dx + box_axes[b, k, 1] * dy + box_axes[b, k, 2] * dz
            h = box_half[b, k]
            if abs(dk) < 1e-30:
                if abs(o[k]) > h:
                    hit = False
                    break
                continue
            a = (-h - o[k]) / dk
            c = (h - o[k]) / dk
            if a > c:
                a, c = c, a
            if a > t0:
                t0 = a
            if c < t1:
                t1 = c
            if t0 > t1:
                hit = False
                break
        if hit and t0 < bt:
            bt = t0
            best = b
    return best, bt


@njit(cache=True, nogil=True)
def _gaps(vertex_position, vertex_bone, box_center, box_axes, box_half, box_valid, eps, bone_outside_out):
    """One posed frame → (vertices outside their own bone's box, vertices inside no box, farthest
    distance outside the own box).

    vertex_position (V, 3) float32 skinned, model space; vertex_bone (V,) int32 each vertex's box;
    box arrays as ``_hit_point``; eps: tolerance in units. State in/out: bone_outside_out (B,) int64,
    per-bone count of vertices outside, incremented.
    """
    own = 0
    allb = 0
    worst = 0.0
    for v in range(vertex_position.shape[0]):
        b = vertex_bone[v]
        px = vertex_position[v, 0]
        py = vertex_position[v, 1]
        pz = vertex_position[v, 2]
        loc = _local(box_center, box_axes, b, px, py, pz)
        ex = 0.0
        for k in range(3):
            e = abs(loc[k]) - box_half[b, k]
            if e > 0:
                ex += e * e
        if ex <= eps * eps:
            continue
        own += 1
        bone_outside_out[b] += 1
        ex = np.sqrt(ex)
        if ex > worst:
            worst = ex
        if _hit_point(box_center, box_axes, box_half, box_valid, px, py, pz, eps) < 0:
            allb += 1
    return own, allb, worst


@dataclass
class GapReport:
    """Vertices outside their bone's posed box over a motion.

    outside_own (T,) int64: per frame, vertices outside their strongest bone's box;
    outside_all (T,) int64: vertices inside no box at all (the real holes for hit tests);
    max_distance: farthest any vertex got outside its own box; per_bone (B,) int64 counts summed
    over frames.
    """

    num_vertices: int
    outside_own: np.ndarray
    outside_all: np.ndarray
    max_distance: float
    per_bone: np.ndarray

    @property
    def num_frames(self) -> int:
        return len(self.outside_own)

    @property
    def fraction_own(self) -> float:
        return float(self.outside_own.sum()) / max(1, self.num_frames * self.num_vertices)

    @property
    def fraction_all(self) -> float:
        return float(self.outside_all.sum()) / max(1, self.num_frames * self.num_vertices)

    def __str__(self):
        return (f"{self.num_frames} frames, {self.num_vertices} vertices: outside own box "
                f"{100 * self.fraction_own:.2f}% (max {self.outside_own.max(initial=0)}/frame, "
                f"{self.max_distance:.3f} units), inside no box {100 * self.fraction_all:.2f}%")


class BoneBoxes:
    """Per-bone boxes in rest space (MMD bones have no bind rotation: the model's axes).

    threshold: None → a vertex counts for its strongest bone only (leaves
    gaps at joints when posed); a weight in (0, 1] → also for every bone weighting it at least
    that much (boxes overlap at joints and the gaps close). padding: units added on every side.
    Attributes: rest_min, rest_max (B, 3) float32 (model space), valid (B,) bool (bone has a
    box), vertex_bone (V,) int32 (strongest bone), and after ``world_boxes`` the current
    center (B, 3), axes (B, 3, 3), half_extent (B, 3) float32. Boxes of bones with no vertices
    are invalid and never hit. One ``BoneBoxes`` per character (it holds the posed boxes).
    """

    def __init__(self, model, *, threshold: float | None = None, padding: float = 0.0):
        B = model.num_bones
        self.model = model
        self.num_bones = B
        self.threshold = threshold
        self.vertex_bone = strongest_bone(model)
        p = np.asarray(model.vertex_position, np.float64)
        pairs_v = [np.arange(model.num_vertices)]
        pairs_b = [self.vertex_bone]
        if threshold is not None:
            bw = effective_weights(model.vertex_deform, model.vertex_bone_weight)
            v, k = np.nonzero(bw >= threshold)
            pairs_v.append(v)
            pairs_b.append(np.asarray(model.vertex_bone_index)[v, k])
        v = np.concatenate(pairs_v)
        b = np.concatenate(pairs_b)
        lo = np.full((B, 3), np.inf)
        hi = np.full((B, 3), -np.inf)
        np.minimum.at(lo, b, p[v])
        np.maximum.at(hi, b, p[v])
        self.valid = np.isfinite(lo).all(1)
        lo[~self.valid] = 0
        hi[~self.valid] = 0
        lo -= padding
        hi += padding
        self.rest_min = lo.astype(np.float32)
        self.rest_max = hi.astype(np.float32)
        # box centre in the bone's rest frame (origin at the bone's position)
        self.rest_center = ((lo + hi) / 2 - np.asarray(model.bone_position, np.float64)).astype(np.float32)
        self.half_extent = ((hi - lo) / 2).astype(np.float32)
        self.center = np.zeros((B, 3), np.float32)
        self.axes = np.tile(np.eye(3, dtype=np.float32), (B, 1, 1))
        for a in (self.valid, self.rest_min, self.rest_max, self.rest_center, self.half_extent, self.vertex_bone):
            a.flags.writeable = False
        self._skinner = None

    def world_boxes(self, bone_world):
        """bone_world (B, 4, 4) float32 → (center (B, 3), axes (B, 3, 3), half_extent (B, 3)); the
        arrays are this object's own (overwritten by the next call)."""
        _world(bone_world, self.rest_center, self.center, self.axes)
        return self.center, self.axes, self.half_extent

    def hit_point(self, point, eps: float = 1e-5) -> int:
        """Bone whose current box contains ``point`` (3,) (nearest box centre if several), or -1."""
        x, y, z = (float(c) for c in point)
        return int(_hit_point(self.center, self.axes, self.half_extent, self.valid, x, y, z, eps))

    def hit_ray(self, origin, direction, max_distance: float = np.inf, return_distance: bool = False):
        """First bone box hit by the ray origin + t·direction (t ≥ 0), or -1. With
        ``return_distance`` → (bone, t) (t in units of ``direction``'s length; inf when no hit)."""
        ox, oy, oz = (float(c) for c in origin)
        dx, dy, dz = (float(c) for c in direction)
        b, t = _hit_ray(self.center, self.axes, self.half_extent, self.valid, ox, oy, oz, dx, dy, dz,
                        float(max_distance))
        b = int(b)
        if return_distance:
            return b, (float(t) if b >= 0 else np.inf)
        return b

    def gap_report(self, poses, skinner=None, eps: float = 1e-4) -> GapReport:
        """Skin the mesh at each pose (an iterable of bone_world (B, 4, 4), e.g. a (T, B, 4, 4)
        array) and count vertices outside their strongest bone's posed box."""
        from mmdkit.skinning.cpu import CpuSkinner

        if skinner is None:
            if self._skinner is None:
                self._skinner = CpuSkinner(self.model)
            skinner = self._skinner
        V = self.model.num_vertices
        pos = np.empty((V, 3), np.float32)
        nrm = np.empty((V, 3), np.float32)
        bp = np.asarray(self.model.bone_position, np.float32)
        S = np.empty((self.num_bones, 4, 4), np.float32)
        per_bone = np.zeros(self.num_bones, np.int64)
        own, allb, worst = [], [], 0.0
        for W in poses:
            W = np.asarray(W, np.float32)
            S[:] = W
            S[:, :3, 3] = W[:, :3, 3] - np.einsum("bij,bj->bi", W[:, :3, :3], bp)
            skinner.skin(S, None, pos, nrm)
            self.world_boxes(W)
            o, a, w = _gaps(pos, self.vertex_bone, self.center, self.axes, self.half_extent, self.valid,
                            eps, per_bone)
            own.append(o)
            allb.append(a)
            worst = max(worst, float(w))
        return GapReport(V, np.array(own, np.int64), np.array(allb, np.int64), worst, per_bone)
