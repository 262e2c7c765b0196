"""FBX, DirectX .x, COLLADA, BVH and the other formats Assimp reads → MMD ``Model`` + clip ``Motion``s.

In: a path (or the file's bytes and path). The C++ bridge ``mmdkit.importers._assimp`` (system
Assimp, see ``DEFAULT_FLAGS``), run in a worker of a helper process (``assimp_process``: a crash,
hang or runaway allocation of Assimp is a ``FormatError``, never the caller's end), gives the scene
in Assimp's space (right-handed, file units), checked by ``assimp_checks``; ``assimp_asset`` turns
it into a ``GltfAsset`` (the input contract of ``import_scene``,
docs/import.md) and ``import_scene`` does the rest. Out: ``load_assimp_scene(path)`` → (Model,
Clips); ``read_assimp_model(data, path)`` is what ``mmdkit.load`` calls for .fbx/.x/.dae/...
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np

from mmdkit.errors import FormatError, MmdkitError, UnavailableError
from mmdkit.formats import ASSIMP_EXTENSIONS as EXTENSIONS  # what mmdkit.load reads through Assimp
from mmdkit.formats.gltf import (GltfAnimation, GltfAsset, GltfChannel, GltfImage, GltfMaterial, GltfMesh,
                                 GltfPrimitive, GltfSkin, trs_matrices, world_matrices)
from mmdkit.formats.io import read_bytes
from mmdkit.importers import assimp_process
from mmdkit.importers.assimp_checks import check_numbers, check_x_skin_weights
from mmdkit.importers.clips import Clips
from mmdkit.importers.scene import import_scene
from mmdkit.model.model import Model
from mmdkit.model.textures import texture_bytes
from mmdkit.model.space import MMD_UNITS_PER_METRE, quaternions_from_rotations

__all__ = ["EXTENSIONS", "DEFAULT_FLAGS", "read_assimp_raw", "assimp_asset", "unit_scale", "read_assimp_scene",
           "read_assimp_model", "load_assimp_scene", "load_assimp_model"]

DEFAULT_FLAGS = ("Triangulate", "JoinIdenticalVertices", "GenSmoothNormals", "SortByPType", "FlipUVs",
                 "ValidateDataStructure")
"""Assimp post-processing the bridge applies (``_assimp.DEFAULT_FLAGS``). The seed's three —
Triangulate (the contract holds triangles), JoinIdenticalVertices (one shared vertex per corner:
.x/FBX store vertices per face) and limiting bone weights to 4 — where the last is done by the
bridge itself (the 4 largest, renormalised) because Assimp 5.2's LimitBoneWeights also deletes
every bone left without weights (RobotExpressive.glb would lose 17 of its 58 bones, and the
skeleton its shape) — plus GenSmoothNormals (only for meshes without normals; smooth so vertices
stay shared), SortByPType (points and lines are dropped, AI_CONFIG_PP_SBP_REMOVE), FlipUVs (UV
origin top-left as glTF and MMD store it) and ValidateDataStructure (a broken file fails with a
message instead of crashing later). Not MakeLeftHanded/FlipWindingOrder: ``import_scene`` converts
to MMD space; not PreTransformVertices/OptimizeGraph: they destroy the skeleton and its clips.
FBX pivots are collapsed (AI_CONFIG_IMPORT_FBX_PRESERVE_PIVOTS off), so no '$AssimpFbx$' helper
nodes sit between bones."""

_MIME = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "bmp": "image/bmp", "webp": "image/webp"}
_DETAIL = 240  # characters of Assimp's message kept (some quote kilobytes of the file)
_SHEAR = 1e-5  # relative error of T·R·S against a node matrix above which the matrix is kept as is


def _bridge():
    """The compiled extension, else ``UnavailableError`` saying how to get it."""
    try:
        from mmdkit.importers import _assimp
    except ImportError:
        raise UnavailableError("Assimp support needs libassimp-dev: run scripts/setup.sh") from None
    return _assimp


def read_assimp_raw(data: bytes | None, path: str) -> dict:
    """The bridge's scene dict for ``path`` (read from disk when it is a file, so external files
    beside it resolve; else from ``data``), read in the helper's worker, with ``warnings`` and
    ``source_bytes`` (the file's size: what importing it may expand to is budgeted by it);
    ``FormatError`` with Assimp's message, or saying that Assimp crashed, hung or ran out of
    memory, otherwise."""
    bridge = _bridge().__file__
    if str(path).lower().endswith(".x"):
        check_x_skin_weights(read_bytes(path) if data is None else data, path)
    on_disk = bool(path) and os.path.isfile(path)
    size = os.path.getsize(path) if on_disk else len(data or b"")
    try:
        raw = assimp_process.load(bridge, str(path), None if on_disk else data)
        return dict(raw, warnings=[], source_bytes=size)
    except MmdkitError:  # Assimp crashed, hung or ran out of memory; a limit is not a number
        raise
    except ValueError as e:
        detail = " ".join(str(e).split())[:_DETAIL] or "Assimp could not read it"
        if str(path).lower().endswith(".dae") and detail.startswith("Cannot parse string"):
            return dict(_collada_retry(bridge, data, path, detail), source_bytes=size)
        raise FormatError(f"Assimp: {detail}", path=str(path)) from None


def _collada_retry(bridge: str, data: bytes | None, path: str, detail: str) -> dict:
    """Assimp 5.2's COLLADA reader fails on numbers after leading blanks (``<color>  0.0 …``,
    library_animation_clips.dae): read again with the blanks after each tag removed."""
    text = re.sub(rb">[ \t\r\n]+", b">", read_bytes(path) if data is None else data)
    try:
        raw = assimp_process.load(bridge, str(path), text)
    except MmdkitError:
        raise
    except ValueError:
        raise FormatError(f"Assimp: {detail}", path=str(path)) from None
    return dict(raw, warnings=["read again without the blanks after tags (Assimp 5.2's COLLADA reader "
                               f"rejects them: {detail[:60]})"])


def _node_fields(raw: dict, animated: np.ndarray) -> dict:
    """Node arrays of ``GltfAsset`` from the bridge's nodes (parents first, root 0)."""
    nodes = raw["nodes"]
    local = np.asarray(nodes["local"], np.float64)
    n = len(local)
    lin = local[:, :3, :3]
    scale = np.linalg.norm(lin, axis=1)
    scale[:, 0] *= np.where(np.linalg.det(lin) < 0, -1.0, 1.0)
    rot = quaternions_from_rotations(lin / np.where(scale == 0, 1.0, scale)[:, None, :])
    trs = trs_matrices(local[:, :3, 3], rot, scale)
    err = np.abs(trs - local).max(axis=(1, 2)) / np.maximum(1.0, np.abs(local).max(axis=(1, 2)))
    parent = np.asarray(nodes["parent"], np.int32)
    order = np.arange(n, dtype=np.int32)
    return dict(node_name=tuple(nodes["name"]), node_parent=parent, node_order=order,
                node_translation=local[:, :3, 3].astype(np.float32), node_rotation=rot.astype(np.float32),
                node_scale=scale.astype(np.float32), node_has_matrix=(err > _SHEAR) & ~animated,
                node_local=local.astype(np.float32),
                node_world=world_matrices(parent, order, local).astype(np.float32),
                node_target_weight=(None,) * n, scene_root=(np.zeros(1, np.int32),), scene=0)


