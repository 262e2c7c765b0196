"""Scene meshes and materials → ``ModelBuilder`` vertices, faces, vertex morphs and materials.

In: a GltfAsset-like scene, its ``Skeleton`` and the target ``Space``. Out: builder calls — per
primitive its bind vertices in MMD space (skinned: C·v with the 4 largest weights renormalised;
unskinned: the node's bind world · v, BDEF1 on the node's bone), triangles wound as PMX files are
(front face: (b−a)×(c−a) along the normal), morph targets merged by name into vertex morphs
(default weights baked into the mesh), and one material per scene material (+ a white default).
"""

from __future__ import annotations

import re

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.importers.skeleton import BIND_TOLERANCE, Skeleton, expand_budget, inverse, skin_joint_binds
from mmdkit.model.builder import ModelBuilder
from mmdkit.model.space import Space

_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/bmp": ".bmp"}
VERTEX_BYTES = 768
"""Bytes one imported vertex costs from import to a posed frame (measured ~550-730 on CesiumMan x100)."""


def srgb(linear: np.ndarray) -> np.ndarray:
    """Linear colour factors (glTF) → display values (MMD colours are as shown)."""
    c = np.clip(np.asarray(linear, np.float64), 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


def texture_names(scene) -> list[str]:
    """One file name per scene image: its relative URI when it has a safe one, else
    '<file stem>_<image name or imageK><ext>'; unique."""
    stem = re.sub(r"[^\w.-]+", "_", (scene.path or "model").replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0])
    names: list[str] = []
    for k, im in enumerate(scene.images):
        uri = im.uri.replace("\\", "/")
        safe = uri and not uri.startswith(("/", "data:")) and ".." not in uri.split("/") and ":" not in uri
        label = re.sub(r"[^\w.-]+", "_", im.name) or f"image{k}"
        base = uri if safe else f"{stem}_{label}{_EXT.get(im.mime, '')}"
        name, n = base, 2
        while name in names:
            name, n = f"{n}_{base}", n + 1
        names.append(name)
    return names


def add_materials(mb: ModelBuilder, scene, toons: dict[int, str] | None = None) -> dict[str, bytes]:
    """Scene materials → MMD materials (same order, then a white default when a primitive has
    none; ``toons``: {material: toon texture name} where one has its own ramp); returns {texture
    name: encoded image bytes} for the images materials use."""
    names = texture_names(scene)
    used: dict[str, bytes] = {}
    for k, m in enumerate(scene.materials):
        rgb = srgb(m.base_color[:3])
        alpha = float(m.base_color[3]) if m.alpha_mode == "BLEND" else 1.0
        tex = None
        if m.base_color_image >= 0 and scene.images[m.base_color_image].data:
            tex = names[m.base_color_image]
            used[tex] = scene.images[m.base_color_image].data
        mb.add_material(m.name or f"material{k}", diffuse=(*rgb, alpha), ambient=rgb * 0.5, specular=(0, 0, 0),
                        double_sided=bool(m.double_sided), edge=False, texture=tex, toon=(toons or {}).get(k),
                        memo=f"glTF alphaMode {m.alpha_mode}")
    if any(p.material < 0 for mesh in scene.meshes for p in mesh.primitives):
        mb.add_material("default", diffuse=(1, 1, 1, 1), ambient=(0.5, 0.5, 0.5), specular=(0, 0, 0), edge=False)
    return used


def _top4(joint: np.ndarray, weight: np.ndarray, joint_bone: np.ndarray,
          losses: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(V, 4S) joints / weights → (V, 4) bone indices and weights: the 4 largest, renormalised;
    a single influence is exactly (1, 0, 0, 0); empty slots index bone 0. Counts the vertices
    that had more than 4 influences in ``losses['weights']``."""
    w = np.asarray(weight, np.float64)
    if w.shape[1] > 4:
        losses["weights"] = losses.get("weights", 0) + int(((w > 0).sum(1) > 4).sum())
    order = np.argsort(-w, axis=1, kind="stable")[:, :4]
    w4 = np.take_along_axis(w, order, 1)
    j4 = np.take_along_axis(np.asarray(joint, np.int64), order, 1)
    total = w4.sum(1, keepdims=True)
    w4 = np.where(total > 0, w4 / np.where(total > 0, total, 1.0), np.r_[1.0, 0, 0, 0])
    w4[(w4[:, 1:] == 0).all(1), 0] = 1.0
    live = w4 > 0
    bone = np.where(live, joint_bone[np.where(live, j4, 0)], 0)
    return bone.astype(np.int32), w4.astype(np.float32)


def _skin_bind(scene, node: int, sk: Skeleton, warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(4, 4) bind matrix for the vertices of skinned mesh ``node`` (D·C: D ≠ I only when another
    skin bound the same joints elsewhere) and (J,) bone per joint of its skin."""
    skin = scene.skins[scene.node_skin[node]]
    c, own = skin_joint_binds(scene, node)
    joint_bone = sk.node_bone[skin.joint_node]
    d = sk.bone_bind[joint_bone] @ inverse(own, scene.path, f"the bind of nodes[{node}] joint {{}}")
    size = max(1.0, float(np.abs(own[:, :3, 3]).max()))
    if np.abs(d - d[0]).max() > BIND_TOLERANCE * size:
        warnings.append(f"node {node} ({scene.node_name[node]!r}): its skin binds shared joints unlike the first "
                        "skin; its vertices are placed by its first joint's bind")
    return d[0] @ c, joint_bone


def _normals(pos: np.ndarray, face: np.ndarray) -> np.ndarray:
    """(V, 3) area-weighted vertex normals of triangles ``face`` (PMX winding), unit length."""
    fn = np.cross(pos[face[:, 1]] - pos[face[:, 0]], pos[face[:, 2]] - pos[face[:, 0]])
    n = np.stack([np.bincount(face.ravel(), np.repeat(fn[:, k], 3), len(pos)) for k in range(3)], 1)
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-30)


