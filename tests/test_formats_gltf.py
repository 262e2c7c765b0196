"""The native glTF 2.0 / GLB reader on the real sample files, and on broken copies of them."""

from __future__ import annotations

import base64
import copy
import json
import struct

import numpy as np
import pytest

from mmdkit.errors import FormatError, OptionError
from mmdkit.formats.gltf import (clip_node_local, clip_node_trs, clip_target_weights, load_gltf, read_gltf,
                                 sample_channel, trs_matrices, world_matrices)
from mmdkit.formats.gltf.accessor import Accessors
from mmdkit.formats.gltf.jsonpath import Obj
from mmdkit.formats.gltf.mesh import triangles


@pytest.fixture(scope="module")
def gltf_dir(assets):
    return assets / "gltf"


@pytest.fixture(scope="module")
def g2_dir(assets):
    return assets / "assimp" / "models" / "glTF2"


def unpack_glb(data: bytes) -> tuple[dict, bytes]:
    n = struct.unpack_from("<I", data, 12)[0]
    doc = json.loads(data[20:20 + n])
    m = struct.unpack_from("<I", data, 20 + n)[0]
    return doc, data[28 + n:28 + n + m]


def pack_glb(doc: dict, bin_: bytes) -> bytes:
    text = json.dumps(doc).encode()
    text += b" " * (-len(text) % 4)
    bin_ += b"\0" * (-len(bin_) % 4)
    total = 12 + 8 + len(text) + 8 + len(bin_)
    return (struct.pack("<4sII", b"glTF", 2, total) + struct.pack("<II", len(text), 0x4E4F534A) + text
            + struct.pack("<II", len(bin_), 0x004E4942) + bin_)