def _find_node(names: tuple[str, ...]) -> dict[str, int]:
    """{name: first node of that name}."""
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)
    return index


def _add_missing_bones(raw: dict, warnings: list[str]) -> None:
    """Give bones that name no node (anim_test.x weighs vertices to 'joint3' and 'joint4', which the
    file never defines) a node of their own, appended to ``raw['nodes']``: a child of the bone listed
    before it in its mesh (chains list parent before child; the mesh node for the first) placed at
    its bind pose, so its vertices follow that bone."""
    nodes = raw["nodes"]
    names = list(nodes["name"])
    index = _find_node(tuple(names))
    parent, local = list(nodes["parent"]), list(np.asarray(nodes["local"], np.float64))
    world = list(world_matrices(np.asarray(parent), np.arange(len(parent)), np.asarray(local)))
    added = []
    for node, ids in enumerate(nodes["meshes"]):
        for i in ids:
            m = raw["meshes"][i]
            offset = np.asarray(m["bone_offset"], np.float64)
            known = [k for k, b in enumerate(m["bone_name"]) if b in index]
            bind = world[index[m["bone_name"][known[0]]]] @ offset[known[0]] if known else world[node]
            prev = node
            for k, bone in enumerate(m["bone_name"]):
                if bone not in index:
                    index[bone] = len(names)
                    names.append(bone)
                    parent.append(prev)
                    world.append(bind @ np.linalg.inv(offset[k]))
                    local.append(np.linalg.solve(world[prev], world[-1]))
                    added.append(f"{bone!r} (under {names[prev]!r})")
                prev = index[bone]
    if added:
        warnings.append(f"bones without a node in the hierarchy attached at their bind pose: {', '.join(added)}")
        raw["nodes"] = dict(name=names, parent=np.asarray(parent, np.int32), local=np.asarray(local),
                            meshes=list(nodes["meshes"]) + [[] for _ in added])


