"""Playback: output fps is real time (fractional motion frames), many characters, pose()."""

import math

import numpy as np
import pytest

from mmdkit.animation.builder import MotionBuilder
from mmdkit.errors import OptionError
from mmdkit.model.builder import ModelBuilder
from mmdkit.runtime import Character, output_frames, play, pose, seconds_at


def slide():
    """One bone keyed linearly from x=0 at frame 0 to x=30 at frame 30: x = frame."""
    mb = ModelBuilder("slide")
    mb.add_bone("b", (0, 0, 0), translatable=True)
    mo = MotionBuilder()
    mo.add_bone_key("b", 0)
    mo.add_bone_key("b", 30, translation=(30, 0, 0))
    return mb.build(), mo.build()


def test_output_fps_is_real_time():
    """60 pictures a second show the motion at half frames: one second of output is one second
    of dance (30 motion frames), not two."""
    assert output_frames(0, 30, fps=60).tolist() == [i / 2 for i in range(61)]
    assert output_frames(330, 360, fps=30).tolist() == list(range(330, 361))
    np.testing.assert_allclose(output_frames(0, 30, fps=24)[-1], 30.0)  # 24 fps: 25 pictures for 1 s
    assert len(output_frames(0, 30, fps=24)) == 25
    model, motion = slide()
    frames = output_frames(0, 30, fps=60)
    ch = Character(model, motion)
    xs = [ch.bone_world[0, 0, 3] for _ in play([ch], frames)]
    for i, x in enumerate(xs):
        assert x == pytest.approx(30 * (i / 60), abs=1e-4)  # picture i at i/60 s: the bone at x = 30·t
    assert seconds_at(frames[-1]) == pytest.approx(1.0)
    assert seconds_at(330) == pytest.approx(11.0)  # a clip from frame 330: audio from 11 s
    for bad in (0, -5, math.nan, math.inf):
        with pytest.raises(OptionError, match="fps"):
            output_frames(0, 30, fps=bad)


def test_play_poses_every_character_with_its_offset():
    model, motion = slide()
    chars = [Character(model, motion) for _ in range(3)]
    seen = []
    for i, f in play(chars, [5.0, 6.5], offsets=[0, 2, 4]):
        seen.append([c.bone_world[0, 0, 3] for c in chars])
    np.testing.assert_allclose(seen, [[5, 7, 9], [6.5, 8.5, 10.5]], atol=1e-4)


def test_pose_batch_and_frame_by_frame_agree_at_fractional_frames(paths_agree):
    model, motion = slide()
    frames = output_frames(0, 30, fps=48)
    batch = pose(model, motion, frames)
    one = pose(model, motion, frames, vertices=True)
    paths_agree(one["bone_world"], batch["bone_world"])  # the parallel batch kernel vs frame by frame
    np.testing.assert_allclose(batch["bone_world"][:, 0, 0, 3], frames, atol=1e-4)


def test_playback_with_physics_runs_numba_on_one_thread(assets):
    """Bullet steps on the playing thread; numba's parallel skinning workers spin between calls
    and took its cores (bench --physics jumped 5×): with physics, playback uses one numba thread."""
    import numba

    import mmdkit
    from mmdkit.physics import physics_for

    model = mmdkit.load(assets / "mokou" / "mokou_A.pmd")
    before = numba.get_num_threads()
    inside = []
    plain = Character(model)
    for _ in play([plain], [0, 1]):
        inside.append(numba.get_num_threads())
    simulated = Character(model, None, physics_for(model), settle_seconds=0)
    for _ in play([plain, simulated], [0, 1]):
        inside.append(numba.get_num_threads())
    assert inside == [before, before, 1, 1]
    assert numba.get_num_threads() == before


def test_posing_keeps_no_model_alive():
    """No module-level cache holds a Model (a long batch leaked ~7 MB per Gene load): a Rig is
    made by whoever needs one (a take's characters share theirs), characters and pose() leave
    nothing behind."""
    import gc
    import weakref

    model, motion = slide()
    ch = Character(model, motion).update(3)
    pose(model, motion, [0, 1])
    pose(model, motion, [0, 1], vertices=True)
    refs = weakref.ref(model), weakref.ref(ch.rig)
    del model, ch
    gc.collect()
    assert refs[0]() is None and refs[1]() is None

def test_play_on_threads_poses_as_one_thread_does(assets):
    """play(threads=2) updates groups of characters at once (their own physics worlds): every
    character ends each frame exactly as when played alone on one thread, offsets included."""
    import mmdkit
    from mmdkit.physics import physics_for

    model = mmdkit.load(assets / "mokou" / "mokou_A.pmd")
    motion = mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")
    offsets = [0, 7, 13]
    frames = [100.0, 101.0, 102.0, 103.5]

    def run(threads):
        chars = [Character(model, motion, physics_for(model), settle_seconds=0.1) for _ in offsets]
        seen = []
        for _ in play(chars, frames, offsets=offsets, threads=threads):
            seen.append(np.stack([c.bone_world.copy() for c in chars]))
        return np.stack(seen)

    one, two = run(1), run(2)
    assert np.abs(one[-1, 0] - one[-1, 1]).max() > 1e-3  # the offsets show
    np.testing.assert_array_equal(one, two)  # each character runs the same code either way: the same bits