def data_uri(b: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(b).decode()


def add_accessor(doc: dict, arr: np.ndarray, ctype: int, typ: str, **extra) -> int:
    """Append ``arr`` as a new data-URI buffer + bufferView + accessor; returns the accessor index."""
    raw = np.ascontiguousarray(arr).tobytes()
    doc["buffers"].append({"byteLength": len(raw), "uri": data_uri(raw)})
    doc["bufferViews"].append({"buffer": len(doc["buffers"]) - 1, "byteLength": len(raw)})
    doc["accessors"].append({"bufferView": len(doc["bufferViews"]) - 1, "componentType": ctype,
                             "count": len(arr), "type": typ, **extra})
    return len(doc["accessors"]) - 1


def simple_skin(gltf_dir) -> dict:
    return json.loads((gltf_dir / "SimpleSkin.gltf").read_text())


def read_doc(doc: dict):
    return read_gltf(json.dumps(doc).encode(), "mem.gltf")


def test_counts_of_the_sample_characters(gltf_dir):  # the real files as they are
    cesium, fox = load_gltf(gltf_dir / "CesiumMan.glb"), load_gltf(gltf_dir / "Fox.glb")
    robot, simple = load_gltf(gltf_dir / "RobotExpressive.glb"), load_gltf(gltf_dir / "SimpleSkin.gltf")
    joints = [[len(s.joint_node) for s in a.skins] for a in (cesium, fox, simple, robot)]
    assert joints == [[19], [24], [2], [43] * 4]
    assert [a.name for a in fox.animations] == ["Survey", "Walk", "Run"]
    assert len(robot.animations) == 14 and robot.animation("Dance").channels
    morphs = [m for m in robot.meshes if len(m.target_name)]
    assert morphs and all(m.target_name == ("Angry", "Surprised", "Sad") for m in morphs)
    assert all(p.target_position.shape == (3, len(p.vertex_position), 3) for m in morphs for p in m.primitives)
    assert any(ch.path == "weights" for a in robot.animations for ch in a.channels)
    assert (cesium.num_nodes, fox.num_nodes, robot.num_nodes) == (22, 26, 84)
    assert cesium.images[0].mime == "image/jpeg" and cesium.images[0].data[:3] == b"\xff\xd8\xff"
    assert fox.images[0].mime == "image/png" and fox.images[0].data[:4] == b"\x89PNG"
    assert fox.materials[0].base_color_image == 0 and cesium.materials[0].alpha_mode == "OPAQUE"
    assert robot.materials[1].name == "Main" and robot.materials[1].base_color[0] == pytest.approx(0.5903284)
    assert not any(a.warnings for a in (cesium, fox, robot, simple))


def _arrays(x):  # every numpy array inside a GltfAsset (dataclasses, tuples)
    items = x if isinstance(x, tuple) else vars(x).values() if hasattr(x, "__dataclass_fields__") else ()
    return [x] if isinstance(x, np.ndarray) else [a for v in items for a in _arrays(v)]


def test_every_sample_reads_with_consistent_arrays(gltf_dir, g2_dir):
    files = sorted(gltf_dir.glob("*.gl*")) + sorted(g2_dir.glob("*/*.gl*")) + sorted(g2_dir.glob("*/glTF/*.gltf"))
    assert len(files) == 11
    for f in files:
        a = load_gltf(f)
        n = a.num_nodes
        for arr, shape in ((a.node_parent, (n,)), (a.node_translation, (n, 3)), (a.node_rotation, (n, 4)),
                           (a.node_scale, (n, 3)), (a.node_local, (n, 4, 4)), (a.node_world, (n, 4, 4))):
            assert arr.shape == shape, f
        assert sorted(a.node_order.tolist()) == list(range(n))
        assert not any(x.flags.writeable for x in _arrays(a)), f
        seen = set()
        for i in a.node_order:  # parents come first
            assert a.node_parent[i] < 0 or a.node_parent[i] in seen
            seen.add(int(i))
        for m in a.meshes:
            for p in m.primitives:
                v = len(p.vertex_position)
                assert p.vertex_position.dtype == np.float32 and p.face_vertex.dtype == np.uint32
                assert p.face_vertex.shape[1] == 3 and int(p.face_vertex.max()) < v
                if p.vertex_weight is not None:
                    assert p.vertex_joint.shape == p.vertex_weight.shape and p.vertex_joint.shape[1] % 4 == 0
                    np.testing.assert_allclose(p.vertex_weight.sum(1), 1.0, atol=2e-3)


def _rest_joint_matrices(a, node):
    skin = a.skins[a.node_skin[node]]
    return a.node_world[skin.joint_node].astype(np.float64) @ skin.joint_inverse_bind


def _skin(a, node, joint_matrix):
    """Σ w·J·v over every primitive of ``node``'s mesh → (V, 3) positions per primitive."""
    out = []
    for p in a.meshes[a.node_mesh[node]].primitives:
        m = np.einsum("vk,vkij->vij", p.vertex_weight, joint_matrix[p.vertex_joint])
        v = np.c_[p.vertex_position, np.ones(len(p.vertex_position))]
        out.append((p, np.einsum("vij,vj->vi", m, v)[:, :3]))
    return out


@pytest.mark.parametrize("name, node", [("gltf/CesiumMan.glb", 2), ("gltf/Fox.glb", 1),
                                        ("gltf/SimpleSkin.gltf", 0),
                                        ("assimp/models/glTF2/simple_skin/quad_skin.glb", 22)])
def test_rest_pose_skinning_reproduces_the_bind_mesh(assets, name, node):
    """Rest node worlds · inverse binds = one rigid matrix C on every used joint, so skinning at
    rest gives C·v: the mesh undeformed (C = the mesh node's world, identity for Fox)."""
    a = load_gltf(assets / name)
    assert a.node_skin[node] >= 0 and a.node_mesh[node] >= 0
    joint = _rest_joint_matrices(a, node)
    for p, skinned in _skin(a, node, joint):
        used = np.unique(p.vertex_joint[p.vertex_weight > 0])
        c = joint[used[0]]
        np.testing.assert_allclose(joint[used], np.broadcast_to(c, (len(used), 4, 4)), atol=1e-4)
        size = np.ptp(p.vertex_position, axis=0).max()
        rigid = p.vertex_position @ c[:3, :3].T + c[:3, 3]
        assert np.abs(skinned - rigid).max() < 1e-4 * size * np.abs(c[:3, :3]).max()
    if name.endswith("Fox.glb"):
        np.testing.assert_allclose(c, np.eye(4), atol=1e-4)
    if name.endswith("CesiumMan.glb"):
        np.testing.assert_allclose(c, a.node_world[node], atol=1e-5)


def test_robot_hands_move_rigidly_with_their_joints(gltf_dir):
    """RobotExpressive's rest pose is not its bind pose (its arms hang): vertices carried by one
    joint alone keep their distance to it between the bind pose (inverse of the IBM, placed by
    the mesh node) and the skinned rest pose."""
    a = load_gltf(gltf_dir / "RobotExpressive.glb")
    skinned_nodes = np.flatnonzero((a.node_mesh >= 0) & (a.node_skin >= 0))
    assert len(skinned_nodes) == 4
    height = np.ptp(a.node_world[:, 1, 3])
    for node in skinned_nodes:
        skin = a.skins[a.node_skin[node]]
        bind_world = a.node_world[node] @ np.linalg.inv(skin.joint_inverse_bind.astype(np.float64))
        for p, skinned in _skin(a, node, _rest_joint_matrices(a, node)):
            single = p.vertex_weight.max(1) > 0.999
            assert single.sum() > 50
            main = p.vertex_joint[np.arange(len(p.vertex_joint)), p.vertex_weight.argmax(1)][single]
            rest = np.linalg.norm(skinned[single] - a.node_world[skin.joint_node[main], :3, 3], axis=1)
            v = np.c_[p.vertex_position[single], np.ones(single.sum())] @ a.node_world[node].T.astype(np.float64)
            bind = np.linalg.norm(v[:, :3] - bind_world[main, :3, 3], axis=1)
            np.testing.assert_allclose(rest, bind, atol=1e-5 * height)
            assert rest.max() > 0.1 * height  # not trivially at the joint


def test_matrix_nodes_keep_their_matrix_and_decompose(gltf_dir):
    a = load_gltf(gltf_dir / "CesiumMan.glb")
    doc, _ = unpack_glb((gltf_dir / "CesiumMan.glb").read_bytes())
    assert a.node_has_matrix.sum() == 2
    for i in np.flatnonzero(a.node_has_matrix):
        stored = np.array(doc["nodes"][i]["matrix"], np.float32).reshape(4, 4).T
        np.testing.assert_array_equal(a.node_local[i], stored)
        np.testing.assert_allclose(trs_matrices(a.node_translation[i], a.node_rotation[i], a.node_scale[i]),
                                   stored, atol=1e-6)
    world = world_matrices(a.node_parent, a.node_order, a.node_local)
    np.testing.assert_allclose(world, a.node_world, atol=1e-5)


def test_sampling_at_key_times_returns_the_keys_and_holds_outside(gltf_dir):
    for name in ("CesiumMan.glb", "Fox.glb", "RobotExpressive.glb"):
        for clip in load_gltf(gltf_dir / name).animations:
            for ch in clip.channels:
                got = sample_channel(ch, np.r_[ch.key_time, -5.0, ch.key_time[-1] + 100.0])
                assert got.dtype == np.float64
                np.testing.assert_array_equal(got, ch.key_value[np.r_[np.arange(len(ch.key_time)), 0, -1]])


def test_linear_midpoints_lerp_and_slerp(gltf_dir):
    robot = load_gltf(gltf_dir / "RobotExpressive.glb")
    fox = load_gltf(gltf_dir / "Fox.glb")
    paths = set()
    for ch in [c for a in robot.animations + fox.animations for c in a.channels]:
        assert ch.interpolation == "LINEAR"
        paths.add(ch.path)
        k0, k1 = ch.key_value[:-1].astype(np.float64), ch.key_value[1:].astype(np.float64)
        mid = sample_channel(ch, 0.5 * (ch.key_time[:-1].astype(np.float64) + ch.key_time[1:]))
        if ch.path == "rotation":  # slerp at one half: the normalised sum along the shorter arc
            k1 = np.where(np.einsum("ij,ij->i", k0, k1)[:, None] < 0, -k1, k1)
            want = (k0 + k1) / np.linalg.norm(k0 + k1, axis=1, keepdims=True)
            np.testing.assert_allclose(mid, want, atol=1e-6)
            np.testing.assert_allclose(np.linalg.norm(mid, axis=1), 1.0, atol=1e-12)
        else:
            np.testing.assert_allclose(mid, 0.5 * (k0 + k1), atol=1e-6)
    assert paths == {"translation", "rotation", "weights"}


def test_step_holds_the_earlier_key(gltf_dir):
    doc = simple_skin(gltf_dir)
    doc["animations"][0]["samplers"][0]["interpolation"] = "STEP"
    ch = read_doc(doc).animations[0].channels[0]
    assert ch.interpolation == "STEP" and len(ch.key_time) > 2
    t = ch.key_time.astype(np.float64)
    between = t[:-1] + 0.7 * np.diff(t)
    np.testing.assert_array_equal(sample_channel(ch, between), ch.key_value[:-1])
    np.testing.assert_array_equal(sample_channel(ch, t), ch.key_value)


def test_cubicspline_is_the_hermite_curve(gltf_dir):
    doc = simple_skin(gltf_dir)
    times = np.array([0.0, 1.0, 3.0], np.float32)
    # per key: in-tangent, value, out-tangent (translation of node 2)
    keys = np.array([[[0, 0, 0], [0, 0, 0], [1, 2, 0]],
                     [[3, -1, 0], [1, 1, 1], [0.5, 0, 2]],
                     [[0, 0, 1], [2, 0, 0], [0, 0, 0]]], np.float32)
    rot = np.zeros((3, 3, 4), np.float32)  # rotation keys of node 1, one out-tangent
    rot[:, 1], rot[1, 2] = [[0, 0, 0, 1], [0, 0.6, 0, 0.8], [0.6, 0, 0, 0.8]], [0.1, 0, 0, 0]
    ti = add_accessor(doc, times, 5126, "SCALAR", min=[0.0], max=[3.0])
    anim = doc["animations"][0]
    for node, path, k in ((2, "translation", keys), (1, "rotation", rot)):
        out = add_accessor(doc, k.reshape(-1, k.shape[2]), 5126, f"VEC{k.shape[2]}")
        anim["samplers"].append({"input": ti, "output": out, "interpolation": "CUBICSPLINE"})
        anim["channels"].append({"sampler": len(anim["samplers"]) - 1, "target": {"node": node, "path": path}})
    asset = read_doc(doc)
    ch, rch = asset.animations[0].channels[1:]
    assert ch.interpolation == "CUBICSPLINE"
    np.testing.assert_array_equal(ch.key_in_tangent, keys[:, 0])
    # t = 2 s lies in [1, 3]: dt = 2, s = 0.5; p = h00 v1 + h10 dt b1 + h01 v2 + h11 dt a2
    s, dt = 0.5, 2.0
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
    want = h00 * keys[1, 1] + h10 * dt * keys[1, 2] + h01 * keys[2, 1] + h11 * dt * keys[2, 0]
    np.testing.assert_allclose(sample_channel(ch, [2.0])[0], want, atol=1e-6)
    np.testing.assert_allclose(want, [1.625, 0.5, 0.75], atol=1e-6)  # worked by hand
    np.testing.assert_array_equal(sample_channel(ch, times), keys[:, 1])
    t, r, _ = clip_node_trs(asset, 0, [2.0])
    np.testing.assert_allclose(t[0, 2], want, atol=1e-6)
    q = h00 * rot[1, 1] + h10 * dt * rot[1, 2] + h01 * rot[2, 1] + h11 * dt * rot[2, 0]
    np.testing.assert_allclose(sample_channel(rch, [2.0])[0], q / np.linalg.norm(q), atol=1e-6)
    np.testing.assert_allclose(r[0, 1], q / np.linalg.norm(q), atol=1e-6)


def test_clip_node_trs_and_locals(gltf_dir):
    fox = load_gltf(gltf_dir / "Fox.glb")
    clip = fox.animation("Run")
    times = np.linspace(0, clip.duration, 7)
    t, r, s = clip_node_trs(fox, "Run", times)
    assert t.shape == (7, 26, 3) and r.shape == (7, 26, 4) and s.shape == (7, 26, 3)
    animated = {ch.node for ch in clip.channels}
    still = [i for i in range(fox.num_nodes) if i not in animated]
    np.testing.assert_array_equal(r[:, still], np.broadcast_to(fox.node_rotation[still], (7, len(still), 4)))
    ch = next(c for c in clip.channels if c.path == "rotation")
    np.testing.assert_array_equal(r[:, ch.node], sample_channel(ch, times))
    local = clip_node_local(fox, clip, times)
    np.testing.assert_allclose(local, trs_matrices(t, r, s))
    world = world_matrices(fox.node_parent, fox.node_order, local)
    assert world.shape == (7, 26, 4, 4) and np.isfinite(world).all()
    with pytest.raises(OptionError, match="Survey"):
        fox.animation("Fly")


def test_morph_targets_with_external_buffers(g2_dir):
    a = load_gltf(g2_dir / "SimpleMorph" / "glTF" / "SimpleMorph.gltf")
    mesh = a.meshes[0]
    np.testing.assert_array_equal(mesh.target_weight, [0.5, 0.5])
    assert mesh.target_name == ("target0", "target1")
    p = mesh.primitives[0]
    assert p.target_position.shape == (2, len(p.vertex_position), 3) and np.abs(p.target_position).max() > 0
    w = clip_target_weights(a, 0, [0.0, a.animations[0].duration])
    assert list(w) == [0] and w[0].shape == (2, 2)
    prim = load_gltf(g2_dir / "MorphPrimitivesTest" / "glTF" / "MorphPrimitivesTest.gltf")
    assert [p.material for p in prim.meshes[0].primitives] == [0, 1]
    assert prim.images[0].uri == "uv_texture.jpg" and prim.images[0].data[:2] == b"\xff\xd8"
    stress = load_gltf(g2_dir / "MorphStressTest" / "glTF" / "MorphStressTest.gltf")
    assert stress.meshes[0].target_name[0] == "Key 1" and stress.materials[0].double_sided


def test_sparse_accessors(gltf_dir):  # accessor features built into copies of the real files
    doc = simple_skin(gltf_dir)
    base = read_doc(doc).meshes[0].primitives[0].vertex_position
    pos = doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"]
    idx, vals = np.array([1, 7], np.uint16), np.array([[5, 6, 7], [-1, -2, -3]], np.float32)
    ii, vi = add_accessor(doc, idx, 5123, "SCALAR"), add_accessor(doc, vals, 5126, "VEC3")
    views = {k: doc["accessors"][k]["bufferView"] for k in (ii, vi)}
    doc["accessors"][pos]["sparse"] = {"count": 2, "indices": {"bufferView": views[ii], "componentType": 5123},
                                       "values": {"bufferView": views[vi]}}
    for want in (base.copy(), np.zeros_like(base)):  # then without a bufferView: from zeros
        want[[1, 7]] = vals
        np.testing.assert_array_equal(read_doc(doc).meshes[0].primitives[0].vertex_position, want)
        doc["accessors"][pos].pop("bufferView", None)
    doc["accessors"][pos]["sparse"]["count"] = 3
    with pytest.raises(FormatError, match=rf"accessors\[{pos}\].sparse.indices.bufferView"):
        read_doc(doc)


def test_strides_normalized_types_and_padded_matrices():
    # interleaved: position (3 × f32) + uv (2 × u16 normalized) → stride 16
    pos = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8]], np.float32)
    uv = np.array([[0, 65535], [32768, 1], [65535, 0]], np.uint16)
    rec = np.rec.fromarrays([pos, uv], dtype=[("p", "<f4", 3), ("uv", "<u2", 2)])
    mat2 = np.array([[1, 2, 0, 0, 3, 4, 0, 0], [-127, 127, 9, 9, 0, -64, 9, 9]], np.int8)  # MAT2 columns padded to 4
    raw = rec.tobytes() + mat2.tobytes() + np.array([-32768, 32767, 0, 16384], np.int16).tobytes()
    views = [{"buffer": 0, "byteLength": 48, "byteStride": 16}, {"buffer": 0, "byteOffset": 48, "byteLength": 16},
             {"buffer": 0, "byteOffset": 64, "byteLength": 8}]
    acc = [dict(bufferView=0, componentType=5126, count=3, type="VEC3"),
           dict(bufferView=0, byteOffset=12, componentType=5123, count=3, type="VEC2", normalized=True),
           dict(bufferView=1, componentType=5120, count=2, type="MAT2", normalized=True),
           dict(bufferView=2, componentType=5122, count=1, type="VEC4", normalized=True)]
    root = Obj({"bufferViews": views, "accessors": acc}, "", "mem.gltf")
    accessors = Accessors(root, [memoryview(raw)])
    np.testing.assert_array_equal(accessors.floats(0, root, "x"), pos)
    np.testing.assert_allclose(accessors.floats(1, root, "x"), uv / 65535.0, rtol=1e-6)
    np.testing.assert_allclose(accessors.floats(2, root, "x"), [[1 / 127, 2 / 127, 3 / 127, 4 / 127],
                                                                [-1, 1, 0, -64 / 127]], rtol=1e-6)
    np.testing.assert_allclose(accessors.floats(3, root, "x"), [[-1, 1, 0, 16384 / 32767]], rtol=1e-6)
    acc[0]["count"] = 4  # one element more than the strided view holds
    with pytest.raises(FormatError, match=r"accessors\[0\].count': 4 elements of 16 bytes"):
        Accessors(root, [memoryview(raw)]).floats(0, root, "x")


