"""Fuzz the readers with mutated real files: only FormatError may escape, each case < 1 s."""

from __future__ import annotations

import struct
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ASSETS
from mmdkit.errors import FormatError
from mmdkit.formats.io import parse

FIX = ASSETS / "fixtures"
SAMPLES = [
    FIX / "yohawing-three-mmd-loader/test/fixtures/test_1bone_cube.pmx",
    FIX / "yohawing-unity-mmd-loader/Tests/Fixtures/Assets/GeneratedPmx/sdef-two-bone-elbow.pmx",
    FIX / "yohawing-unity-mmd-loader/Tests/Fixtures/Assets/GeneratedPmx/qdef-twist-cylinder.pmx",
    FIX / "yohawing-unity-mmd-loader/Tests/Fixtures/Assets/GeneratedPmx/mmd-material-morph-alpha-opaque-depth.pmx",
    FIX / "babylon-mmd/uv_morph_test.pmx",
    FIX / "babylon-mmd/constraint_test.pmx",
    FIX / "yohawing-three-mmd-loader/test/fixtures/joint_orient_test.pmx",
    FIX / "babylon-mmd/physics_toggle_test_yyb10th.vmd",
    FIX / "yohawing-three-mmd-loader/test/fixtures/test_append_bone.vmd",
    FIX / "yohawing-three-mmd-loader/test/fixtures/joint_orient_test.vmd",
    ASSETS / "low_miku/miku.pmd",
]
VPD = ("Vocaloid Pose Data file\r\n\r\nmiku.osm;\t\t// 親ファイル名\r\n1;\r\n\r\nBone0{センター\r\n"
       "  0.000000,1.000000,0.000000;\r\n  0.000000,0.000000,0.000000,1.000000;\r\n}\r\n\r\n"
       "Morph0{あ\r\n  0.500000;\r\n}\r\n").encode("cp932")


def _blobs():
    out = [(p.suffix.lower(), p.read_bytes()) for p in SAMPLES]
    out.append((".vpd", VPD))
    return out


BLOBS = _blobs()
for _ext, _data in BLOBS:  # compile/load the numba kernels before any timed case
    parse(_data, _ext, "warm" + _ext)


def _check(ext: str, data: bytes) -> None:
    # CPU seconds of this thread, not the wall clock: a loaded machine does not slow the count,
    # a hang or a huge allocation (pages touched) still runs it up; a case takes ~10 ms
    t = time.thread_time()
    try:
        parse(data, ext, f"fuzz{ext}")
    except FormatError as e:
        assert str(e)  # one line, names the file
        assert "\n" not in str(e)
    dt = time.thread_time() - t
    assert dt < 1.0, f"case took {dt:.2f} CPU s"


mutation = st.tuples(st.integers(0, len(BLOBS) - 1), st.sampled_from(["truncate", "flip", "count", "bytes"]),
                     st.floats(0, 1, exclude_max=True), st.integers(0, 2**32 - 1))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation)
def test_mutated_files_raise_only_format_error(m):
    which, op, where, value = m
    ext, data = BLOBS[which]
    pos = int(where * len(data))
    b = bytearray(data)
    if op == "truncate":
        b = b[:pos]
    elif op == "flip":
        b[pos] ^= 1 << (value % 8)
    elif op == "count":  # a lying 32-bit count (huge, negative or off by a little)
        v = [value, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, (struct.unpack_from("<I", data, max(0, min(pos, len(data) - 4)))[0] + 1)][value % 5]
        pos = max(0, min(pos, len(b) - 4))
        b[pos:pos + 4] = struct.pack("<I", v & 0xFFFFFFFF)
    else:
        n = 1 + value % 8
        b[pos:pos + n] = np.random.default_rng(value).integers(0, 256, n, dtype=np.uint8).tobytes()
    _check(ext, bytes(b))


@pytest.mark.parametrize("count_offset_name", ["vertices", "faces"])
def test_gene_lying_counts_do_not_allocate(assets, count_offset_name):
    """A header claiming 2^31 - 1 vertices (or face indices) fails fast with the section named."""
    from mmdkit.formats.pmx import read_pmx

    data = bytearray((assets / "gene" / "Gene.pmx").read_bytes())
    pos = read_pmx(bytes(data))["source_extras"]["section_offsets"][count_offset_name]
    assert struct.unpack_from("<i", data, pos)[0] == {"vertices": 28646, "faces": 47106 * 3}[count_offset_name]
    data[pos:pos + 4] = struct.pack("<i", 2**31 - 1)
    blob = bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError) as e:
            read_pmx(blob, "Gene.pmx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # refused before allocating: the whole file parses in ~3x its size (numpy arrays included);
    # the lie would need 2^31 records, gigabytes
    assert peak < 4 * len(data), peak
    assert e.value.section == count_offset_name
    assert e.value.offset == pos
    assert "2147483647" in str(e.value)