def _skin(node: int, parts: list[dict], node_index: dict[str, int], warnings: list[str]):
    """The skin of mesh node ``node`` over the bones of its meshes ``parts`` (union by name; vertices
    no bone weighs, and meshes without bones, follow the node itself) → (GltfSkin, per part its
    (V, 4) uint16 joints and (V, 4) float32 weights); (None, None) when no part has bones."""
    if not any(len(p["bone_name"]) for p in parts):
        return None, None
    joint_node: list[int] = []
    joint_ibm: list[np.ndarray] = []
    slot: dict[int, int] = {}

    def joint(jn: int, ibm: np.ndarray) -> int:
        if jn not in slot:
            slot[jn] = len(joint_node)
            joint_node.append(jn)
            joint_ibm.append(ibm)
        elif np.abs(joint_ibm[slot[jn]] - ibm).max() > 1e-4 * max(1.0, np.abs(ibm).max()):
            warnings.append(f"node {node}: bone {jn} has different offset matrices in its meshes; the first is used")
        return slot[jn]

    out = []
    for p in parts:
        bone_joint = []
        for name, ibm in zip(p["bone_name"], p["bone_offset"]):
            if name not in node_index:
                raise FormatError(f"bone {name!r} names no node of the hierarchy")
            bone_joint.append(joint(node_index[name], np.asarray(ibm, np.float64)))
        vb = np.asarray(p["vertex_bone"], np.int64)
        vw = np.array(p["vertex_weight"], np.float32)
        loose = vb[:, 0] < 0
        if loose.any():
            vb[loose, 0] = len(bone_joint)
            vw[loose, 0] = 1.0
            bone_joint.append(joint(node, np.eye(4)))
        table = np.asarray(bone_joint, np.int64)
        out.append((np.where(vb >= 0, table[np.maximum(vb, 0)], 0).astype(np.uint16), vw))
    skin = GltfSkin(name="", joint_node=np.asarray(joint_node, np.int32),
                    joint_inverse_bind=np.asarray(joint_ibm, np.float32), skeleton=-1)
    return skin, out


def _targets(parts: list[dict]) -> tuple[tuple[str, ...], np.ndarray, list[list[int]]]:
    """Morph target names of a node's meshes (union by name, unnamed: 'target<k>'), their default
    weights (K,) float32, and per part the target index of each of its anim meshes."""
    names: list[str] = []
    weights: list[float] = []
    index = []
    for p in parts:
        own = []
        for k, (name, w) in enumerate(zip(p["target_name"], p["target_weight"])):
            name = name or f"target{k}"
            if name not in names:
                names.append(name)
                weights.append(float(w))
            own.append(names.index(name))
        index.append(own)
    return tuple(names), np.asarray(weights, np.float32), index


