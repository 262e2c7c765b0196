"""Read a whole glTF 2.0 (.gltf JSON or .glb) file into a frozen ``GltfAsset``.

In: the file's bytes, its path (messages, and the folder external buffers/images come from unless
``base_dir`` is given). Out: ``GltfAsset`` (nodes, meshes, skins, materials, images, animations)
in glTF space. Every malformed part raises ``FormatError`` naming the file and the JSON path;
recoverable oddities (skipped line primitives, a missing external image) go to ``warnings``.
"""

from __future__ import annotations

import os

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.gltf.accessor import Accessors
from mmdkit.formats.gltf.animation import read_animation
from mmdkit.formats.gltf.asset import GltfAsset, GltfImage, GltfMaterial, GltfSkin
from mmdkit.formats.gltf.container import (GLB_MAGIC, parse_json, read_buffers, read_uri, sniff_mime,
                                           split_glb)
from mmdkit.formats.gltf.jsonpath import Obj
from mmdkit.formats.gltf.mesh import read_mesh
from mmdkit.formats.gltf.scene import MAX_VALUE, read_nodes
from mmdkit.formats.gltf.vrm import vrm_humanoid
from mmdkit.formats.gltf.vrm_extras import read_vrm_extras

ALPHA_MODES = ("OPAQUE", "MASK", "BLEND")
COMPRESSED = ("KHR_draco_mesh_compression", "EXT_meshopt_compression", "KHR_meshopt_compression")
SUPPORTED_EXTENSIONS = ("KHR_mesh_quantization",)  # integer attributes: decoded by Accessors.floats


def _image(o: Obj, acc: Accessors, base_dir: str | None, warnings: list[str]) -> GltfImage:
    """``images[i]`` → its encoded bytes (from a bufferView, a data: URI or a file beside the glTF)."""
    mime, uri, data = o.str("mimeType", ""), "", b""
    if o.has("bufferView"):
        data = bytes(acc.view(o.int("bufferView", hi=len(acc.views)))[0])
    else:
        uri = o.str("uri")  # a missing texture leaves the model usable: a warning
        data, found = read_uri(uri, o, "uri", base_dir, None, "image", warnings)
        mime = mime or found
        uri = "" if uri.startswith("data:") else uri
    return GltfImage(name=o.str("name", ""), mime=sniff_mime(data, mime), data=data, uri=uri)


def _material(o: Obj, textures: list[Obj], n_images: int) -> GltfMaterial:
    """``materials[i]`` → base colour factor/texture, alpha mode/cutoff, double-sidedness."""
    pbr = o.obj("pbrMetallicRoughness", None)
    color, image, uv = [1.0, 1.0, 1.0, 1.0], -1, 0
    if pbr is not None:
        color = pbr.floats("baseColorFactor", 4, color)
        tex = pbr.obj("baseColorTexture", None)
        if tex is not None:
            t = textures[tex.int("index", hi=len(textures))]
            image = t.int("source", -1, hi=n_images)
            uv = tex.int("texCoord", 0)
    base = np.array(color, np.float32)
    base.flags.writeable = False
    return GltfMaterial(name=o.str("name", ""), base_color=base, base_color_image=image,
                        base_color_uv=uv, alpha_mode=o.str("alphaMode", "OPAQUE", choices=ALPHA_MODES),
                        alpha_cutoff=o.num("alphaCutoff", 0.5), double_sided=o.bool("doubleSided", False))


def _skin(o: Obj, acc: Accessors, n_nodes: int) -> GltfSkin:
    """``skins[i]`` → joints and inverse bind matrices (row-major, column vectors)."""
    joints = np.array(o.ints("joints", n_nodes), np.int32)
    if len(joints) == 0:
        raise o.error("joints", "is empty")
    if o.has("inverseBindMatrices"):
        m = acc.floats(o.int("inverseBindMatrices"), o, "inverseBindMatrices", ("MAT4",))
        if len(m) != len(joints):
            raise o.error("inverseBindMatrices", f"has {len(m)} matrices for {len(joints)} joints")
        if not np.abs(m).max() <= MAX_VALUE:
            raise o.error("inverseBindMatrices", f"holds a value beyond ±{MAX_VALUE:g}")
        ibm = np.ascontiguousarray(m.reshape(-1, 4, 4).transpose(0, 2, 1), np.float32)
    else:
        ibm = np.tile(np.eye(4, dtype=np.float32), (len(joints), 1, 1))
    ibm.flags.writeable = joints.flags.writeable = False
    return GltfSkin(name=o.str("name", ""), joint_node=joints, joint_inverse_bind=ibm,
                    skeleton=o.int("skeleton", -1, hi=n_nodes))


