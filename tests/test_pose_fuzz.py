"""Models that survive the readers' checks must also survive posing, physics and skinning: a
mutated real file either raises FormatError or poses (no crash, no out-of-range read)."""

from __future__ import annotations

import struct
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmdkit.errors import FormatError
from mmdkit.formats.io import parse
from mmdkit.model.model import Model
from mmdkit.physics import MMDPhysics
from mmdkit.runtime import Character
from test_formats_fuzz import SAMPLES

# the readers' fuzz samples that are models (with bones, morphs, bodies and joints between them)
BLOBS = [(p.suffix.lower(), p.read_bytes()) for p in SAMPLES if p.suffix.lower() in (".pmx", ".pmd")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(BLOBS) - 1), st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7),
                                                         st.sampled_from([-2, -1, 0, 1, 2, 5, 100, 30000])),
                                               min_size=1, max_size=3))
def test_parsed_mutants_pose_simulate_and_skin(which, edits):
    ext, data = BLOBS[which]
    b = bytearray(data)
    for where, bit, value in edits:  # a flipped bit, or an index/count field overwritten
        pos = int(where * len(b))
        if bit % 2:
            b[pos] ^= 1 << bit
        else:
            pos = max(0, min(pos, len(b) - 4))
            b[pos:pos + 4] = struct.pack("<i", value)
    try:
        model = parse(bytes(b), ext, "mutant" + ext)
    except FormatError:
        return
    assert isinstance(model, Model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        physics = MMDPhysics(model) if len(model.rigid_body_name) else None
    ch = Character(model, None, physics)
    ch.update(0)
    ch.update(1)
    pos = np.zeros((model.num_vertices, 3), np.float32)
    ch.skin(pos, np.zeros_like(pos))
    assert ch.bone_world.shape == (model.num_bones, 4, 4)