def test_strips_fans_and_lines(gltf_dir):
    where = Obj({}, "meshes[0].primitives[0]", "mem")
    idx = np.arange(6, dtype=np.uint32)
    np.testing.assert_array_equal(triangles(idx, 5, where), [[0, 1, 2], [1, 3, 2], [2, 3, 4], [3, 5, 4]])
    np.testing.assert_array_equal(triangles(idx, 6, where), [[1, 2, 0], [2, 3, 0], [3, 4, 0], [4, 5, 0]])
    np.testing.assert_array_equal(triangles(np.array([0, 1, 1, 2, 3], np.uint32), 5, where), [[1, 2, 3]])
    with pytest.raises(FormatError, match=r"primitives\[0\].indices': 5 indices"):
        triangles(idx[:5], 4, where)
    doc = simple_skin(gltf_dir)
    doc["meshes"][0]["primitives"][0]["mode"] = 1
    a = read_doc(doc)
    assert a.meshes[0].primitives == () and "mode 1 (lines)" in a.warnings[0]
    doc["meshes"][0]["primitives"][0]["mode"] = 5
    p = read_doc(doc).meshes[0].primitives[0]
    assert p.mode == 5 and len(p.face_vertex) > 0


# --- bad files ----------------------------------------------------------------------------------

def test_truncated_glb_is_a_format_error(gltf_dir):
    data = (gltf_dir / "Fox.glb").read_bytes()
    with pytest.raises(FormatError, match=r"Fox.glb, section 'GLB header', byte 8: truncated"):
        read_gltf(data[:-100], "Fox.glb")
    for cut in list(range(0, 40, 3)) + list(range(40, len(data), len(data) // 37)):
        with pytest.raises(FormatError):
            read_gltf(data[:cut], "Fox.glb")
    bad = bytearray(data)
    bad[4] = 1
    with pytest.raises(FormatError, match="GLB version 1"):
        read_gltf(bytes(bad), "Fox.glb")


def _set(path, value):
    """A mutation of the document: ``path`` (keys) gets ``value`` (a callable gets the doc)."""
    def mutate(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value(d) if callable(value) else value
    return mutate


def test_lying_counts_offsets_and_indices_name_the_json_path(gltf_dir):
    doc, bin_ = unpack_glb((gltf_dir / "Fox.glb").read_bytes())
    pos = doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"]
    view = doc["accessors"][pos]["bufferView"]
    prim, skin = ["meshes", 0, "primitives", 0], ["skins", 0]
    cases = [  # a count that lies: nothing may be allocated for it
        (_set(["accessors", pos, "count"], 10**9), rf"section 'accessors\[{pos}\]\.count': 1000000000 elements"),
        (_set(["bufferViews", view, "byteOffset"], len(bin_) - 8),  # the accessor's view runs past the buffer
         rf"bufferViews\[{view}\]\.byteLength': .* past the end of buffers\[0\]"),
        (_set(["accessors", pos, "byteOffset"], 10**6), rf"accessors\[{pos}\]\.byteOffset"),
        (_set(["buffers", 0, "byteLength"], len(bin_) + 1000), r"buffers\[0\]\.byteLength': says"),
        (lambda d: (d["accessors"][pos].pop("bufferView"), _set(["accessors", pos, "count"], 10**12)(d)),
         rf"accessors\[{pos}\]\.count': .* without a bufferView"),  # zeros the file could never hold
        (_set(prim + ["attributes", "POSITION"], 999), r"attributes\.POSITION': index 999 is out of range"),
        (_set(["nodes", 0, "children"], [0]), r"nodes\[0\]\.children\[0\]': node 0 is its own child"),
        (_set(["nodes", 3, "children"], [2]), r"nodes\[\d+\]\.children|cycle"),
        (_set(["nodes", 3, "rotation"], [0, 0, 0, 0]), r"nodes\[3\]\.rotation': has length 0"),
        (_set(skin + ["joints", 0], 26), r"skins\[0\]\.joints\[0\]': index 26"),
        (_set(["animations", 1, "channels", 0, "target", "node"], -1),
         r"animations\[1\]\.channels\[0\]\.target\.node': -1 is below 0"),
        (_set(skin + ["joints"], lambda d: d["joints"][:3]),
         r"skins\[0\]\.inverseBindMatrices': has 24 matrices for 3 joints"),
        (_set(["materials", 0, "pbrMetallicRoughness", "baseColorTexture", "index"], 5),
         r"baseColorTexture\.index': index 5"),
        (_set(["accessors", 0, "componentType"], 5124), r"accessors\[0\]\.componentType"),
    ]
    for mutate, pattern in cases:
        bad = copy.deepcopy(doc)
        mutate(bad)
        with pytest.raises(FormatError, match=pattern):
            read_gltf(pack_glb(bad, bin_), "Fox.glb")
    nan_bin = bytearray(bin_)
    at = doc["bufferViews"][view].get("byteOffset", 0) + doc["accessors"][pos].get("byteOffset", 0)
    nan_bin[at:at + 4] = struct.pack("<f", float("nan"))
    with pytest.raises(FormatError, match=rf"accessors\[{pos}\]': holds NaN"):
        read_gltf(pack_glb(doc, bytes(nan_bin)), "Fox.glb")


def test_bad_json(gltf_dir):
    text = (gltf_dir / "SimpleSkin.gltf").read_bytes()
    with pytest.raises(FormatError, match=r"SimpleSkin.gltf, section 'JSON': not valid JSON: .* line"):
        read_gltf(text[:-40], "SimpleSkin.gltf")
    doc = json.loads(text)
    doc["asset"]["version"] = "1.0"
    with pytest.raises(FormatError, match=r"asset.version': glTF '1.0'"):
        read_doc(doc)
    doc["asset"]["version"] = "2.0"
    doc["nodes"][1]["translation"] = [0, float("nan"), 0]  # Python's json writes and reads NaN
    with pytest.raises(FormatError, match=r"nodes\[1\]\.translation': expected 3 finite numbers"):
        read_doc(doc)
    data = (gltf_dir / "Fox.glb").read_bytes()
    n = struct.unpack_from("<I", data, 12)[0]
    broken = data[:20] + b"{" + data[21:20 + n].replace(b'"', b"'", 3) + data[20 + n:]
    with pytest.raises(FormatError, match="Fox.glb, section 'JSON': not valid JSON"):
        read_gltf(broken, "Fox.glb")


def test_external_files_stay_in_the_folder(g2_dir, tmp_path):
    src = g2_dir / "SimpleMorph" / "glTF"
    doc = json.loads((src / "SimpleMorph.gltf").read_text())
    (tmp_path / "m").mkdir()
    for dst, name in (("m/simpleMorphGeometry.bin", "simpleMorphGeometry.bin"),
                      ("simpleMorphAnimation.bin", "simpleMorphAnimation.bin"), ("m/anim.bin", "simpleMorphAnimation.bin")):
        (tmp_path / dst).write_bytes((src / name).read_bytes())
    path = tmp_path / "m" / "SimpleMorph.gltf"
    cases = [("simpleMorphAnimation.bin", r"uri': external buffer 'simpleMorphAnimation.bin' not found"),
             ("../simpleMorphAnimation.bin", r"uri': .*outside the glTF file's folder"),
             ("sub/../../simpleMorphAnimation.bin", r"uri': .*outside the glTF file's folder"),
             (str(tmp_path / "simpleMorphAnimation.bin"), r"uri': .*relative to the glTF file"),
             ("file:///etc/passwd", r"uri': .*relative"), ("http://x/y.bin", r"uri': .*relative")]
    for uri, pattern in cases:
        doc["buffers"][1]["uri"] = uri
        path.write_text(json.dumps(doc))
        with pytest.raises(FormatError, match=r"SimpleMorph.gltf, section 'buffers\[1\]\." + pattern):
            load_gltf(path)
    with pytest.raises(FormatError, match="outside"):
        read_gltf(json.dumps(doc | {"buffers": [doc["buffers"][0], {"byteLength": 60, "uri": "../x.bin"}]}).encode(),
                  "", base_dir=str(tmp_path / "m"))
    doc["buffers"][1]["uri"] = "anim.bin"
    path.write_text(json.dumps(doc))
    assert len(load_gltf(path).animations[0].channels) == 1
    with pytest.raises(FormatError, match="needs the glTF file's folder"):
        read_gltf(json.dumps(doc).encode(), "")


def test_missing_image_is_a_warning(g2_dir, tmp_path):
    src = g2_dir / "MorphPrimitivesTest" / "glTF"
    (tmp_path / "MorphPrimitivesTest.bin").write_bytes((src / "MorphPrimitivesTest.bin").read_bytes())
    (tmp_path / "a.gltf").write_bytes((src / "MorphPrimitivesTest.gltf").read_bytes())
    a = load_gltf(tmp_path / "a.gltf")
    assert a.images[0].data == b"" and "uv_texture.jpg" in a.warnings[0]


def test_random_json_damage_gives_only_format_errors(gltf_dir):
    """Integers/strings of the document replaced by wrong values: a FormatError or a clean read."""
    doc, bin_ = unpack_glb((gltf_dir / "Fox.glb").read_bytes())
    slots = []

    def walk(o, path):
        for k, v in (o.items() if isinstance(o, dict) else enumerate(o)):
            if isinstance(v, (dict, list)):
                walk(v, path + [k])
            elif not isinstance(v, float):
                slots.append(path + [k])

    walk({k: v for k, v in doc.items() if k != "asset"}, [])
    rng, errors = np.random.default_rng(14), 0
    for n in rng.choice(len(slots), 150, replace=False):
        bad = copy.deepcopy(doc)
        *head, last = slots[n]
        target = bad
        for k in head:
            target = target[k]
        target[last] = [-1, 10**7, "x", None, 2.5, [], 3][int(rng.integers(7))]
        try:
            read_gltf(pack_glb(bad, bin_), "Fox.glb")
        except FormatError as e:
            errors += 1
            assert "\n" not in str(e) and str(e).startswith("Fox.glb")
    assert errors > 50