def _check_skinned(root: Obj, nodes: dict, meshes, skins) -> None:
    """Joint indices of a skinned node's mesh must address its skin's joints."""
    seen = set()
    for i in np.flatnonzero((nodes["node_mesh"] >= 0) & (nodes["node_skin"] >= 0)):
        if (nodes["node_mesh"][i], nodes["node_skin"][i]) in seen:
            continue  # the same mesh and skin on another node: checked once
        seen.add((nodes["node_mesh"][i], nodes["node_skin"][i]))
        skin = skins[nodes["node_skin"][i]]
        for j, p in enumerate(meshes[nodes["node_mesh"][i]].primitives):
            if p.vertex_joint is None:
                continue
            used = p.vertex_joint[p.vertex_weight > 0]
            if len(used) and int(used.max()) >= len(skin.joint_node):
                raise root.error(f"nodes[{i}].skin", f"mesh {nodes['node_mesh'][i]} primitive {j} uses "
                                 f"joint {int(used.max())}, skin {nodes['node_skin'][i]} has "
                                 f"{len(skin.joint_node)}")


def _required_extensions(root: Obj, warnings: list[str]) -> None:
    """Compressed geometry cannot be read without its decoder: refuse it; warn about the rest."""
    names = root.d.get("extensionsRequired", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise root.error("extensionsRequired", f"expected a list of extension names, got {names!r:.40}")
    for name in names:
        if name in COMPRESSED:
            raise root.error("extensionsRequired", f"{name} (compressed geometry) is not supported; "
                                                   "re-export the file without compression")
        if name not in SUPPORTED_EXTENSIONS:
            warnings.append(f"extension {name!r:.40} is required by the file but not supported; ignored")


def read_gltf(data: bytes, path: str = "", *, base_dir: str | None = None) -> GltfAsset:
    """glTF 2.0 / GLB bytes → ``GltfAsset``. ``base_dir``: folder of external buffers/images
    (default: the folder of ``path``; without either, only embedded data can be read)."""
    path = str(path)
    if base_dir is None and path:
        base_dir = os.path.dirname(os.path.abspath(path))
    view = memoryview(data)
    glb_bin = None
    if bytes(view[:4]) == GLB_MAGIC:
        text, glb_bin = split_glb(view, path)
    else:
        text = view
    root = parse_json(text, path)
    warnings: list[str] = []
    _required_extensions(root, warnings)
    buffers = read_buffers(root, glb_bin, base_dir)
    source_bytes = len(view) + sum(len(b) for b in buffers)
    acc = Accessors(root, buffers, source_bytes)
    images = tuple(_image(o, acc, base_dir, warnings) for o in root.objs("images"))
    textures = root.objs("textures")
    materials = tuple(_material(o, textures, len(images)) for o in root.objs("materials"))
    meshes = tuple(read_mesh(o, acc, len(materials), warnings) for o in root.objs("meshes"))
    n_nodes = root.count("nodes")
    skins = tuple(_skin(o, acc, n_nodes) for o in root.objs("skins"))
    nodes = read_nodes(root, len(meshes), len(skins), warnings)
    _check_skinned(root, nodes, meshes, skins)
    node_targets = np.array([len(meshes[m].target_weight) if m >= 0 else 0 for m in nodes["node_mesh"]])
    for i, w in enumerate(nodes["node_target_weight"]):
        if w is not None and len(w) != node_targets[i]:
            raise root.error(f"nodes[{i}].weights", f"has {len(w)} weights, its mesh {node_targets[i]} targets")
    animations = tuple(read_animation(o, acc, node_targets, warnings) for o in root.objs("animations"))
    humanoid = vrm_humanoid(root.d, n_nodes, warnings)
    vrm = read_vrm_extras(root.d, nodes["node_mesh"], meshes, len(materials), warnings) if humanoid[0] else None
    return GltfAsset(path=path, **nodes, meshes=meshes, skins=skins, materials=materials,
                     images=images, animations=animations, warnings=tuple(warnings),
                     source_bytes=source_bytes, humanoid=humanoid, vrm=vrm)


def load_gltf(path) -> GltfAsset:
    """Read the .gltf/.glb file at ``path`` (external files from its folder)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FormatError(f"cannot be read ({e.strerror})", path=path) from None
    return read_gltf(data, path)
