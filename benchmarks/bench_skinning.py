"""Skinning benchmarks: CPU kernels (Gene, 200k synthetic), memory-bandwidth floor, palette
batches, triangle cage build/deform, bone boxes.

In: the real assets (../shared/assets or $MMDKIT_ASSETS). Out: printed medians.
Run: python3 benchmarks/bench_skinning.py [--repeat N]   (one core: NUMBA_NUM_THREADS=1 taskset -c 1 ...)
     python3 benchmarks/bench_skinning.py --gpu FRAMES [--poses FILE.npz]   (GPU skinning and 1080p
         frames, 1/10/100 characters; --poses keeps the CPU-made poses in FILE and reads them back
         when it exists, so a GPU machine need not compile the posing kernels)
Targets: CPU skinning ≤ 0.5x saba on one core (benchmarks/compare_saba.py) and ≤ 2x the plain copy of
the bytes it touches; Gene palette at P=13 ≪ 1 s; cage 100k vertices × 2k triangles ≈ 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.skinning.bounds import BoneBoxes
from mmdkit.skinning.cage import TriangleCage
from mmdkit.skinning.cpu import CpuSkinner
from mmdkit.skinning.palette import build_palette_batches

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test suite's pose helpers
from skinning_reference import random_rigid, rotation_matrices, simple_fk  # noqa: E402

ASSETS = Path(os.environ.get("MMDKIT_ASSETS", Path(__file__).resolve().parents[2] / "shared" / "assets"))


def median_ms(fn, repeat, warm=3):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts), min(ts)


def paired_ms(fn_a, fn_b, repeat, warm=3):
    """(median, min) ms of fn_a and of fn_b called alternately, so that both see the same machine
    (this host's speed drifts between runs; a ratio of two separate loops inherits that drift)."""
    for _ in range(warm):
        fn_a()
        fn_b()
    ta, tb = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        fn_a()
        t1 = time.perf_counter()
        fn_b()
        t2 = time.perf_counter()
        ta.append((t1 - t) * 1e3)
        tb.append((t2 - t1) * 1e3)
    return (statistics.median(ta), min(ta)), (statistics.median(tb), min(tb))


def bytes_per_frame(sk, offset):
    """Bytes one ``skin`` call must touch: the grouped tables it reads, the morph offsets of the
    morphable rows, and the two (V, 3) float32 outputs it writes."""
    morphed = sum(int(sk.group_start[g + 1] - sk.group_start[g]) for g in range(1, len(sk.group_start) - 1, 2))
    read = sum(a.nbytes for a in sk._tables) + (morphed * 12 if offset is not None else 0)
    return read, 2 * sk.num_vertices * 12


def copy_floor(read, write):
    """A plain copy of ``read`` bytes (numpy) plus filling the ``write`` output bytes: memory
    traffic at least that of skinning, no arithmetic (a callable)."""
    src = np.ones(read, np.uint8)
    dst = np.empty_like(src)
    out = np.empty(write, np.uint8)

    def run():
        np.copyto(dst, src)
        out.fill(0)
    return run


def bench_skin(label, sk, S, repeat, offset=None):
    V = sk.num_vertices
    p = np.empty((V, 3), np.float32)
    n = np.empty((V, 3), np.float32)
    rows = []
    for par in (False, True):
        med, mn = median_ms(lambda: sk.skin(S, offset, p, n, parallel=par), repeat)
        rows.append((par, med, mn))
        print(f"  {label:<34} {'2 threads' if par else '1 thread ':<10} median {med:7.3f} ms  min {mn:7.3f} ms"
              f"  {V / (med * 1e-3) / 1e6:7.1f} M vertices/s")
    return rows


def synthetic_model(V, B, rng):
    """A mesh shaped like Gene's deform mix (47% BDEF1, 36% BDEF2, 17% BDEF4), vertices spatially
    coherent (nearby vertices share bones), as real models are."""
    from mmdkit.model.builder import ModelBuilder

    mb = ModelBuilder(name="synthetic")
    for b in range(B):
        mb.add_bone(f"b{b}", rng.normal(size=3), b - 1)
    mat = mb.add_material("m")
    base = np.sort(rng.integers(0, B - 3, V))
    bi = np.stack([base, base + 1, base + 2, base + 3], 1).astype(np.int32)
    deform = rng.choice([0, 1, 2], V, p=[0.47, 0.36, 0.17]).astype(np.uint8)
    bw = rng.uniform(0.1, 1, (V, 4)).astype(np.float32)
    bw /= bw.sum(1, keepdims=True)
    bw[deform == 0] = (1, 0, 0, 0)
    bw[deform == 1, 2:] = 0
    bw[deform == 1, 1] = 1 - bw[deform == 1, 0]
    pos = rng.normal(size=(V, 3))
    nrm = rng.normal(size=(V, 3))
    mb.add_mesh(mat, pos, nrm, np.zeros((V, 2)), np.arange(V - V % 3).reshape(-1, 3), bi, bw, deform=deform)
    return mb.build()


def gpu_poses(model, count: int, path: str | None):
    """(count, B, 4, 4) bone_skin and (count, V, 3) vertex_offset float32 of Gene_light playing
    wavefile_v2 frames 0..count-1, physics off; read from ``path`` when it holds as many, else
    posed here (and written there when a path is given)."""
    if path and os.path.exists(path):
        with np.load(path) as z:
            if len(z["bone_skin"]) >= count:
                return z["bone_skin"][:count], z["vertex_offset"][:count]
    from mmdkit.runtime import Character

    ch = Character(model, mmdkit.load(ASSETS / "wavefile" / "wavefile_v2.vmd"), None)
    poses, morphs = [], []
    for f in range(count):
        ch.update(f)
        poses.append(ch.bone_skin.copy())
        morphs.append(ch.vertex_offset.copy())
    poses, morphs = np.stack(poses), np.stack(morphs)
    if path:
        np.savez_compressed(path, bone_skin=poses, vertex_offset=morphs)
    return poses, morphs


def bench_gpu(frames: int, size=(1920, 1080), crowds=(1, 10, 100), poses_file: str | None = None):
    """GPU skinning (one compute dispatch for the whole crowd) and whole-frame rendering
    (4x MSAA, readback included) of 1, 10, 100 Gene_light characters at 1080p, physics off
    (poses made on the CPU beforehand, see ``gpu_poses``)."""
    from mmdkit.render.camera import auto_view, perspective
    from mmdkit.render.geometry import morph_rows
    from mmdkit.render.gl import Renderer
    from mmdkit.render.pipeline import crowd_offsets

    model = mmdkit.load(ASSETS / "gene" / "Gene_light.pmx")
    poses, morphs = gpu_poses(model, min(frames, 30) + 7 * max(crowds), poses_file)
    V = model.num_vertices
    lo, hi = model.vertex_position.min(0), model.vertex_position.max(0)
    for n in crowds:
        ren = Renderer(model, size, 4, instances=n)
        off = crowd_offsets(n, float(max(hi[0] - lo[0], hi[2] - lo[2]) * 1.3 + 2.0))
        ren.set_instance_offsets(off)
        view, dist = auto_view(lo + off.min(0) - 2, hi + off.max(0) + 2, 30.0, size[0] / size[1])
        proj = perspective(30.0, size[0] / size[1], far=max(2000.0, 3 * dist))
        K = min(frames, 30)  # distinct frames, cycled
        skins = [np.stack([poses[f + 7 * k] for k in range(n)]) for f in range(K)]
        rows = morph_rows(model)[0]  # what the pipeline hands the renderer: the rows morphs reach
        voffs = [np.stack([morphs[f + 7 * k][rows] for k in range(n)]) for f in range(K)]
        geo, ctx = ren.geometry, ren.ctx
        ren.render(skins[0], view, proj, vertex_offset=voffs[0], eye_distance=dist)  # compile, warm
        ctx.finish()
        if n == crowds[0]:
            print(f"  OpenGL: {ctx.info['GL_RENDERER']} ({ctx.info['GL_VERSION']})")
        t = time.perf_counter()
        for f in range(frames):
            geo.upload(skins[f % K], voffs[f % K])
            geo.skin()
        ctx.finish()
        skin_ms = (time.perf_counter() - t) / frames * 1e3
        t = time.perf_counter()
        for f in range(frames):
            geo.skin()
        ctx.finish()
        compute_ms = (time.perf_counter() - t) / frames * 1e3
        t = time.perf_counter()
        for f in range(frames):
            geo.upload(skins[f % K], voffs[f % K])
        ctx.finish()
        upload_ms = (time.perf_counter() - t) / frames * 1e3
        t = time.perf_counter()
        for f in range(frames):
            ren.render(skins[f % K], view, proj, vertex_offset=voffs[f % K], eye_distance=dist)
        frame_ms = (time.perf_counter() - t) / frames * 1e3
        print(f"  {n:3d} characters ({n * V:,} vertices): GPU skinning (upload + compute) "
              f"{skin_ms:7.3f} ms/frame = {n * V / (skin_ms * 1e-3) / 1e6:8.1f} M vertices/s (compute "
              f"alone {compute_ms:7.3f} ms = {n * V / (compute_ms * 1e-3) / 1e6:8.1f} M vertices/s; upload alone "
              f"{upload_ms:7.3f} ms); whole frame "
              f"{size[0]}x{size[1]} 4x MSAA with readback {frame_ms:7.2f} ms = {1e3 / frame_ms:6.1f} frames/s", flush=True)
        ren.release()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--gpu", type=int, default=0, metavar="FRAMES",
                    help="only the GPU crowd measurement (1, 10, 100 characters at 1080p) over FRAMES frames")
    ap.add_argument("--poses", metavar="FILE.npz", help="with --gpu: the CPU-made poses, kept in / read from FILE")
    ap.add_argument("--crowds", default="1,10,100", help="with --gpu: crowd sizes, comma-separated")
    ap.add_argument("--size", default="1920x1080", help="with --gpu: frame size WxH")
    a = ap.parse_args()
    if a.gpu:
        bench_gpu(a.gpu, tuple(int(x) for x in a.size.split("x")), tuple(int(c) for c in a.crowds.split(",")),
                  a.poses)
        return
    rng = np.random.default_rng(0)

    gene = mmdkit.load(ASSETS / "gene/Gene.pmx")
    print(f"Gene: {gene.num_vertices} vertices, {gene.num_bones} bones, deform counts "
          f"{np.bincount(gene.vertex_deform, minlength=5).tolist()} (BDEF1, BDEF2, BDEF4, SDEF, QDEF)")
    t = time.perf_counter()
    sk = CpuSkinner(gene)
    print(f"  precompute CpuSkinner: {(time.perf_counter() - t) * 1e3:.1f} ms")
    S = random_rigid(gene.num_bones, rng, angle=0.6, spread=2)
    bench_skin("positions+normals", sk, S, a.repeat)
    off = np.zeros((gene.num_vertices, 3), np.float32)  # offsets where Gene's vertex morphs reach
    off[gene.vertex_morph_vertex] = rng.normal(size=(len(gene.vertex_morph_vertex), 3)) * 0.01
    p1 = np.empty((gene.num_vertices, 3), np.float32)
    n1 = np.empty_like(p1)
    bench_skin("positions+normals + vertex morph", sk, S, a.repeat, off)
    for label, o in (("no morph", None), ("vertex morph", off)):
        read, write = bytes_per_frame(sk, o)
        (k_med, k_min), (fl_med, fl_min) = paired_ms(lambda: sk.skin(S, o, p1, n1, parallel=False),
                                                     copy_floor(read, write), a.repeat)
        print(f"  1 thread, {label}: reads {read / 1e6:.2f} MB + writes {write / 1e6:.2f} MB; plain copy of that "
              f"{fl_med:.3f} ms (min {fl_min:.3f}); kernel {k_med:.3f} ms (min {k_min:.3f}), called alternately = "
              f"{k_med / fl_med:.2f}x the copy floor (median), {k_min / fl_min:.2f}x (min)")
    t_p = median_ms(lambda: sk.skin(S, off, p1, None, parallel=False), a.repeat)[0]
    print(f"  positions only (out_normal=None), 1 thread: {t_p:.3f} ms")

    V = 200_000
    syn = synthetic_model(V, 200, rng)
    sks = CpuSkinner(syn)
    print(f"Synthetic: {V} vertices, 200 bones")
    Ss = random_rigid(200, rng, angle=0.6)
    bench_skin("positions+normals", sks, Ss, max(30, a.repeat // 5))
    read, write = bytes_per_frame(sks, None)
    ps, ns = np.empty((V, 3), np.float32), np.empty((V, 3), np.float32)
    (k_med, _), (fl, _) = paired_ms(lambda: sks.skin(Ss, None, ps, ns, parallel=False), copy_floor(read, write), 50)
    print(f"  reads {read / 1e6:.1f} MB + writes {write / 1e6:.1f} MB; plain copy {fl:.3f} ms; kernel (1 thread) "
          f"{k_med:.3f} ms, called alternately = {k_med / fl:.2f}x the copy floor")

    print("Palette batches (Gene):")
    for P in (13, 36):
        for keep in (False, True):
            build_palette_batches(gene, P, keep_order=keep)  # numba cache warm
            med, _ = median_ms(lambda: build_palette_batches(gene, P, keep_order=keep), 10, warm=0)
            pb = build_palette_batches(gene, P, keep_order=keep)
            print(f"  P={P:<3} keep_order={keep!s:<5} batches {pb.num_batches:4d}  duplicated vertices "
                  f"{pb.num_duplicated_vertices:6d}  (V' = {pb.num_vertices})  build {med:.1f} ms")

    print("Triangle cage (100k detail vertices, ~2k-triangle sphere cage):")
    th = np.linspace(0, np.pi, 33)[1:-1]
    ph = np.linspace(0, 2 * np.pi, 32, endpoint=False)
    cv = np.array([[0, 0, 1]] + [[np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)] for t in th for p in ph]
                  + [[0, 0, -1]])
    m = 32
    cf = [[0, 1 + i, 1 + (i + 1) % m] for i in range(m)]
    for r in range(len(th) - 1):
        for i in range(m):
            x, y = 1 + r * m + i, 1 + r * m + (i + 1) % m
            cf += [[x, x + m, y], [y, x + m, y + m]]
    last, base = len(cv) - 1, 1 + (len(th) - 1) * m
    cf += [[base + i, last, base + (i + 1) % m] for i in range(m)]
    cf = np.array(cf)
    dv = rng.normal(size=(100_000, 3))
    dv /= np.linalg.norm(dv, axis=1, keepdims=True)
    dv *= rng.uniform(0.85, 1.15, (len(dv), 1))
    TriangleCage(cv, cf, dv[:10])  # compile / cache load
    t = time.perf_counter()
    cage = TriangleCage(cv, cf, dv, detail_normals=dv)
    build = time.perf_counter() - t
    out_p, out_n = np.empty_like(dv), np.empty_like(dv)
    moved = cv * 1.05
    med, _ = median_ms(lambda: cage.deform(moved, out_p, out_n), 30)
    print(f"  cage {len(cv)} vertices / {len(cf)} triangles: build {build:.3f} s; deform positions+normals "
          f"{med:.2f} ms/frame")

    print("Bone boxes (Gene):")
    boxes = BoneBoxes(gene)
    Wr = simple_fk(gene, rotation_matrices(rng.normal(scale=0.35, size=(gene.num_bones, 3))))
    med, _ = median_ms(lambda: boxes.world_boxes(Wr), a.repeat)
    print(f"  world_boxes: {med * 1e3:.1f} µs/frame; hit_ray: "
          f"{median_ms(lambda: boxes.hit_ray((0, 10, -50), (0, 0, 1)), 200)[0] * 1e3:.1f} µs")
    poses = [simple_fk(gene, rotation_matrices(rng.normal(scale=0.35, size=(gene.num_bones, 3)))) for _ in range(10)]
    print(f"  random poses, strongest-bone boxes: {boxes.gap_report(poses)}")
    print(f"  + every vertex weighted ≥ 0.2:      {BoneBoxes(gene, threshold=0.2).gap_report(poses)}")


if __name__ == "__main__":
    main()
