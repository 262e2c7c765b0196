"""The glTF reader and importer on hostile files: each refused on one line (FormatError naming the
file and the JSON path or byte), bounded in time and memory, never a traceback, hang or NaN."""

from __future__ import annotations

import base64
import json
import os
import struct
import threading
import tracemalloc

import numpy as np
import pytest

import mmdkit
from mmdkit.errors import FormatError
from mmdkit.formats.gltf import read_gltf
from mmdkit.formats.gltf.scene import MAX_DEPTH, MAX_NODES
from mmdkit.importers import import_scene
from mmdkit.importers.skeleton import MAX_PRIMITIVES
from mmdkit.runtime import pose


@pytest.fixture(scope="module")
def simple(assets) -> bytes:
    return (assets / "gltf" / "SimpleSkin.gltf").read_bytes()


def doc_of(simple: bytes) -> dict:
    return json.loads(simple)


def refused(doc_or_bytes, match: str, name: str = "bad.gltf", base_dir=None):
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else json.dumps(doc_or_bytes).encode()
    with pytest.raises(FormatError, match=match) as e:
        import_scene(read_gltf(data, name, base_dir=base_dir))
    assert "\n" not in str(e.value) and str(e.value).startswith(name)
    return e.value


def with_last_key_time(doc: dict, seconds: float) -> dict:
    """``doc`` whose first sampler's last key time is ``seconds`` (in its data: URI buffer)."""
    acc = doc["accessors"][doc["animations"][0]["samplers"][0]["input"]]
    bv = doc["bufferViews"][acc["bufferView"]]
    buf = doc["buffers"][bv["buffer"]]
    raw = bytearray(base64.b64decode(buf["uri"].split(",", 1)[1]))
    struct.pack_into("<f", raw, bv.get("byteOffset", 0) + acc.get("byteOffset", 0) + 4 * (acc["count"] - 1), seconds)
    buf["uri"] = "data:application/gltf-buffer;base64," + base64.b64encode(bytes(raw)).decode()
    acc["max"] = [seconds]
    return doc