def _primitive(p: dict, joints, target_index: list[int], n_targets: int) -> GltfPrimitive:
    """One bridge mesh → ``GltfPrimitive`` (morph targets as deltas from the base positions)."""
    pos = np.asarray(p["position"], np.float32)
    tpos = np.zeros((n_targets, len(pos), 3), np.float32)
    tnrm = None
    for k, t, tn in zip(target_index, p["target_position"], p["target_normal"]):
        if t is not None:
            tpos[k] = t - pos
        if tn is not None and p["normal"] is not None:
            tnrm = np.zeros_like(tpos) if tnrm is None else tnrm
            tnrm[k] = tn - p["normal"]
    return GltfPrimitive(vertex_position=pos, vertex_normal=p["normal"], vertex_uv=p["uv"], vertex_color=None,
                         vertex_joint=None if joints is None else joints[0],
                         vertex_weight=None if joints is None else joints[1],
                         face_vertex=np.asarray(p["face"], np.uint32), target_position=tpos, target_normal=tnrm,
                         material=int(p["material"]), mode=4)


def _mesh_fields(raw: dict, node_index: dict[str, int], warnings: list[str]) -> dict:
    """node_mesh, node_skin, meshes and skins: one mesh (of one primitive per Assimp mesh) and at
    most one skin per node that draws meshes."""
    n = len(raw["nodes"]["name"])
    node_mesh, node_skin = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
    meshes, skins = [], []
    for node, ids in enumerate(raw["nodes"]["meshes"]):
        if not ids:
            continue
        parts = [raw["meshes"][i] for i in ids]
        skin, joints = _skin(node, parts, node_index, warnings)
        names, defaults, index = _targets(parts)
        prims = tuple(_primitive(p, None if joints is None else joints[k], index[k], len(names))
                      for k, p in enumerate(parts))
        limited = sum(int(p["limited"]) for p in parts)
        if limited:
            warnings.append(f"node {node}: {limited} vertices had more than 4 bone weights; the 4 largest are kept, "
                            "renormalised")
        node_mesh[node] = len(meshes)
        meshes.append(GltfMesh(name=parts[0]["name"], primitives=prims, target_weight=defaults, target_name=names))
        if skin is not None:
            node_skin[node] = len(skins)
            skins.append(skin)
    return dict(node_mesh=node_mesh, node_skin=node_skin, meshes=tuple(meshes), skins=tuple(skins))


def _linear(srgb: np.ndarray) -> np.ndarray:
    """Display colour values → linear (the contract's base colour is linear, as glTF's)."""
    c = np.clip(np.asarray(srgb, np.float64), 0.0, 1.0)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _embedded_image(tex: dict, name: str) -> GltfImage:
    """A texture the file holds: compressed bytes as they are (named by the file name it had, so
    its type shows: .tga has no signature); raw BGRA texels → PNG."""
    own = Path(tex["filename"].replace("\\", "/")).name  # the file name it had, when the file says
    hint = tex["hint"].lower() or Path(own).suffix[1:].lower()
    if tex["height"] == 0:
        return GltfImage(name=Path(own).stem or name, mime=_MIME.get(hint, ""), data=tex["data"],
                         uri=own if Path(own).suffix else "")
    from PIL import Image

    bgra = np.frombuffer(tex["data"], np.uint8).reshape(tex["height"], tex["width"], 4)
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(bgra[..., [2, 1, 0, 3]]), "RGBA").save(out, "PNG")
    return GltfImage(name=name, mime="image/png", data=out.getvalue(), uri="")


def _external_image(ref: str, folder: Path, warnings: list[str]) -> GltfImage:
    """A texture file named by the model: looked up inside its folder as the renderer looks one up
    (``texture_bytes``: any case, '\\' or '/', never leaving the folder), else by its bare file
    name there (files made elsewhere name 'C:\\…\\tex.png')."""
    rel = ref.replace("\\", "/")
    for candidate in dict.fromkeys((rel, Path(rel).name)):
        try:
            data = texture_bytes(candidate, str(folder), None)
        except FormatError:  # absolute, or leaving the folder: only the file name is looked up
            continue
        if data is not None:
            return GltfImage(name=Path(rel).stem, mime=_MIME.get(Path(candidate).suffix[1:].lower(), ""), data=data,
                             uri=rel if not Path(rel).is_absolute() else Path(rel).name)
    warnings.append(f"texture {ref!r} not found beside the model; its material is drawn untextured")
    return GltfImage(name=Path(rel).stem, mime="", data=b"", uri="")


