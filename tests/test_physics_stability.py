"""Long chains stay together through a real dance (issue #12 item 3): mokou_B's 21-link side hair,
pinned to the head at both ends, pulled apart around frames 1706–1720 of wavefile_v2 with Bullet 3's
6-DOF joint solving; MMD's (Bullet 2.75's, ``joint_solver='mmd'``) keeps every visible joint within
reach."""

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.physics import MMDPhysics
from mmdkit.runtime import Character


def test_mokou_b_side_hair_holds_through_frames_1700_to_1720(assets):
    model = mmdkit.load(assets / "mokou" / "mokou_B.pmd")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    phys = MMDPhysics(model)
    ch = Character(model, motion, world=phys)
    visible = phys.visible_joint_mask(model)
    side_hair = np.array(["横髪Ex" in model.joint_name[j] for j in phys.joint_index]) & visible
    assert side_hair.sum() == 42  # both sides' chains, Ex01..Ex21
    worst = 0.0
    for f in range(1721):
        ch.update(f)
        now, reach = phys.joint_reach()
        worst = max(worst, float((now / reach)[visible].max()))
        if f >= 1700:
            assert np.isfinite(ch.bone_world).all()
            assert (now <= reach)[side_hair].all(), (f, (now / reach)[side_hair].max())
    assert worst <= 1.0, worst
    assert phys.blowup_resets == 0


def test_joint_solver_is_checked():
    from mmdkit.model.builder import ModelBuilder

    mb = ModelBuilder("one")
    mb.add_bone("root", (0, 0, 0))
    mb.add_rigid_body("b", 0, "sphere", (1, 0, 0), (0, 0, 0), mode=1)
    with pytest.raises(OptionError, match="joint_solver"):
        MMDPhysics(mb.build(), joint_solver="ode")
