"""The Take (issue #24): one value for a job, validated before anything is loaded, named the caller's way."""

from __future__ import annotations

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import OptionError
from mmdkit.runtime.take import CLI_NAMES, MANIFEST_NAMES, LoadedTake, Output, Take


@pytest.fixture(scope="module")
def files(assets):
    return str(assets / "gene" / "Gene_light.pmx"), str(assets / "wavefile" / "wavefile_v2.vmd")


MISTAKES = [  # (fields, field whose name the error shows, words in the detail)
    (dict(fps=0), "fps", "frames per second above 0 and at most 1000, got 0"),
    (dict(fps=float("nan")), "fps", "got nan"),
    (dict(crowd=0), "crowd", "from 1 to 100 characters, got 0"),
    (dict(frames="5:1:-2"), "frames", "the step must be > 0"),
    (dict(frames="a:b"), "frames", "is not a number"),
    (dict(clip="Run"), "clip", "picks a clip"),
    (dict(vpd=("hands.vpd",)), "vpd", "is not FILE.vpd@FRAME[:WEIGHT]"),
    (dict(vpd=("missing.vpd@3",)), "vpd", "no file 'missing.vpd'"),
    (dict(physics="yes"), "physics", "must be true or false"),
    (dict(physics_mode="sometimes"), "physics_mode", "must be one of playing, always, off"),
    (dict(settle_seconds=99), "settle_seconds", "between 0 and 60"),
]


@pytest.mark.parametrize("fields, field, detail", MISTAKES)
def test_a_mistake_has_one_detail_under_each_callers_name(files, fields, field, detail):
    """The same mistake gives the same detail from Python, the CLI and a manifest; only the name of
    the field differs (``fps`` / ``--fps`` / the manifest key)."""
    model, motion = files
    for names in (None, CLI_NAMES, MANIFEST_NAMES):
        kw = {} if names is None else {"names": names}
        with pytest.raises(OptionError) as e:
            Take(model, motion, **fields, **kw).validate()
        shown = (names or {k: k for k in CLI_NAMES})[field]
        assert e.value.option == shown and detail in e.value.detail, str(e.value)


def test_validate_reads_no_file(files, tmp_path):
    """validate() looks at file metadata only: a motion file of garbage passes it (load refuses it),
    a missing or non-regular one does not."""
    model, _ = files
    garbage = tmp_path / "x.vmd"
    garbage.write_bytes(b"not a motion")
    take = Take(model, str(garbage)).validate()
    with pytest.raises(mmdkit.FormatError):
        take.load()
    with pytest.raises(OptionError, match="motion: no file"):
        Take(model, str(tmp_path / "gone.vmd")).validate()
    with pytest.raises(OptionError, match="is not a regular file"):
        Take(model, str(tmp_path)).validate()


def test_load_resolves_one_motion_and_the_frames(files, assets):
    model, motion = files
    loaded = Take(model, motion, frames="10:20:5").validate().load()
    assert list(loaded.frames) == [10.0, 15.0, 20.0] and loaded.motion.last_frame == loaded.last_frame
    assert loaded.rig is loaded.rig and loaded.bound.report().bound_bones > 0
    # a pose is one frame unless frames say otherwise; at 60 fps frames are half a motion frame apart
    vpd = next((assets / "fixtures").rglob("*.vpd"), None)
    if vpd is not None:
        assert list(Take(model, str(vpd)).load().frames) == [0.0]
    assert list(Take(model, motion, frames="0+3", fps=60).load().frames) == [0.0, 0.5, 1.0]
    # a model's own clip when the motion is left out (glTF), by name
    fox = Take(str(assets / "gltf" / "Fox.glb"), clip="Run", frames="0+2").load()
    assert "Run" in fox.motion_label and len(fox.frames) == 2


def test_loaded_take_of_objects_is_the_rest_pose_without_motion(files):
    model = mmdkit.load(files[0])
    loaded = LoadedTake.of(model, None, [0.0, 1.0])
    assert loaded.motion is None and list(loaded.frames) == [0.0, 1.0]
    with pytest.raises(OptionError, match="frames: frames must be finite"):
        LoadedTake.of(model, None, [np.nan])


def test_an_output_over_an_input_is_refused(files):
    model, motion = files
    with pytest.raises(OptionError, match="is the input file"):
        Take(model, motion, outputs=(Output(motion),)).validate()


def test_an_mmd_motion_on_a_vrm_is_retargeted_on_its_own(assets, files):
    """A VMD whose bone tracks miss the model (a VRM) is retargeted from MMD's standard skeleton
    when no source is given, with one warning saying so; a model with no humanoid keeps it."""
    _, dance = files
    said = []
    loaded = Take(str(assets / "rigs" / "vrm0" / "Godette_vrm_v4.vrm"), dance, frames="1560+2").load(said.append)
    assert len(said) == 1 and "retargeted from MMD's standard skeleton" in said[0]
    report = loaded.bound.report()
    assert report.bone_tracks > 20 and report.complete  # keyed on the VRM's own bones
    fox = Take(str(assets / "gltf" / "Fox.glb"), dance, frames="0").load()
    assert fox.motion.source_path.endswith("wavefile_v2.vmd")  # not retargeted