def _image(ref: str, textures: list[dict], by_file: dict[str, int], folder: Path, warnings: list[str]) -> GltfImage:
    """The image a material names: '*N' (the file's N-th texture), an embedded texture of that file
    name, else a file beside the model."""
    name = Path(ref.replace("\\", "/")).name.lower()
    emb = int(ref[1:]) if ref[:1] == "*" and ref[1:].isdigit() else by_file.get(name)
    if emb is not None and emb < len(textures):
        return _embedded_image(textures[emb], f"texture{emb}")
    return _external_image(ref, folder, warnings)


def _material_fields(raw: dict, path: str, warnings: list[str]) -> dict:
    """materials and images: base colour (linear), alpha mode, double-sided, diffuse texture."""
    gltf = raw["importer"].lower().startswith("gltf")
    folder = Path(path).parent if path else Path(".")
    textures = raw["textures"]
    by_file = {Path(t["filename"].replace("\\", "/")).name.lower(): k for k, t in enumerate(textures) if t["filename"]}
    images: list[GltfImage] = []
    image_of: dict[str, int] = {}
    materials = []
    for k, m in enumerate(raw["materials"]):
        ref = m["texture"]
        if ref and ref not in image_of:
            image_of[ref] = len(images)
            images.append(_image(ref, textures, by_file, folder, warnings))
        color = np.asarray(m["color"], np.float64)
        if gltf:
            alpha, mode = color[3], m["alpha_mode"] or "OPAQUE"
        else:
            alpha = color[3] * m["opacity"]
            mode = "BLEND" if alpha < 1.0 else "OPAQUE"
            color = _linear(color)
        materials.append(GltfMaterial(name=m["name"] or f"material{k}",
                                      base_color=np.r_[color[:3], alpha].astype(np.float32),
                                      base_color_image=image_of.get(ref, -1) if ref else -1, base_color_uv=0,
                                      alpha_mode=mode, alpha_cutoff=0.5, double_sided=bool(m["two_sided"])))
    return dict(materials=tuple(materials), images=tuple(images))


