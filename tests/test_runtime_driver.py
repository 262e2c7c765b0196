"""The one frame loop (issue #24): its policy, its sinks' protocol, and what a failure leaves."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.runtime import Sink, pose, run
from mmdkit.runtime.take import LoadedTake


class Recorder(Sink):
    """Counts how the driver called it and keeps the first character's bone worlds."""

    def __init__(self, *, batch=False, geometry=False, continuous=False, fail_at=None):
        self.batch, self.geometry, self.continuous, self.fail_at = batch, geometry, continuous, fail_at
        self.calls = {"open": 0, "frame": 0, "posed": 0, "close": 0, "abort": 0}
        self.frames = []

    def open(self, loaded):
        self.calls["open"] += 1

    def frame(self, i, characters):
        self.calls["frame"] += 1
        if i == self.fail_at:
            raise RuntimeError("sink failed")
        self.frames.append((i, characters[0].frame, characters[0].bone_world.copy()))

    def posed(self, bone_world, morph_weight, world_p, world_q):
        self.calls["posed"] += 1
        self.bone_world = bone_world

    def close(self):
        self.calls["close"] += 1
        return {"n": self.calls["frame"]}

    def abort(self):
        self.calls["abort"] += 1


@pytest.fixture(scope="module")
def gene(assets):
    return mmdkit.load(assets / "gene" / "Gene_light.pmx"), mmdkit.load(assets / "wavefile" / "wavefile_v2.vmd")


def test_batch_only_when_every_sink_takes_batches_and_nothing_simulates(gene):
    model, motion = gene
    frames = np.arange(300.0, 306.0)
    both = [Recorder(batch=True), Recorder(batch=True)]
    run(LoadedTake.of(model, motion, frames, physics=False), both)
    assert [s.calls["posed"] for s in both] == [1, 1] and both[0].calls["frame"] == 0
    mixed = [Recorder(batch=True), Recorder()]
    run(LoadedTake.of(model, motion, frames, physics=False), mixed)
    assert [s.calls["frame"] for s in mixed] == [6, 6]
    # the batch poser and the frame loop agree (one value whichever path posed it)
    assert np.array_equal(both[0].bone_world, np.stack([f[2] for f in mixed[0].frames]))
    physics = [Recorder(batch=True)]
    run(LoadedTake.of(model, motion, frames, physics=True), physics)
    assert physics[0].calls == {"open": 1, "frame": 6, "posed": 0, "close": 1, "abort": 0}


def test_a_continuous_sink_gets_in_between_frames_simulated(gene):
    """At 10 fps (3 motion frames apart) a continuous sink's frames are posed with the bodies stepped
    through the frames between; a non-continuous one's are seeks (the bodies settle each time)."""
    model, motion = gene
    frames = np.arange(300.0, 316.0, 3.0)
    stepped, seeking = Recorder(continuous=True), Recorder()
    run(LoadedTake.of(model, motion, frames, physics=True, fps=10), [stepped])
    run(LoadedTake.of(model, motion, frames, physics=True, fps=10), [seeking])
    assert [f[1] for f in stepped.frames] == list(frames)  # the sink sees only its own frames
    last_stepped, last_seeking = stepped.frames[-1][2], seeking.frames[-1][2]
    ref = pose(model, motion, np.arange(300.0, 316.0), physics=True)["bone_world"][-1]
    assert np.array_equal(last_stepped, ref)  # as if every frame had been posed
    assert not np.array_equal(last_seeking, ref)


def test_a_failing_sink_aborts_every_sink(gene):
    model, motion = gene
    sinks = [Recorder(), Recorder(fail_at=2)]
    with pytest.raises(RuntimeError, match="sink failed"):
        run(LoadedTake.of(model, motion, np.arange(5.0), physics=False), sinks)
    assert [s.calls["abort"] for s in sinks] == [1, 1] and [s.calls["close"] for s in sinks] == [0, 0]


def test_a_crowd_shares_one_rig_and_plays_offset(gene):
    model, motion = gene
    loaded = LoadedTake.of(model, motion, [310.0], physics=False, crowd=3, crowd_frame_offset=5)
    seen = []

    class Look(Sink):
        def frame(self, i, characters):
            seen.extend((ch.frame, ch.rig is loaded.rig) for ch in characters)

    run(loaded, [Look()])
    assert seen == [(310.0, True), (315.0, True), (320.0, True)]
