"""Triangle cages: a low-poly triangle cage (e.g. a Bullet soft body) drives a detailed mesh.

In: cage vertices (Nc, 3) and faces (Fc, 3) at rest, detail vertices (V, 3) (and normals (V, 3)).
Build: one frame per cage triangle (origin = centroid, Z = normal, Y toward its first vertex,
X = Y × Z); each detail vertex is bound to its k nearest triangles by exact point–triangle distance
(uniform-grid index), inverse-distance weights, triangles > far_ratio × the nearest dropped, and
stored in those frames' local coordinates. ``deform(cage_now, out_position[, out_normal])`` skins it.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from mmdkit.errors import BuildError

__all__ = ["TriangleCage", "point_triangle_distance"]


@njit(cache=True, nogil=True, inline="always")
def _frame(cage_position, cage_face, t, out, o):
    """Frame of cage triangle t: out[o + 0..2, 0..2] = columns X, Y, Z; out[o + 0..2, 3] = centroid.

    cage_position (Nc, 3) float64 model space; cage_face (Fc, 3) int64; out (n, 4) float64 rows written.
    """
    i0 = cage_face[t, 0]; i1 = cage_face[t, 1]; i2 = cage_face[t, 2]
    ax = cage_position[i0, 0]; ay = cage_position[i0, 1]; az = cage_position[i0, 2]
    bx = cage_position[i1, 0]; by = cage_position[i1, 1]; bz = cage_position[i1, 2]
    cx = cage_position[i2, 0]; cy = cage_position[i2, 1]; cz = cage_position[i2, 2]
    ox = (ax + bx + cx) / 3.0; oy = (ay + by + cy) / 3.0; oz = (az + bz + cz) / 3.0
    ux = bx - ax; uy = by - ay; uz = bz - az
    vx = cx - ax; vy = cy - ay; vz = cz - az
    zx = uy * vz - uz * vy; zy = uz * vx - ux * vz; zz = ux * vy - uy * vx
    ln = np.sqrt(zx * zx + zy * zy + zz * zz) + 1e-30
    zx /= ln; zy /= ln; zz /= ln
    yx = ax - ox; yy = ay - oy; yz = az - oz
    ln = np.sqrt(yx * yx + yy * yy + yz * yz) + 1e-30
    yx /= ln; yy /= ln; yz /= ln
    xx = yy * zz - yz * zy; xy = yz * zx - yx * zz; xz = yx * zy - yy * zx
    ln = np.sqrt(xx * xx + xy * xy + xz * xz) + 1e-30
    xx /= ln; xy /= ln; xz /= ln
    out[o, 0] = xx; out[o, 1] = yx; out[o, 2] = zx; out[o, 3] = ox
    out[o + 1, 0] = xy; out[o + 1, 1] = yy; out[o + 1, 2] = zy; out[o + 1, 3] = oy
    out[o + 2, 0] = xz; out[o + 2, 1] = yz; out[o + 2, 2] = zz; out[o + 2, 3] = oz


@njit(cache=True, nogil=True)
def _frames(cage_position, cage_face, triangle_frame_out):
    """triangle_frame_out (Fc, 3, 4) float64: rotation columns X, Y, Z and centroid per triangle.
    cage_position (Nc, 3) float64 model space; cage_face (Fc, 3) int64."""
    for t in range(cage_face.shape[0]):
        _frame(cage_position, cage_face, t, triangle_frame_out[t], 0)


@njit(cache=True, nogil=True, inline="always")
def _closest_dist2(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """Squared distance from point p to triangle abc, all scalars (Ericson's region tests; exact
    for all regions)."""
    abx = bx - ax; aby = by - ay; abz = bz - az
    acx = cx - ax; acy = cy - ay; acz = cz - az
    apx = px - ax; apy = py - ay; apz = pz - az
    d1 = abx * apx + aby * apy + abz * apz
    d2 = acx * apx + acy * apy + acz * apz
    if d1 <= 0.0 and d2 <= 0.0:
        qx = ax; qy = ay; qz = az
    else:
        bpx = px - bx; bpy = py - by; bpz = pz - bz
        d3 = abx * bpx + aby * bpy + abz * bpz
        d4 = acx * bpx + acy * bpy + acz * bpz
        if d3 >= 0.0 and d4 <= d3:
            qx = bx; qy = by; qz = bz
        else:
            vc = d1 * d4 - d3 * d2
            if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
                v = d1 / (d1 - d3)
                qx = ax + v * abx; qy = ay + v * aby; qz = az + v * abz
            else:
                cpx = px - cx; cpy = py - cy; cpz = pz - cz
                d5 = abx * cpx + aby * cpy + abz * cpz
                d6 = acx * cpx + acy * cpy + acz * cpz
                if d6 >= 0.0 and d5 <= d6:
                    qx = cx; qy = cy; qz = cz
                else:
                    vb = d5 * d2 - d1 * d6
                    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
                        w = d2 / (d2 - d6)
                        qx = ax + w * acx; qy = ay + w * acy; qz = az + w * acz
                    else:
                        va = d3 * d6 - d5 * d4
                        if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
                            w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
                            qx = bx + w * (cx - bx)
                            qy = by + w * (cy - by)
                            qz = bz + w * (cz - bz)
                        else:
                            den = 1.0 / (va + vb + vc)
                            v = vb * den
                            w = vc * den
                            qx = ax + abx * v + acx * w
                            qy = ay + aby * v + acy * w
                            qz = az + abz * v + acz * w
    dx = px - qx; dy = py - qy; dz = pz - qz
    return dx * dx + dy * dy + dz * dz


@njit(cache=True, nogil=True)
def point_triangle_distance(p, a, b, c):
    """Exact Euclidean distance from point p (3,) to triangle abc (each (3,))."""
    return np.sqrt(_closest_dist2(p[0], p[1], p[2], a[0], a[1], a[2], b[0], b[1], b[2], c[0], c[1], c[2]))


@njit(cache=True, nogil=True)
def _grid(cage_position, cage_face, triangle_usable, lo, h, dims):
    """Bin each usable cage triangle into every grid cell its bounding box overlaps → CSR
    (cell_start (C+1,) int64, cell_triangle (n,) int32).

    cage_position (Nc, 3) float64; cage_face (Fc, 3) int64; triangle_usable (Fc,) bool; lo (3,)
    float64 grid corner; h cell size; dims (3,) int64 cells per axis (C = product). Build time.
    """
    nx, ny, nz = dims[0], dims[1], dims[2]
    ncell = nx * ny * nz
    cnt = np.zeros(ncell + 1, np.int64)
    Fc = cage_face.shape[0]
    rng = np.zeros((Fc, 6), np.int64)
    for t in range(Fc):
        if not triangle_usable[t]:
            continue
        for a in range(3):
            mn = np.inf
            mx = -np.inf
            for c in range(3):
                x = cage_position[cage_face[t, c], a]
                mn = min(mn, x)
                mx = max(mx, x)
            n = dims[a]
            rng[t, a] = min(n - 1, max(0, int(np.floor((mn - lo[a]) / h))))
            rng[t, 3 + a] = min(n - 1, max(0, int(np.floor((mx - lo[a]) / h))))
        for i in range(rng[t, 0], rng[t, 3] + 1):
            for j in range(rng[t, 1], rng[t, 4] + 1):
                for k in range(rng[t, 2], rng[t, 5] + 1):
                    cnt[(i * ny + j) * nz + k + 1] += 1
    cell_start = np.cumsum(cnt)
    fill = cell_start[:-1].copy()
    cell_triangle = np.empty(cell_start[-1], np.int32)
    for t in range(Fc):
        if not triangle_usable[t]:
            continue
        for i in range(rng[t, 0], rng[t, 3] + 1):
            for j in range(rng[t, 1], rng[t, 4] + 1):
                for k in range(rng[t, 2], rng[t, 5] + 1):
                    c = (i * ny + j) * nz + k
                    cell_triangle[fill[c]] = t
                    fill[c] += 1
    return cell_start, cell_triangle


@njit(cache=True, nogil=True, inline="always")
def _visit_cell(c, cell_start, cell_triangle, cage_position, cage_face, px, py, pz, best_d, best_t, K):
    """Offer the triangles of grid cell c to the K nearest so far of point (px, py, pz).
    State in/out: best_d (K,) float64 squared distances ascending, best_t (K,) int64 triangles."""
    for r in range(cell_start[c], cell_start[c + 1]):
        t = cell_triangle[r]
        dup = False
        for s in range(K):
            if best_t[s] == t:
                dup = True
                break
        if dup:
            continue
        i0 = cage_face[t, 0]; i1 = cage_face[t, 1]; i2 = cage_face[t, 2]
        d = _closest_dist2(px, py, pz, cage_position[i0, 0], cage_position[i0, 1], cage_position[i0, 2],
                           cage_position[i1, 0], cage_position[i1, 1], cage_position[i1, 2],
                           cage_position[i2, 0], cage_position[i2, 1], cage_position[i2, 2])
        if d >= best_d[K - 1]:
            continue
        s = K - 1
        while s > 0 and best_d[s - 1] > d:
            best_d[s] = best_d[s - 1]
            best_t[s] = best_t[s - 1]
            s -= 1
        best_d[s] = d
        best_t[s] = t


@njit(cache=True, nogil=True, parallel=True)
def _bind(detail_position, cage_position, cage_face, cell_start, cell_triangle, lo, h, dims, K, far_ratio, eps,
          triangle_frame, vertex_triangle_out, vertex_weight_out, vertex_local_out):
    """Bind each detail vertex to its K nearest cage triangles (grid search in growing shells).

    detail_position (V, 3) float64 model space; cage arrays and grid as ``_grid``; far_ratio:
    triangles farther than far_ratio × the nearest are dropped; eps: closer than this binds to
    the nearest alone; triangle_frame (Fc, 3, 4) float64 rest frames. State out (written in full):
    vertex_triangle_out (V, K) int32 (-1 unused), vertex_weight_out (V, K) float64 inverse-distance
    weights summing to 1, vertex_local_out (V, K, 3) float64 position in each triangle's frame.
    """
    nx, ny, nz = dims[0], dims[1], dims[2]
    for v in prange(detail_position.shape[0]):
        px = detail_position[v, 0]; py = detail_position[v, 1]; pz = detail_position[v, 2]
        best_d = np.full(K, np.inf)
        best_t = np.full(K, -1, np.int64)
        fx = (px - lo[0]) / h; fy = (py - lo[1]) / h; fz = (pz - lo[2]) / h
        ci = int(np.floor(fx)); cj = int(np.floor(fy)); ck = int(np.floor(fz))
        r = 0
        while True:
            # shell of cells at Chebyshev distance r from (ci, cj, ck), clipped to the grid
            i_lo = max(ci - r, 0); i_hi = min(ci + r, nx - 1)
            j_lo = max(cj - r, 0); j_hi = min(cj + r, ny - 1)
            k_lo = max(ck - r, 0); k_hi = min(ck + r, nz - 1)
            for i in range(i_lo, i_hi + 1):
                edge_i = i == ci - r or i == ci + r
                for j in range(j_lo, j_hi + 1):
                    edge_j = edge_i or j == cj - r or j == cj + r
                    if edge_j:
                        for k in range(k_lo, k_hi + 1):
                            _visit_cell((i * ny + j) * nz + k, cell_start, cell_triangle, cage_position,
                                        cage_face, px, py, pz, best_d, best_t, K)
                    else:
                        if ck - r >= 0 and ck - r < nz:
                            _visit_cell((i * ny + j) * nz + ck - r, cell_start, cell_triangle, cage_position,
                                        cage_face, px, py, pz, best_d, best_t, K)
                        if r > 0 and ck + r >= 0 and ck + r < nz:
                            _visit_cell((i * ny + j) * nz + ck + r, cell_start, cell_triangle, cage_position,
                                        cage_face, px, py, pz, best_d, best_t, K)
            # everything unvisited lies outside the cube of cells [c - r, c + r]
            covered = ci - r <= 0 and cj - r <= 0 and ck - r <= 0 and ci + r >= nx - 1 \
                and cj + r >= ny - 1 and ck + r >= nz - 1
            if covered:
                break
            gap = min(fx - (ci - r), (ci + r + 1) - fx, fy - (cj - r), (cj + r + 1) - fy,
                      fz - (ck - r), (ck + r + 1) - fz) * h
            if best_d[K - 1] <= gap * gap:
                break
            r += 1
        # inverse-distance weights relative to the nearest; far triangles dropped
        d0 = np.sqrt(best_d[0])
        n = 0
        for s in range(K):
            vertex_triangle_out[v, s] = -1
            vertex_weight_out[v, s] = 0.0
        if best_t[0] < 0:
            continue
        if d0 < eps:
            vertex_triangle_out[v, 0] = best_t[0]
            vertex_weight_out[v, 0] = 1.0
            n = 1
        else:
            wsum = 0.0
            for s in range(K):
                if best_t[s] < 0:
                    break
                ds = np.sqrt(best_d[s])
                if ds > far_ratio * d0:
                    break
                vertex_triangle_out[v, s] = best_t[s]
                vertex_weight_out[v, s] = d0 / ds
                wsum += d0 / ds
                n += 1
            for s in range(n):
                vertex_weight_out[v, s] /= wsum
        for s in range(n):
            t = vertex_triangle_out[v, s]
            dx = px - triangle_frame[t, 0, 3]; dy = py - triangle_frame[t, 1, 3]; dz = pz - triangle_frame[t, 2, 3]
            for a in range(3):  # R^T (p - origin)
                vertex_local_out[v, s, a] = (triangle_frame[t, 0, a] * dx + triangle_frame[t, 1, a] * dy
                                             + triangle_frame[t, 2, a] * dz)


@njit(cache=True, nogil=True, parallel=True)
def _deform(triangle_frame, triangle_delta, vertex_triangle, vertex_weight, vertex_local, vertex_rest_normal, has_n,
            vertex_position_out, vertex_normal_out):
    """Detail vertices from the cage's current triangle frames (weighted blend of each bound frame).

    Model inputs: vertex_triangle (V, K) int32, vertex_weight (V, K) float64, vertex_local (V, K, 3)
    float64 from ``_bind``; vertex_rest_normal (V, 3) float64 (read when has_n). State in:
    triangle_frame (Fc, 3, 4) float64 now, triangle_delta (Fc, 3, 3) float64 rotation since rest.
    State out: vertex_position_out (V, 3), vertex_normal_out (V, 3) (when has_n), model space.
    """
    F = triangle_frame  # short for the blend arithmetic below
    K = vertex_triangle.shape[1]
    for v in prange(vertex_triangle.shape[0]):
        px = 0.0; py = 0.0; pz = 0.0
        nx = 0.0; ny = 0.0; nz = 0.0
        for s in range(K):
            t = vertex_triangle[v, s]
            if t < 0:
                break
            ws = vertex_weight[v, s]
            lx = vertex_local[v, s, 0]; ly = vertex_local[v, s, 1]; lz = vertex_local[v, s, 2]
            px += ws * (F[t, 0, 0] * lx + F[t, 0, 1] * ly + F[t, 0, 2] * lz + F[t, 0, 3])
            py += ws * (F[t, 1, 0] * lx + F[t, 1, 1] * ly + F[t, 1, 2] * lz + F[t, 1, 3])
            pz += ws * (F[t, 2, 0] * lx + F[t, 2, 1] * ly + F[t, 2, 2] * lz + F[t, 2, 3])
            if has_n:
                ax = vertex_rest_normal[v, 0]; ay = vertex_rest_normal[v, 1]; az = vertex_rest_normal[v, 2]
                nx += ws * (triangle_delta[t, 0, 0] * ax + triangle_delta[t, 0, 1] * ay + triangle_delta[t, 0, 2] * az)
                ny += ws * (triangle_delta[t, 1, 0] * ax + triangle_delta[t, 1, 1] * ay + triangle_delta[t, 1, 2] * az)
                nz += ws * (triangle_delta[t, 2, 0] * ax + triangle_delta[t, 2, 1] * ay + triangle_delta[t, 2, 2] * az)
        vertex_position_out[v, 0] = px; vertex_position_out[v, 1] = py; vertex_position_out[v, 2] = pz
        if has_n:
            ln = np.sqrt(nx * nx + ny * ny + nz * nz)
            if ln > 1e-30:
                vertex_normal_out[v, 0] = nx / ln; vertex_normal_out[v, 1] = ny / ln; vertex_normal_out[v, 2] = nz / ln
            else:
                vertex_normal_out[v, 0] = vertex_rest_normal[v, 0]
                vertex_normal_out[v, 1] = vertex_rest_normal[v, 1]
                vertex_normal_out[v, 2] = vertex_rest_normal[v, 2]


@njit(cache=True, nogil=True)
def _update(cage_position, cage_face, triangle_rest_frame, triangle_frame, triangle_delta, want_delta):
    """Cage now → triangle_frame (Fc, 3, 4) float64 and, when want_delta, triangle_delta (Fc, 3, 3)
    float64 = R_now · R_restᵀ. cage_position (Nc, 3) float64 model space; cage_face (Fc, 3) int64;
    triangle_rest_frame (Fc, 3, 4) float64."""
    _frames(cage_position, cage_face, triangle_frame)
    if want_delta:  # D = R_now · R_restᵀ
        for t in range(cage_face.shape[0]):
            for i in range(3):
                for j in range(3):
                    triangle_delta[t, i, j] = (triangle_frame[t, i, 0] * triangle_rest_frame[t, j, 0]
                                               + triangle_frame[t, i, 1] * triangle_rest_frame[t, j, 1]
                                               + triangle_frame[t, i, 2] * triangle_rest_frame[t, j, 2])


class TriangleCage:
    """Bind a detailed mesh to a triangle cage and skin it from the cage's current vertices.

    cage_vertices (Nc, 3), cage_faces (Fc, 3) int, detail_vertices (V, 3), detail_normals (V, 3) or
    None; k nearest triangles (≤ 8) per vertex; triangles farther than far_ratio × the nearest
    are dropped; a vertex closer than ``snap`` × cage size to a triangle binds to it alone.
    Attributes: vertex_triangle (V, k) int32 (-1 unused), vertex_weight (V, k) float64 (rows sum
    to 1), vertex_local (V, k, 3) float64 (position in each triangle's rest frame), rest_frames
    (Fc, 3, 4) float64. ``deform`` keeps per-cage scratch: one TriangleCage per driven instance
    (or ``copy_for_instance()`` to share the binding).
    """

    def __init__(self, cage_vertices, cage_faces, detail_vertices, k: int = 4, far_ratio: float = 3.0,
                 detail_normals=None, snap: float = 1e-6):
        cv = np.ascontiguousarray(cage_vertices, np.float64).reshape(-1, 3)
        cf = np.ascontiguousarray(cage_faces, np.int64).reshape(-1, 3)
        dv = np.ascontiguousarray(detail_vertices, np.float64).reshape(-1, 3)
        if not 1 <= k <= 8:
            raise BuildError(f"k must be in 1..8, got {k}", section="cage")
        if len(cf) == 0:
            raise BuildError("cage has no triangles", section="cage faces")
        if cf.min() < 0 or cf.max() >= len(cv):
            raise BuildError(f"cage face indices must be in [0, {len(cv)})", section="cage faces")
        if not (np.isfinite(cv).all() and np.isfinite(dv).all()):
            raise BuildError("non-finite cage or detail vertex", section="cage")
        self.num_cage_vertices = len(cv)
        self.cage_faces = cf
        area2 = np.linalg.norm(np.cross(cv[cf[:, 1]] - cv[cf[:, 0]], cv[cf[:, 2]] - cv[cf[:, 0]]), axis=1)
        lo = cv.min(0)
        hi = cv.max(0)
        size = float(np.linalg.norm(hi - lo)) or 1.0
        usable = area2 > 1e-12 * size * size  # degenerate triangles have no frame
        if not usable.any():
            raise BuildError("every cage triangle is degenerate", section="cage faces")
        self.rest_frames = np.empty((len(cf), 3, 4))
        _frames(cv, cf, self.rest_frames)
        # grid: about two cells per triangle, cubic cells over the cage's bounding box
        ext = np.maximum(hi - lo, 1e-9 * size)
        h = float((np.prod(ext) / (2.0 * usable.sum())) ** (1 / 3))
        h = max(h, float(ext.max()) / 256)
        dims = np.minimum(np.ceil(ext / h).astype(np.int64) + 1, 512)
        start, tris = _grid(cv, cf, usable, lo, h, dims)
        V = len(dv)
        self.vertex_triangle = np.empty((V, k), np.int32)
        self.vertex_weight = np.empty((V, k), np.float64)
        self.vertex_local = np.zeros((V, k, 3))
        _bind(dv, cv, cf, start, tris, lo, h, dims, k, float(far_ratio), snap * size, self.rest_frames,
              self.vertex_triangle, self.vertex_weight, self.vertex_local)
        self.detail_normal = None
        if detail_normals is not None:
            n = np.asarray(detail_normals, np.float64).reshape(V, 3)
            ln = np.linalg.norm(n, axis=1, keepdims=True)
            self.detail_normal = np.where(ln > 1e-12, n / np.where(ln > 1e-12, ln, 1), (0.0, 1.0, 0.0))
        for a in (self.vertex_triangle, self.vertex_weight, self.vertex_local, self.rest_frames, self.cage_faces):
            a.flags.writeable = False
        self.num_vertices = V
        self._alloc()

    def _alloc(self):
        Fc = len(self.cage_faces)
        self.frames = np.empty((Fc, 3, 4))
        self._delta = np.empty((Fc, 3, 3))
        self._no_n = np.zeros((1, 3))

    def copy_for_instance(self) -> "TriangleCage":
        """A cage sharing this binding (read-only arrays) with its own per-frame scratch."""
        c = object.__new__(TriangleCage)
        c.__dict__.update(self.__dict__)
        c._alloc()
        return c

    def deform(self, cage_vertices_now, out_position, out_normal=None):
        """cage_vertices_now (Nc, 3) float64|float32 → out_position (V, 3) (and out_normal (V, 3),
        unit, when the cage was built with detail_normals). Allocates nothing for float64 input."""
        cv = np.asarray(cage_vertices_now, np.float64)
        want_n = out_normal is not None
        if want_n and self.detail_normal is None:
            raise ValueError("deform: normals requested but the cage was built without detail_normals")
        _update(cv, self.cage_faces, self.rest_frames, self.frames, self._delta, want_n)
        _deform(self.frames, self._delta, self.vertex_triangle, self.vertex_weight, self.vertex_local,
                self.detail_normal if want_n else self._no_n, want_n, out_position,
                out_normal if want_n else out_position)