def _keys(time: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key times (seconds) made non-decreasing by a stable sort, as float32 with their values."""
    order = np.argsort(time, kind="stable")
    return np.asarray(time, np.float64)[order].astype(np.float32), np.asarray(value, np.float32)[order]


def _morph_channel(c: dict, node: int, asset_meshes, raw: dict, node_mesh: np.ndarray) -> GltfChannel | None:
    """An Assimp morph channel (sparse target/weight pairs per key) → a dense 'weights' channel."""
    mesh = asset_meshes[node_mesh[node]]
    first = raw["meshes"][raw["nodes"]["meshes"][node][0]]
    index = [mesh.target_name.index(name or f"target{k}") for k, name in enumerate(first["target_name"])]
    target, weight = np.asarray(c["target"]), np.asarray(c["weight"])
    dense = np.zeros((len(c["time"]), len(mesh.target_name)), np.float32)
    for key, col in zip(*np.nonzero((target >= 0) & (target < len(index)))):
        dense[key, index[target[key, col]]] = weight[key, col]
    t, v = _keys(c["time"], dense)
    return GltfChannel(node=node, path="weights", interpolation="LINEAR", key_time=t, key_value=v,
                       key_in_tangent=None, key_out_tangent=None)


def _animations(raw: dict, node_index: dict[str, int], meshes, node_mesh: np.ndarray,
                warnings: list[str]) -> tuple[GltfAnimation, ...]:
    """Assimp animations → clips of LINEAR channels (times in seconds = ticks / ticks per second)."""
    clips = []
    for a in raw["animations"]:
        channels = []
        for c in a["channels"]:
            node = node_index.get(c["node"])
            if node is None:
                warnings.append(f"clip {a['name']!r}: channel of unknown node {c['node']!r} skipped")
                continue
            for path in ("translation", "rotation", "scale"):
                if len(c[path + "_time"]):
                    t, v = _keys(c[path + "_time"], c[path])
                    channels.append(GltfChannel(node=node, path=path, interpolation="LINEAR", key_time=t,
                                                key_value=v, key_in_tangent=None, key_out_tangent=None))
        for c in a["morph_channels"]:
            node = node_index.get(c["name"])
            if node is not None and node_mesh[node] >= 0 and len(meshes[node_mesh[node]].target_name):
                channels.append(_morph_channel(c, node, meshes, raw, node_mesh))
        duration = max((float(ch.key_time[-1]) for ch in channels), default=max(0.0, float(a["duration"])))
        clips.append(GltfAnimation(name=a["name"], channels=tuple(channels), duration=duration))
    return tuple(clips)


def _animated_nodes(raw: dict, node_index: dict[str, int], n: int) -> np.ndarray:
    """(N,) bool: nodes some clip moves."""
    out = np.zeros(n, bool)
    for a in raw["animations"]:
        for c in a["channels"]:
            if c["node"] in node_index:
                out[node_index[c["node"]]] = True
    return out


def assimp_asset(raw: dict, path: str = "") -> GltfAsset:
    """The bridge's scene dict → ``GltfAsset`` (Assimp's space: right-handed, file units)."""
    warnings = list(raw.get("warnings", ()))
    if not raw["meshes"]:
        raise FormatError("no meshes to draw or pose (Assimp read only a node hierarchy)", path=path)
    check_numbers(raw, path)
    _add_missing_bones(raw, warnings)
    names = tuple(raw["nodes"]["name"])
    node_index = _find_node(names)
    try:
        mesh = _mesh_fields(raw, node_index, warnings)
    except FormatError as e:
        raise FormatError(e.detail, path=path) from None
    nodes = _node_fields(raw, _animated_nodes(raw, node_index, len(names)))
    anims = _animations(raw, node_index, mesh["meshes"], mesh["node_mesh"], warnings)
    return GltfAsset(path=path, **nodes, **mesh, **_material_fields(raw, path, warnings), animations=anims,
                     warnings=tuple(warnings), source_bytes=int(raw.get("source_bytes", 0)))


def unit_scale(raw: dict) -> float:
    """MMD units per file unit: FBX says its unit (UnitScaleFactor: centimetres per unit); glTF and
    COLLADA (Assimp applies <unit>) are metres; other formats have no unit and are taken as metres."""
    factor = raw["metadata"].get("UnitScaleFactor")
    if raw["importer"].lower().startswith("autodesk fbx") and isinstance(factor, (int, float)) and factor > 0:
        return MMD_UNITS_PER_METRE * float(factor) / 100.0
    return MMD_UNITS_PER_METRE


def read_assimp_scene(data: bytes | None, path: str = "", *, scale: float | None = None) -> tuple[Model, Clips]:
    """A file Assimp reads → (Model in MMD space, Clips); ``scale``: MMD units per file unit
    (default ``unit_scale``)."""
    raw = read_assimp_raw(data, path)
    fmt = os.path.splitext(str(path))[1][1:].lower() or "assimp"
    return import_scene(assimp_asset(raw, path), unit_scale=unit_scale(raw) if scale is None else scale,
                        source_format=fmt)


def read_assimp_model(data: bytes, path: str = "") -> Model:
    """Bytes of an Assimp-readable file (.fbx, .x, ...) → Model; what ``mmdkit.load`` calls."""
    return read_assimp_scene(data, path)[0]


def load_assimp_scene(path, *, scale: float | None = None) -> tuple[Model, Clips]:
    """A file Assimp reads → (Model, Clips: {clip name: Motion}, baked on first access)."""
    if not os.path.isfile(path):
        read_bytes(path)  # the same one-line error as every other reader
    return read_assimp_scene(None, str(path), scale=scale)


def load_assimp_model(path, *, scale: float | None = None) -> Model:
    """A file Assimp reads → Model (MMD space)."""
    return load_assimp_scene(path, scale=scale)[0]