def _default_weights(scene, node: int) -> np.ndarray:
    mesh = scene.meshes[scene.node_mesh[node]]
    w = scene.node_target_weight[node]
    return np.asarray(mesh.target_weight if w is None else w, np.float64)


def _primitive(mb: ModelBuilder, prim, bind: np.ndarray, bones, space: Space, defaults: np.ndarray,
               n_materials: int, path: str) -> int:
    """Add one primitive; returns its first vertex."""
    lin = bind[:3, :3]
    v = np.asarray(prim.vertex_position, np.float64)
    if len(defaults):
        v = v + np.einsum("k,kvi->vi", defaults, prim.target_position)
    pos = space.points(v @ lin.T + bind[:3, 3])
    face = np.asarray(prim.face_vertex, np.int64)
    if (np.linalg.det(lin) < 0) != space.flip_z:  # one reflection reverses the winding
        face = face[:, ::-1]
    if prim.vertex_normal is None:
        nrm = _normals(pos, face)
    else:
        nrm = space.directions(np.asarray(prim.vertex_normal, np.float64) @ inverse(lin, path, "the bind matrix of a mesh node"))
        nrm /= np.maximum(np.linalg.norm(nrm, axis=1, keepdims=True), 1e-30)
    uv = np.zeros((len(pos), 2)) if prim.vertex_uv is None else prim.vertex_uv
    material = prim.material if prim.material >= 0 else n_materials
    return mb.add_mesh(material, pos, nrm, uv, face, *bones)


def add_meshes(mb: ModelBuilder, scene, sk: Skeleton, space: Space, warnings: list[str],
               morph_names: list[str] | None = None) -> list[str]:
    """Every mesh node of the skeleton's scene → builder meshes and vertex morphs (by target name,
    appended to ``morph_names`` in the order added); returns one line per kind of data MMD cannot
    hold (dropped or reduced)."""
    morphs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    losses: dict[str, int] = {}
    budget, spent = expand_budget(scene), 0
    for node in np.flatnonzero(scene.node_mesh >= 0).tolist():
        if scene.node_skin[node] < 0 and sk.node_bone[node] < 0:
            continue  # outside the default scene
        mesh = scene.meshes[scene.node_mesh[node]]
        if scene.node_skin[node] >= 0:
            bind, joint_bone = _skin_bind(scene, node, sk, warnings)
        else:
            bind, joint_bone = sk.bone_bind[sk.node_bone[node]], None
        defaults = _default_weights(scene, node)
        for prim in mesh.primitives:
            if joint_bone is not None and prim.vertex_joint is not None:
                bones = _top4(prim.vertex_joint, prim.vertex_weight, joint_bone, losses)
            else:
                if joint_bone is not None:
                    warnings.append(f"a primitive of mesh {mesh.name!r} has no skin weights; it follows the "
                                    f"skin's first joint")
                b = sk.node_bone[node] if joint_bone is None else joint_bone[0]
                bones = (np.full(len(prim.vertex_position), b, np.int32),)
            spent += len(prim.vertex_position) * VERTEX_BYTES
            if spent > budget:
                raise FormatError(f"the meshes drawn add up to {spent // VERTEX_BYTES:,} vertices (~{spent / 2**20:,.0f} "
                                  f"MiB), more than the {budget / 2**20:,.0f} MiB allowed for this file",
                                  path=scene.path, section=f"nodes[{node}].mesh")
            first = _primitive(mb, prim, bind, bones, space, defaults, len(scene.materials), scene.path)
            if prim.target_normal is not None:
                losses["normals"] = losses.get("normals", 0) + len(mesh.target_name)
            if prim.vertex_color is not None:
                losses["colors"] = losses.get("colors", 0) + 1
            for k, tname in enumerate(mesh.target_name):  # one target at a time: (V, 3) float64 each
                offsets = space.points(np.asarray(prim.target_position[k], np.float64) @ bind[:3, :3].T)
                moved = np.flatnonzero(np.abs(offsets).max(1) > 0)
                morphs.setdefault(tname, []).append((moved + first, offsets[moved]))
    if morph_names is not None:
        morph_names.extend(morphs)
    for tname, parts in morphs.items():
        mb.add_vertex_morph(tname, np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    lines = []
    if losses.get("weights"):
        lines.append(f"{losses['weights']} vertices had more than 4 bone weights; the 4 largest are kept, "
                     "renormalised")
    if losses.get("normals"):
        lines.append(f"normal deltas of {losses['normals']} morph targets dropped (MMD vertex morphs move "
                     "positions only)")
    if losses.get("colors"):
        lines.append(f"vertex colours (COLOR_0) of {losses['colors']} primitives dropped")
    return lines + _material_losses(scene)


def _material_losses(scene) -> list[str]:
    """What MMD materials do not carry: alpha cut-offs (MASK) and textures on a second UV set."""
    lines = []
    mask = [m.name for m in scene.materials if m.alpha_mode == "MASK"]
    if mask:
        lines.append(f"alpha cut-off of {len(mask)} MASK materials not kept (drawn with the texture's alpha "
                     "blended): " + ", ".join(mask[:5]))
    uv1 = [m.name for m in scene.materials if m.base_color_image >= 0 and m.base_color_uv != 0]
    if uv1:
        lines.append(f"{len(uv1)} materials map their texture by a second UV set; drawn with the first: "
                     + ", ".join(uv1[:5]))
    return lines
