"""Physics set-up without Bullet, the one "physics unavailable" policy, errors naming the file."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from mmdkit.errors import BuildError
from mmdkit.model.builder import ModelBuilder
from mmdkit.physics import physics_for
from mmdkit.physics.setup import body_setup, joint_setup

NO_BULLET = "import sys; sys.modules['mmdkit.physics._bullet'] = None\n"


def run_without_bullet(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_BULLET + code], capture_output=True, text=True, timeout=120)


def two_body_model(path=""):
    mb = ModelBuilder("pair")
    mb.add_bone("root", (0, 0, 0))
    mb.add_bone("hang", (0, 10, 0), parent=0)
    mb.add_rigid_body("anchor", 0, "box", (1, 1, 1), (0, 0, 0), mode=0)
    mb.add_rigid_body("weight", 1, "sphere", (1, 0, 0), (0, 10, 0), mode=1)
    mb.add_joint("j", 0, 1, (0, 5, 0))
    return dataclasses.replace(mb.build(), source_path=path)


def test_setup_and_soft_import_without_the_extension():
    r = run_without_bullet(
        "import mmdkit.physics.setup, mmdkit.physics.soft\n"
        "from mmdkit.physics import physics_for, euler_to_matrix, DEFAULT_FIXED_STEP\n"
        "try:\n    from mmdkit.physics import MMDPhysics\nexcept ImportError:\n    print('no MMDPhysics')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no MMDPhysics"


def test_physics_for_without_the_extension_is_one_unavailable_error():
    r = run_without_bullet(
        "from mmdkit.model.builder import ModelBuilder\n"
        "mb = ModelBuilder('pair')\n"
        "mb.add_bone('root', (0, 0, 0))\n"
        "mb.add_rigid_body('ball', 0, 'sphere', (1, 0, 0), (0, 0, 0), mode=1)\n"
        "model = mb.build()\n"
        "from mmdkit.errors import UnavailableError\n"
        "from mmdkit.physics import physics_for\n"
        "assert physics_for(model, enabled=False) is None\n"
        "try:\n    physics_for(model)\nexcept UnavailableError as e:\n    print(e)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "physics needs the Bullet extension: run scripts/setup.sh, or use --no-physics"


def test_physics_for_none_when_disabled_or_nothing_to_simulate():
    model = two_body_model()
    assert physics_for(model, enabled=False) is None
    mb = ModelBuilder("bare")
    mb.add_bone("root", (0, 0, 0))
    assert physics_for(mb.build()) is None
    phys = physics_for(model, fixed_step=1 / 60)
    assert phys.num_bodies == 2 and phys.fixed_step == 1 / 60


def test_setup_frames_and_offsets():
    model = two_body_model()
    bodies = body_setup(model)
    assert bodies.drive_body.tolist() == [1] and bodies.drive_bone.tolist() == [1]
    assert bodies.bone_driven.tolist() == [False, True]
    # body frame relative to translate(bone_position): the weight sits on its bone
    assert np.allclose(bodies.body_offset[1], np.eye(4))
    assert np.allclose(bodies.body_offset[1] @ bodies.body_offset_inv[1], np.eye(4), atol=1e-6)
    joints = joint_setup(model)
    assert joints.joint_frame.shape == (1, 4, 4) and np.allclose(joints.joint_position, [[0, 5, 0]])


@pytest.mark.parametrize("field, value, message", [
    ("rigid_body_bone", np.array([0, 9], np.int32), "rigid body 1 refers to bone 9"),
    ("rigid_body_shape", np.array([0, 7], np.uint8), "rigid body 1 has unknown shape 7"),
    ("joint_body_b", np.array([5], np.int32), "joint 0 refers to rigid bodies"),
])
def test_build_errors_name_the_model_file(field, value, message):
    bad = dataclasses.replace(two_body_model("models/pair.pmx"), **{field: value})
    with pytest.raises(BuildError, match=message) as e:
        physics_for(bad)
    assert str(e.value).startswith("models/pair.pmx")