def test_json_that_python_cannot_read(simple):
    refused(simple.rstrip()[:-1] + b',"extras":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            r"section 'JSON': JSON arrays/objects are nested too deeply")
    refused(simple.replace(b'"count":', b'"count":1' + b"0" * 5000 + b',"x":', 1), r"section 'JSON': not valid JSON: .*digits")


def test_glb_header_length_below_20(simple):
    j = json.dumps(json.loads(simple)).encode()
    j += b" " * (-len(j) % 4)
    glb = struct.pack("<4sII", b"glTF", 2, 12) + struct.pack("<II", len(j), 0x4E4F534A) + j
    refused(glb, r"section 'GLB header', byte 8: the header says the file is 12 bytes", "bad.glb")


def test_extensions_required_not_a_list(simple):
    for value in (5, "KHR_x", [1]):
        doc = doc_of(simple)
        doc["extensionsRequired"] = value
        refused(doc, r"section 'extensionsRequired': expected a list of extension names")


def test_bad_external_buffers(simple, tmp_path):
    (tmp_path / "buf0.bin").write_bytes(b"\0" * 64)
    doc = doc_of(simple)
    doc["buffers"][0]["uri"] = "ok%00.bin"
    refused(doc, r"buffers\[0\]\.uri': 'ok%00.bin': a file name with a control character", base_dir=tmp_path)
    doc["buffers"][0]["uri"] = "buf0.bin"
    doc["buffers"][0]["byteLength"] = 2**63
    refused(doc, r"buffers\[0\]\.byteLength': 9.22337e\+18 is too large", base_dir=tmp_path)
    doc["buffers"][0]["byteLength"] = 2**40  # read as much as the file has, never 1 TiB
    tracemalloc.start()
    try:
        refused(doc, r"buffers\[0\]\.byteLength': says 1099511627776 bytes, the data has only 64", base_dir=tmp_path)
        assert tracemalloc.get_traced_memory()[1] < 64 << 20
    finally:
        tracemalloc.stop()


def test_a_fifo_named_by_a_uri_is_refused_not_waited_on(simple, tmp_path):
    os.mkfifo(tmp_path / "fifo.bin")
    doc = doc_of(simple)
    doc["buffers"][0]["uri"] = "fifo.bin"
    (tmp_path / "fifo.gltf").write_text(json.dumps(doc))
    result = []

    def load():
        try:
            mmdkit.load(tmp_path / "fifo.gltf")
        except FormatError as e:
            result.append(str(e))

    t = threading.Thread(target=load, daemon=True)  # a blocked open() cannot be interrupted: a daemon
    t.start()
    t.join(60)
    assert result and "buffers[0].uri': external buffer 'fifo.bin' cannot be read (not a regular file" in result[0]


def test_huge_node_values(simple):
    doc = doc_of(simple)
    doc["nodes"][0]["rotation"] = [1e300, 1e300, 0, 0]  # finite: normalised, a 180° turn about x+y
    model, clips = import_scene(read_gltf(json.dumps(doc).encode(), "rot.gltf"))
    out = pose(model, clips[clips.names[0]], [0, 10], vertices=True)
    assert all(np.isfinite(v).all() for v in out.values())
    doc = doc_of(simple)
    doc["nodes"][1]["translation"] = [1e39, 0, 0]
    refused(doc, r"nodes\[1\]\.translation': expected 3 finite numbers within ±1e\+06")
    doc = doc_of(simple)  # every level's scale is allowed, their product is not
    doc["nodes"][0]["scale"] = doc["nodes"][1]["scale"] = [1e5, 1e5, 1e5]
    refused(doc, r"nodes\[1\]': its rest world transform is beyond ±1e\+06")


def test_clip_key_times_and_values_are_bounded(simple):
    for t in (1e9, 3.4e38):
        refused(with_last_key_time(doc_of(simple), t), r"samplers\[0\]\.input': key time .* s is beyond the 7.16e\+07 s")
    doc = doc_of(simple)  # scale keys multiplying down the hierarchy: refused when baked, not NaN
    anim = doc["animations"][0]
    keys = doc["accessors"][anim["samplers"][0]["input"]]["count"]
    raw = np.full((keys, 3), 1e5, np.float32).tobytes()
    doc["buffers"].append({"byteLength": len(raw), "uri": "data:application/octet-stream;base64,"
                           + base64.b64encode(raw).decode()})
    doc["bufferViews"].append({"buffer": len(doc["buffers"]) - 1, "byteLength": len(raw)})
    doc["accessors"].append({"bufferView": len(doc["bufferViews"]) - 1, "componentType": 5126, "count": keys,
                             "type": "VEC3"})
    anim["samplers"].append({"input": anim["samplers"][0]["input"], "output": len(doc["accessors"]) - 1})
    for node in (0, 1):
        anim["channels"].append({"sampler": len(anim["samplers"]) - 1, "target": {"node": node, "path": "scale"}})
    model, clips = import_scene(read_gltf(json.dumps(doc).encode(), "scaled.gltf"))
    with pytest.raises(FormatError, match=r"scaled.gltf, section 'animations': clip 'clip0' moves a bone beyond"):
        clips[clips.names[0]]


def test_a_long_clip_is_baked_only_where_asked(simple):
    """A 3 KB file whose clip claims 20,000 s: baking it all is refused (bounded memory), baking
    the frames to pose costs what they cost, and gives what the whole clip gives there."""
    model, clips = import_scene(read_gltf(json.dumps(with_last_key_time(doc_of(simple), 2e4)).encode(), "long.gltf"))
    with pytest.raises(FormatError, match=r"long.gltf, section 'animations': clip 'clip0' lasts 20000 s: baking 600,001 frames"):
        clips["clip0"]
    tracemalloc.start()
    try:
        _, motion = clips.get_clip(0, frames=[0, 1, 2])
        assert tracemalloc.get_traced_memory()[1] < 16 << 20
    finally:
        tracemalloc.stop()
    assert motion.last_frame == 2
    model, clips = import_scene(read_gltf(simple, "SimpleSkin.gltf"))
    frames = [0, 1.5, 7, 40.25, 10_000]
    whole = pose(model, clips["clip0"], frames)["bone_world"]
    part = pose(model, clips.get_clip("clip0", frames=frames)[1], frames)["bone_world"]
    np.testing.assert_allclose(part, whole, atol=1e-5)


def test_many_nodes_are_capped_and_baked_in_bounded_memory(simple):
    doc = doc_of(simple)
    n0 = len(doc["nodes"])
    doc["nodes"].extend({} for _ in range(MAX_NODES + 1 - n0))
    refused(doc, rf"section 'nodes': {MAX_NODES + 1:,} nodes; at most {MAX_NODES:,} are read")
    doc = doc_of(simple)
    doc["nodes"].extend({"children": [n0 + i + 1]} for i in range(MAX_DEPTH + 1))
    doc["nodes"][-1].pop("children")
    refused(doc, rf"lies {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels of nodes are read")
    doc = doc_of(simple)  # 20,000 nodes beside the skeleton: the clip's bake does not grow with them
    doc["nodes"].extend({} for _ in range(20_000))
    doc["nodes"][0].setdefault("children", []).extend(range(n0, n0 + 20_000))
    model, clips = import_scene(read_gltf(json.dumps(doc).encode(), "many.gltf"))
    tracemalloc.start()
    try:
        motion = clips["clip0"]
        assert tracemalloc.get_traced_memory()[1] < 64 << 20
    finally:
        tracemalloc.stop()
    assert motion.last_frame > 0


def test_data_a_file_does_not_store_is_bounded(simple):
    doc = doc_of(simple)
    doc["accessors"].append({"componentType": 5126, "count": 5_600_000, "type": "VEC3"})  # no bufferView: zeros
    doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"] = len(doc["accessors"]) - 1
    refused(doc, rf"accessors\[{len(doc['accessors']) - 1}\]\.count': 5600000 elements without a bufferView")
    doc = doc_of(simple)  # one mesh drawn by 40,000 nodes: refused at once, not imported for minutes
    mesh_node = next(i for i, n in enumerate(doc["nodes"]) if "mesh" in n)
    n0 = len(doc["nodes"])
    doc["nodes"].extend({"mesh": doc["nodes"][mesh_node]["mesh"], "skin": doc["nodes"][mesh_node]["skin"]}
                        for _ in range(40_000))
    doc["scenes"][0]["nodes"].extend(range(n0, n0 + 40_000))
    refused(doc, rf"section 'nodes': 40,001 nodes draw 40,001 mesh primitives; at most {MAX_PRIMITIVES:,}")
    doc = doc_of(simple)  # a mesh of 2,000 x 9,999 vertices made of one 120 KB position accessor
    raw = np.zeros((9_999, 3), np.float32).tobytes()
    doc["buffers"].append({"byteLength": len(raw), "uri": "data:application/octet-stream;base64,"
                           + base64.b64encode(raw).decode()})
    doc["bufferViews"].append({"buffer": len(doc["buffers"]) - 1, "byteLength": len(raw)})
    doc["accessors"].append({"bufferView": len(doc["bufferViews"]) - 1, "componentType": 5126, "count": 9_999,
                             "type": "VEC3"})
    doc["meshes"].append({"primitives": [{"attributes": {"POSITION": len(doc["accessors"]) - 1}}] * 2000})
    doc["nodes"].append({"mesh": len(doc["meshes"]) - 1})
    doc["scenes"][0]["nodes"].append(len(doc["nodes"]) - 1)
    refused(doc, r"section 'nodes\[\d+\]\.mesh': the meshes drawn add up to .* vertices")


def test_a_huge_inverse_bind_is_a_format_error(simple):
    doc = doc_of(simple)
    ibm = doc["accessors"][doc["skins"][0]["inverseBindMatrices"]]
    bv = doc["bufferViews"][ibm["bufferView"]]
    buf = doc["buffers"][bv["buffer"]]
    raw = bytearray(base64.b64decode(buf["uri"].split(",", 1)[1]))
    struct.pack_into("<f", raw, bv.get("byteOffset", 0) + ibm.get("byteOffset", 0), 3e38)
    buf["uri"] = "data:application/gltf-buffer;base64," + base64.b64encode(bytes(raw)).decode()
    refused(doc, r"skins\[0\]\.inverseBindMatrices': holds a value beyond ±1e\+06")


def test_cli_says_one_line_and_exits_2(simple, tmp_path, mmdkit_cli):
    (tmp_path / "deep.gltf").write_bytes(simple.rstrip()[:-1] + b',"extras":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    (tmp_path / "long.gltf").write_text(json.dumps(with_last_key_time(doc_of(simple), 2e4)))
    doc = doc_of(simple)
    doc["nodes"][1]["translation"] = [1e39, 0, 0]
    (tmp_path / "far.gltf").write_text(json.dumps(doc))
    for args in (("info", tmp_path / "deep.gltf"), ("pose", tmp_path / "deep.gltf", "-o", tmp_path / "a.npz"),
                 ("info", tmp_path / "far.gltf"), ("pose", tmp_path / "long.gltf", "-o", tmp_path / "b.npz")):
        code, _, err = mmdkit_cli(*args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("mmdkit: error: "), (args, err)
    assert not (tmp_path / "a.npz").exists() and not (tmp_path / "b.npz").exists()
    code, _, err = mmdkit_cli("pose", tmp_path / "long.gltf", "--frames", "0:2", "-o", tmp_path / "c.npz", "-q")
    assert code == 0 and np.load(tmp_path / "c.npz")["bone_world"].shape[0] == 3, err  # only those frames baked
