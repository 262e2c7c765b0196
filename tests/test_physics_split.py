"""One character's bodies in several Bullet worlds (``setup.body_partition``), stepped side by side:
what goes where, and that the motion does not depend on how many threads step the worlds."""
import numpy as np
import pytest

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.model.builder import ModelBuilder
from mmdkit.physics import MMDPhysics
from mmdkit.physics.setup import PHYSICS_WORLDS, body_partition, body_setup, joint_setup
from mmdkit.runtime import Character


@pytest.fixture(scope="module")
def gene(assets):
    return mmdkit.load(str(assets / "gene" / "Gene.pmx"))


def meets(bodies, joints):
    g, m = bodies.body_group_bit, bodies.body_collide_mask
    hit = ((g[:, None] & m[None, :]) != 0) & ((g[None, :] & m[:, None]) != 0)
    hit[joints.joint_body_a, joints.joint_body_b] = True
    hit[joints.joint_body_b, joints.joint_body_a] = True
    np.fill_diagonal(hit, False)
    return hit


def test_gene_splits_into_worlds_whose_dynamic_bodies_never_meet(gene):
    bodies, joints = body_setup(gene), joint_setup(gene)
    parts = body_partition(bodies, joints, PHYSICS_WORLDS)
    assert len(parts) == PHYSICS_WORLDS == 2
    dyn = bodies.body_mode != 0
    owner = np.full(len(dyn), -1)
    for w, p in enumerate(parts):
        assert np.all(np.diff(p) > 0)  # ascending: Bullet sees the model's order
        assert np.all(owner[p[dyn[p]]] == -1)  # a dynamic body in one world only
        owner[p[dyn[p]]] = w
    assert np.all(owner[dyn] >= 0)
    hit = meets(bodies, joints)
    a, b = np.nonzero(hit & dyn[:, None] & dyn[None, :])
    assert np.all(owner[a] == owner[b])  # no joint or collision pair across worlds
    for w, p in enumerate(parts):  # every kinematic body a world's dynamic bodies can meet is in it
        needed = np.nonzero(~dyn & hit[:, owner == w].any(1))[0]
        assert np.isin(needed, p).all()
    sizes = [int(dyn[p].sum()) for p in parts]
    assert min(sizes) >= 0.4 * dyn.sum()  # dealt out evenly (Gene: 31 and 31)


def test_one_set_stays_one_world():
    mb = ModelBuilder("rope")
    mb.add_bone("root", (0, 0, 0))
    for i in range(3):
        mb.add_bone(f"b{i}", (0, 10 - 2 * i, 0), parent=i)
        mb.add_rigid_body(f"b{i}", i + 1, "sphere", (0.5, 0, 0), (0, 10 - 2 * i, 0), mass=1.0, mode=1)
    mb.add_joint("j0", 0, 1, (0, 9, 0))
    mb.add_joint("j1", 1, 2, (0, 7, 0))
    model = mb.build()
    assert [list(p) for p in body_partition(body_setup(model), joint_setup(model), 2)] == [[0, 1, 2]]
    phys = MMDPhysics(model, threads=2)
    assert phys.threads == 1 and len(phys._parts) == 1


def test_threads_do_not_change_the_motion(gene, assets):
    motion = mmdkit.load(str(assets / "wavefile" / "wavefile_v2.vmd"))
    one = Character(gene, motion, MMDPhysics(gene, threads=1))
    two = Character(gene, motion, MMDPhysics(gene, threads=2))
    assert two.simulation.world.threads == 2
    moved = 0.0
    for f in range(0, 90):
        one.update(float(f))
        two.update(float(f))
        # the same worlds stepped by the same code, one after the other or side by side: the same bits
        assert np.array_equal(one.state.bone_world, two.state.bone_world), f
        moved = max(moved, float(np.abs(one.state.bone_world[:, :3, 3] - gene.bone_position).max()))
    assert np.array_equal(one.simulation.world.body_world, two.simulation.world.body_world)
    assert np.isfinite(two.simulation.world.body_world).all() and moved > 1.0
    two.simulation.world.close()


def test_threads_below_one_is_an_option_error(gene):
    with pytest.raises(OptionError, match="threads"):
        MMDPhysics(gene, threads=0)
