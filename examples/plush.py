"""Plush: a low-poly closed cage simulated as a pressurised Bullet soft body drives a
detailed mesh (a subdivided sphere with two ears, ~15k vertices) through a triangle cage.

    python3 examples/plush.py [--frames 180] [--out plush_stats.txt]

Prints the plush's height over time, its cage volume relative to rest, and when it settled.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from mmdkit.physics import _bullet


def icosphere(level: int):
    """Unit icosphere → vertices (N,3) float64, faces (F,3) int32 (outward, counter-clockwise)."""
    t = (1 + 5 ** 0.5) / 2
    v = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
         [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    f = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
         [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5],
         [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    v = [np.array(p, float) / np.linalg.norm(p) for p in v]
    for _ in range(level):
        mid = {}

        def m(a, b):
            key = (min(a, b), max(a, b))
            if key not in mid:
                p = v[a] + v[b]
                v.append(p / np.linalg.norm(p))
                mid[key] = len(v) - 1
            return mid[key]

        nf = []
        for a, b, c in f:
            ab, bc, ca = m(a, b), m(b, c), m(c, a)
            nf += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        f = nf
    return np.array(v), np.array(f, np.int32)


EAR_DIRS = np.array([[0.55, 0.83, 0.0], [-0.55, 0.83, 0.0]])


def detailed_plush(radius: float):
    """Body sphere (level 5) + two ear spheres (level 4) → vertices (V,3), faces (F,3)."""
    bv, bf = icosphere(5)
    verts, faces = [bv * radius], [bf]
    n = len(bv)
    for d in EAR_DIRS:
        ev, ef = icosphere(4)
        ev = ev * np.array([0.38, 0.38, 0.18]) * radius + d / np.linalg.norm(d) * radius * 1.0
        verts.append(ev)
        faces.append(ef + n)
        n += len(ev)
    return np.concatenate(verts), np.concatenate(faces)


def cage_for(radius: float):
    """Closed low-poly cage (icosphere level 2, 162 vertices) bulged over the ears."""
    cv, cf = icosphere(2)
    r = np.full(len(cv), 1.12)
    for d in EAR_DIRS:
        d = d / np.linalg.norm(d)
        r += 0.45 * np.clip((cv @ d - 0.8) / 0.2, 0, 1)
    return cv * r[:, None] * radius, cf


def volume(v, f):
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def _open_video(a, rest, faces):
    """A per-frame callback drawing the plush (vertex offsets from rest) on a floor."""
    from mmdkit.model.builder import ModelBuilder
    from mmdkit.render.camera import auto_view, perspective
    from mmdkit.render.gl import Renderer
    from mmdkit.render.video import open_writer

    mb = ModelBuilder("plush")
    root = mb.add_bone("root", (0, 0, 0))
    fur = mb.add_material("fur", diffuse=(0.85, 0.6, 0.35, 1), ambient=(0.4, 0.28, 0.16), toon=1, edge_size=0.6)
    floor = mb.add_material("floor", diffuse=(0.7, 0.75, 0.8, 1), ambient=(0.35, 0.37, 0.4), edge=False,
                            double_sided=True)
    n = rest - rest.mean(0)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    mb.add_mesh(fur, rest, n, np.zeros((len(rest), 2)), np.asarray(faces), np.full(len(rest), root))
    s = 30.0
    mb.add_mesh(floor, [[-s, 0, -s], [s, 0, -s], [s, 0, s], [-s, 0, s]], [[0, 1, 0]] * 4, [[0, 0]] * 4,
                [[0, 1, 2], [0, 2, 3]], [root] * 4)
    model = mb.build()
    size = tuple(int(x) for x in a.size.split("x"))
    ren = Renderer(model, size, 4)
    writer = open_writer(a.video, size, 30.0)
    view, _ = auto_view((-9, 0, -9), (9, 24, 9), 30, size[0] / size[1], yaw_deg=25)
    proj = perspective(30, size[0] / size[1])
    eye = np.eye(4, dtype=np.float32)[None]
    offset = np.zeros((model.num_vertices, 3), np.float32)

    def draw(detail_now):
        if detail_now is None:
            writer.close()
            print(f"wrote {a.video}")
            return
        offset[: len(rest)] = detail_now - rest
        writer.write(ren.render(eye, view, proj, vertex_offset=offset, eye_distance=45.0))

    return draw


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--frames", type=int, default=180)
    ap.add_argument("--radius", type=float, default=4.0)
    ap.add_argument("--height", type=float, default=20.0)
    ap.add_argument("--pressure", type=float, default=40.0)
    ap.add_argument("--stiffness", type=float, default=0.2)
    ap.add_argument("--video", help="also render the detailed mesh to this .mp4 (or a folder of PNGs)")
    ap.add_argument("--size", default="480x360", help="video size WIDTHxHEIGHT")
    a = ap.parse_args()
    fps = 30.0

    detail_v, detail_f = detailed_plush(a.radius)
    cage_v, cage_f = cage_for(a.radius)
    lift = np.array([0, a.height, 0])
    print(f"detail mesh {len(detail_v)} vertices / {len(detail_f)} faces; cage {len(cage_v)} vertices / {len(cage_f)} faces")

    z = np.zeros(0, np.float32)
    world = _bullet.World(np.zeros(0, np.int32), np.zeros((0, 3), np.float32), z, z, z, z, z, np.zeros(0, np.int32),
                          np.zeros(0, np.int32), np.zeros(0, bool), np.zeros((0, 4, 4), np.float32), True,
                          np.array([0, -98, 0], np.float32), 10, True)
    soft = world.add_soft_body((cage_v + lift).astype(np.float32), cage_f, mass=2.0, pressure=a.pressure,
                               linear_stiffness=a.stiffness, damping=0.02, margin=0.1, friction=0.8,
                               iterations=8, bending=True)
    rest_volume = volume(cage_v, cage_f)

    cage = None
    try:
        from mmdkit.skinning.cage import TriangleCage
        t0 = time.perf_counter()
        cage = TriangleCage(cage_v + lift, cage_f, detail_v + lift)
        print(f"triangle cage bound in {time.perf_counter() - t0:.2f} s")
    except ImportError:
        print("mmdkit.skinning.cage not available: simulating the cage only")
    detail_now = np.empty((len(detail_v), 3))

    video = _open_video(a, detail_v + lift, detail_f) if a.video else None

    rows = []
    settled = None
    prev = None
    sim_t = skin_t = 0.0
    for f in range(a.frames):
        t0 = time.perf_counter()
        world.step(1 / fps, 10, 1 / 120, 1e4)
        nodes = world.soft_node_positions(soft).astype(np.float64)
        t1 = time.perf_counter()
        if cage is not None:
            cage.deform(nodes, detail_now)
        t2 = time.perf_counter()
        sim_t += t1 - t0
        skin_t += t2 - t1
        c = nodes.mean(0)
        vol = volume(nodes, cage_f) / rest_volume
        ext = nodes.max(0) - nodes.min(0)
        squash = ext[1] / max(ext[0], ext[2])
        speed = 0.0 if prev is None else float(np.linalg.norm(c - prev) * fps)
        prev = c
        if settled is None and f > 10 and speed < 0.5 and nodes[:, 1].min() < 1.0:
            settled = f
        elif settled is not None and speed > 1.0:
            settled = None
        rows.append((f, c[1], nodes[:, 1].min(), vol, squash, speed,
                     detail_now[:, 1].min() if cage is not None else np.nan))
        assert np.isfinite(nodes).all(), "soft body blew up"
        if video is not None and cage is not None:
            video(detail_now)

    if video is not None:
        video(None)
    print(" frame  centre_y  lowest_y  volume  height/width  speed   detail_lowest_y")
    for r in rows[:: max(1, len(rows) // 18)]:
        print(f"{r[0]:6d} {r[1]:9.3f} {r[2]:9.3f} {r[3]:7.3f} {r[4]:13.3f} {r[5]:7.2f} {r[6]:12.3f}")
    ys = np.array([r[1] for r in rows])
    print(f"first contact frame {int(np.argmax([r[2] < 0.5 for r in rows]))}, min centre height "
          f"{ys.min():.2f} (rest radius {a.radius}), final {ys[-1]:.2f}; volume ratio final {rows[-1][3]:.3f}, "
          f"min {min(r[3] for r in rows):.3f}; max squash {min(r[4] for r in rows):.3f}")
    print(f"settled at frame {settled}" if settled is not None else "not settled yet")
    print(f"soft body {sim_t / a.frames * 1e3:.2f} ms/frame, cage deform of {len(detail_v)} vertices "
          f"{skin_t / a.frames * 1e3:.2f} ms/frame")
    if cage is not None:
        # the detailed mesh follows: its lowest point stays near the cage's
        print(f"detail lowest y final {detail_now[:, 1].min():.3f}, cage lowest {rows[-1][2]:.3f}")


if __name__ == "__main__":
    main()
