"""The built-in demo: Gene_light dancing WAVEFILE ships inside the package (with its credits), the
demo command renders it on a floor with its hair swinging, and the box figure stays for tests."""

from __future__ import annotations

import numpy as np
from PIL import Image

from mmdkit.demo import DEMO_FRAMES, demo_character, demo_model, demo_motion, demo_paths


def test_demo_files_ship_with_their_credits_and_only_the_textures_used():
    model_path, motion_path = demo_paths()
    assert model_path.is_file() and motion_path.is_file()
    model, motion = demo_character()
    assert (model.num_bones, model.num_vertices, model.num_rigid_bodies, model.num_joints) == (224, 28646, 87, 92)
    assert motion.last_frame == 2809 and motion.num_bone_keys > 10000
    assert 0 <= DEMO_FRAMES[0] < DEMO_FRAMES[1] <= motion.last_frame
    credit = (model_path.parent / "README.md").read_text(encoding="utf-8")
    assert "CC-BY 4.0" in credit and "Nagoya Institute of Technology" in credit
    assert "改変、再配布はご自由に" in (motion_path.parent / "readme_wavefile.utf8.txt").read_text(encoding="utf-8")
    assert (motion_path.parent / "readme_wavefile.txt").is_file()  # the author's original (Shift-JIS)
    used = {model_path.parent / t for t in model.texture_path}
    assert all(p.is_file() for p in used)
    assert set((model_path.parent / "light").iterdir()) == used  # nothing shipped that the model does not use


def test_box_figure_stays_for_tests():
    model, motion = demo_model(), demo_motion()
    assert model.num_bones == 24 and model.num_rigid_bodies == 4
    assert motion.last_frame == 120


def _ink(img: np.ndarray) -> np.ndarray:
    """Pixels of the character: darker or more coloured than the pale floor and white sky."""
    img = img.astype(int)
    return (img.min(axis=2) < 120) | (img.max(axis=2) - img.min(axis=2) > 40)


def test_demo_command_renders_gene_dancing_on_a_floor(mmdkit_cli, tmp_path):
    out = tmp_path / "frames"
    a = DEMO_FRAMES[0]
    code, _, err = mmdkit_cli("render", "--demo", "--frames", f"{a}:{a + 60}:30", "--size", "96x54", "--msaa", "0",
                              "-q", "-o", out)
    assert code == 0, err
    pictures = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(out.iterdir())]
    assert len(pictures) == 3
    for img in pictures:
        ink = _ink(img)
        rows = np.flatnonzero(ink.any(axis=1))
        assert ink.mean() > 0.015 and rows[-1] - rows[0] > 0.6 * img.shape[0]  # there, filling the height
        floor = img[-4:].astype(int)  # the bottom rows: floor, not the white background
        assert (floor.mean(axis=2) < 245).mean() > 0.5
    for i in range(3):
        for j in range(i + 1, 3):
            assert np.abs(pictures[i].astype(int) - pictures[j].astype(int)).mean() > 2.0  # poses differ


def test_demo_hair_swings_by_physics():
    """The hair bones Bullet drives turn away from where the kinematic pose holds them: it swings
    (Gene's hair bodies follow their bones' positions; their rotations are the physics')."""
    from mmdkit.physics import physics_for
    from mmdkit.runtime import Character

    model, motion = demo_character()
    hair = [int(model.rigid_body_bone[k]) for k in range(model.num_rigid_bodies)
            if model.rigid_body_mode[k] != 0 and "髪" in model.rigid_body_name[k]]
    assert len(hair) > 20
    with_physics = Character(model, motion, physics_for(model, True))
    kinematic = Character(model, motion)
    angles = []
    for f in range(DEMO_FRAMES[0], DEMO_FRAMES[0] + 31):
        rel = np.einsum("kji,kjl->kil", kinematic.update(f).bone_world[hair, :3, :3].astype(np.float64),
                        with_physics.update(f).bone_world[hair, :3, :3].astype(np.float64))
        angles.append(np.arccos(np.clip((np.trace(rel, axis1=1, axis2=2) - 1) / 2, -1, 1)))
    angles = np.array(angles)
    assert np.isfinite(angles).all()
    assert angles.max() > 0.3  # radians: the hair swings well away from the head's pose
    assert (angles.max(axis=0) > 0.1).mean() > 0.5  # most strands move


def test_demo_dances_with_physics_hair():
    from mmdkit.physics import MMDPhysics
    from mmdkit.runtime import Character

    model, motion = demo_model(), demo_motion(2.0)
    ch = Character(model, motion, MMDPhysics(model))
    tip = model.bone_index("髪先")
    ys = []
    for f in range(60):
        ch.update(f)
        ys.append(ch.bone_world[tip, :3, 3].copy())
    ys = np.array(ys)
    assert np.isfinite(ys).all()
    assert np.ptp(ys[:, 0]) > 0.1  # the hair swings with the sway
    assert ch.morph_weight[model.morph_index("歌う")] >= 0
