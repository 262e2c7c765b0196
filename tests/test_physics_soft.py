"""Soft bodies on Bullet: the seed-000 plush example (pressurised cage on the floor driving a
detailed mesh) and soft-body anchors; plus a check that stepping releases the GIL."""
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import mmdkit
from mmdkit.physics import MMDPhysics, _bullet

ROOT = Path(__file__).resolve().parents[1]


def test_plush_example_lands_squashes_and_settles():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "plush.py"), "--frames", "90"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "settled at frame" in out, out
    line = next(l for l in out.splitlines() if l.startswith("first contact"))
    # min centre height below the rest radius 4 (it squashed), final above the floor
    mins = float(line.split("min centre height ")[1].split()[0])
    final = float(line.split("final ")[1].split(";")[0])
    assert 1.5 < mins < 3.9 and 2.5 < final < 4.5, line
    last = next(l for l in out.splitlines() if l.startswith("detail lowest"))
    detail_low = float(last.split()[4].rstrip(","))
    assert -0.5 < detail_low < 1.0, last  # the detailed mesh followed the cage down to the floor


def test_soft_body_anchored_to_kinematic_body_hangs():
    z = np.zeros(1, np.float32)
    tf = np.eye(4, dtype=np.float32)[None].copy()
    tf[0, 1, 3] = 10
    w = _bullet.World(np.array([1], np.int32), np.array([[0.5, 0.5, 0.5]], np.float32), z + 1, z, z, z + 0.5, z,
                      np.array([1], np.int32), np.array([0xFFFF], np.int32), np.array([True]), tf, False,
                      np.array([0, -98, 0], np.float32), 10, True)
    # a vertical strip of 2 triangles x 4 rows below the box
    v = np.array([[x, 10 - 2 * r, 0] for r in range(5) for x in (0.0, 1.0)], np.float32)
    f = np.array([[2 * r, 2 * r + 1, 2 * r + 2] for r in range(4)] + [[2 * r + 1, 2 * r + 3, 2 * r + 2] for r in range(4)],
                 np.int32)
    s = w.add_soft_body(v, f, mass=1.0, linear_stiffness=0.9)
    w.anchor_soft_node(s, 0, 0)
    w.anchor_soft_node(s, 1, 0)
    for _ in range(60):
        w.step(1 / 60, 10, 1 / 120, 1e4)
    p = w.soft_node_positions(s)
    assert np.isfinite(p).all()
    assert np.allclose(p[:2, 1], 10, atol=0.2)  # anchored nodes stay at the body
    assert p[-1, 1] < 4.0 and p[-1, 1] > -20  # the rest hangs, stretched but attached


def test_step_releases_the_gil(assets):
    model = mmdkit.load(str(assets / "gene" / "Gene.pmx"))
    phys = MMDPhysics(model)
    bw = np.tile(np.eye(4, dtype=np.float32), (model.num_bones, 1, 1))
    bw[:, :3, 3] = model.bone_position
    phys.reset(bw, 0)
    done = threading.Event()

    def long_step():
        phys.world.step(2.0, 240, 1 / 120, 1e4)  # one C++ call of 240 substeps
        done.set()

    th = threading.Thread(target=long_step)
    ticks = 0
    th.start()
    t0 = time.perf_counter()
    while not done.is_set():
        ticks += 1  # Python runs while Bullet steps: the GIL is free
    th.join()
    elapsed = time.perf_counter() - t0
    assert elapsed > 0.01
    assert ticks > 1000, (ticks, elapsed)


def test_pmx21_soft_body_from_model_records():
    import dataclasses

    from mmdkit.formats.pmx import SoftBodyRecord
    from mmdkit.model.builder import ModelBuilder

    mb = ModelBuilder("cloth")
    mb.add_bone("root", (0, 10, 0))
    mb.add_material("cloth")
    pos = np.array([[x, 10.0, z] for z in range(4) for x in range(4)], np.float32)
    faces = []
    for z in range(3):
        for x in range(3):
            a = z * 4 + x
            faces += [[a, a + 1, a + 4], [a + 1, a + 5, a + 4]]
    mb.add_mesh(0, pos, np.tile([0, 1, 0], (16, 1)), np.zeros((16, 2)), np.array(faces), np.zeros(16, int))
    mb.add_rigid_body("holder", 0, "box", (0.3, 0.3, 0.3), (0, 10, 0), mode=0)
    model = mb.build()
    cfg = (0.0, 0.01, 0.0, 0.0, 0.0, 1.0, 0.2, 0.0, 1.0, 0.1, 1.0, 0.7)
    rec = SoftBodyRecord(name="cloth", shape=0, material=0, total_mass=1.0, collision_margin=0.05,
                         config=cfg, iteration=(0, 4, 0, 4), material_coef=(0.9, 0.9, 0.9), flags=1,
                         b_link_distance=2, anchors=((0, 0, 0),), pins=(3,))
    model = dataclasses.replace(model, soft_bodies=(rec,))
    phys = MMDPhysics(model)
    assert len(phys.soft_body_vertex) == 1 and phys.soft_body_vertex[0].tolist() == list(range(16))
    bw = np.tile(np.eye(4, dtype=np.float32), (1, 1, 1))
    bw[0, :3, 3] = (0, 10, 0)
    phys.reset(bw, 0)
    for _ in range(30):
        phys.step(1 / 30, bw)
    p = phys.soft_body_positions(0)
    assert p.shape == (16, 3) and np.isfinite(p).all()
    assert abs(p[0, 1] - 10) < 0.3 and abs(p[3, 1] - 10) < 1e-4  # anchored and pinned corners stay
    assert p[15, 1] < 8.0  # the free corner fell


SOFT_HANG = """
import dataclasses, sys
import numpy as np
from mmdkit.formats.pmx import SoftBodyRecord
from mmdkit.model.builder import ModelBuilder
from mmdkit.physics import MMDPhysics
mb = ModelBuilder("cloth")
mb.add_bone("root", (0, 10, 0))
mb.add_material("cloth")
pos = np.array([[x, 10.0, z] for z in range(2) for x in range(2)], np.float32)
mb.add_mesh(0, pos, np.tile([0, 1, 0], (4, 1)), np.zeros((4, 2)), np.array([[0, 1, 2], [1, 3, 2]]), np.zeros(4, int))
big = 2 ** 31 - 1
rec = SoftBodyRecord(name="cloth", shape=0, material=0, total_mass=1.0, collision_margin=0.05,
                     config=(0.0, 0.01, 0.0, 0.0, 0.0, 1.0, 0.2, 0.0, 1.0, 0.1, 1.0, 0.7),
                     iteration=(big, big, big, big), material_coef=(0.9, 0.9, 0.9))
phys = MMDPhysics(dataclasses.replace(mb.build(), soft_bodies=(rec,)))
bw = np.tile(np.eye(4, dtype=np.float32), (1, 1, 1))
phys.step(1 / 30, bw)
print(" | ".join(phys.warnings))
"""


def test_soft_body_with_huge_iteration_counts_steps_at_once():
    """A PMX 2.1 soft body asking for 2**31 - 1 solver iterations hung the first step; they are
    clamped to SOFT_BODY_MAX_ITERATIONS with a warning."""
    from mmdkit.physics.soft import SOFT_BODY_MAX_ITERATIONS

    r = subprocess.run([sys.executable, "-c", SOFT_HANG], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"clamped to [0, {SOFT_BODY_MAX_ITERATIONS}]" in r.stdout
