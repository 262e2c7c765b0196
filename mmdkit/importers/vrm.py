"""A VRM file's expressions, spring bones, first person / look-at and MToon data → the MMD Model.

In: the scene's ``vrm`` (``formats.gltf.vrm_extras.VrmExtras``), its ``Skeleton``, the target
``Space`` and the ``ModelBuilder`` after its vertex morphs (one per morph target name, in
``morph_names`` order). Out: ``add_expressions`` adds one group morph per VRM expression binding its
morph targets' vertex morphs with the file's weights, named so MMD motions drive it (the Japanese
name of ``MMD_NAMES`` where the expression is a preset that has one, else the file's name; the
file's name is the morph's English name); ``vrm_extras`` returns the ``source_extras`` entries:

  vrm_expressions  {file's expression name: {morph, preset, is_binary, overrides}} (is_binary and
                   the override* settings are kept as notes: a group morph moves by its weight)
  vrm_springs      ``SpringBones`` (MMD space and units) for ``mmdkit.physics.springs``, or absent
  vrm_first_person, vrm_look_at   the file's JSON objects (node indices as written), kept
  vrm_mtoon        per material a dict (shade_color display RGB, shading_shift, shading_toony,
                   shade_texture name or None, toon: its ramp's name) or None

MToon is drawn through the MMD material's toon ramp (``mtoon_toons``): the renderer multiplies the
lit colour (diffuse × texture) by toon(N·L); an MToon material gets its own ramp image whose lit end
is 1 and whose shaded end is shade colour / base colour, stepping where MToon's shading does —
1.0: linearstep(−1 + toony, 1 − toony, N·L + shift); 0.x: linearstep(shift, lerp(1, shift, toony), N·L).
So the shaded side takes the shade colour (exact where the shade texture is the base texture, as
in the rigs' files; a different shade texture is approximated by the base one). Rim light,
outlines, emission and UV animation are not drawn.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from mmdkit.formats.gltf.vrm_springs import VIRTUAL_TAIL_METRES
from mmdkit.importers.mesh import srgb
from mmdkit.importers.skeleton import Skeleton
from mmdkit.model.builder import ModelBuilder
from mmdkit.model.space import Space

MMD_NAMES = {"aa": "あ", "ih": "い", "ou": "う", "ee": "え", "oh": "お", "blink": "まばたき",
             "blinkLeft": "ウィンク", "blinkRight": "ウィンク右", "happy": "笑い", "angry": "怒り",
             "sad": "困る", "relaxed": "なごみ", "surprised": "びっくり"}
"""VRM 1.0 preset (0.x presets map to these: A→aa, Joy→happy, Sorrow→sad, Fun→relaxed, ...) → the
MMD standard morph name a VMD keys. ウィンク closes the model's left eye, ウィンク右 its right."""
_PANEL = {"aa": 3, "ih": 3, "ou": 3, "ee": 3, "oh": 3, "blink": 2, "blinkLeft": 2, "blinkRight": 2,
          "lookUp": 2, "lookDown": 2, "lookLeft": 2, "lookRight": 2}


@dataclass(frozen=True, eq=False)
class SpringBones:
    """VRM spring bones in MMD space (left-handed, MMD units), J joints, C chains, K colliders.

    joint_bone (J,) int32: the bone a joint rotates, parents before children (bone order).
    joint_tail (J, 3) float64: its tail's rest position, model space (head: the bone's position).
    joint_chain (J,) int32; joint_stiffness (J,) float64 units/s (the spec's metres × 12.5);
    joint_drag (J,) 0..1; joint_gravity_power (J,) units/s; joint_gravity_dir (J, 3) unit, model
    space; joint_hit_radius (J,) units. chain_center (C,) int32 bone of the chain's center space,
    -1 world. chain_collider_start (C+1,), chain_collider (E,) int32 colliders of each chain.
    collider_bone (K,) int32; collider_capsule (K,) bool; collider_offset, collider_tail (K, 3)
    float64 bone-local (from the bone's rest position, rest axes) units; collider_radius (K,) units.
    """

    joint_bone: np.ndarray
    joint_tail: np.ndarray
    joint_chain: np.ndarray
    joint_stiffness: np.ndarray
    joint_drag: np.ndarray
    joint_gravity_power: np.ndarray
    joint_gravity_dir: np.ndarray
    joint_hit_radius: np.ndarray
    chain_center: np.ndarray
    chain_collider_start: np.ndarray
    chain_collider: np.ndarray
    collider_bone: np.ndarray
    collider_capsule: np.ndarray
    collider_offset: np.ndarray
    collider_tail: np.ndarray
    collider_radius: np.ndarray

    @property
    def num_joints(self) -> int:
        return len(self.joint_bone)


def add_expressions(mb: ModelBuilder, scene, morph_names: list[str]) -> dict:
    """One group morph per VRM expression (see module); returns {expression name: notes}."""
    vrm = getattr(scene, "vrm", None)
    if vrm is None:
        return {}
    index = {}
    for k, n in enumerate(morph_names):
        index.setdefault(n, k)
    taken = set(morph_names)
    out = {}
    for e in vrm.expressions:
        weights: dict[int, float] = {}
        for mesh, target, w in e.binds:
            m = index.get(scene.meshes[mesh].target_name[target], -1)
            if m >= 0:
                weights[m] = weights.get(m, 0.0) + w
        name = MMD_NAMES.get(e.preset, e.name)
        if name in taken:
            name = e.name if e.name not in taken else f"{e.name} (VRM)"
        taken.add(name)
        k = mb.add_group_morph(name, list(weights), list(weights.values()), _PANEL.get(e.preset, 4), name_en=e.name)
        out[e.name] = {"morph": k, "name": name, "preset": e.preset, "is_binary": e.is_binary,
                       "overrides": dict(e.overrides)}
    return out


def _tails(sp, sk: Skeleton, space: Space, scene, pos: np.ndarray) -> np.ndarray:
    """(J, 3) rest tail positions, model space: the tail node's bind position (a node that is not
    a bone: placed by its rest offset from the joint), or 7 cm along a 0.x leaf's bone."""
    out = np.zeros((sp.num_joints, 3))
    for j, (node, tail) in enumerate(zip(sp.joint_node.tolist(), sp.joint_tail_node.tolist())):
        b = sk.node_bone[node]
        if tail >= 0 and sk.node_bone[tail] >= 0:
            out[j] = pos[sk.node_bone[tail]]
        elif tail >= 0:
            rel = np.linalg.solve(np.asarray(scene.node_world[node], np.float64), np.r_[scene.node_world[tail][:3, 3], 1])
            out[j] = space.points((sk.bone_bind[b] @ rel)[:3])
        else:
            p = sk.bone_parent[b]
            d = pos[b] - pos[p] if p >= 0 else np.array([0.0, 1.0, 0.0])
            n = np.linalg.norm(d)
            out[j] = pos[b] + (d / n if n > 1e-9 else np.array([0.0, 1.0, 0.0])) * VIRTUAL_TAIL_METRES * space.scale
    return out


def spring_bones(scene, sk: Skeleton, space: Space, warnings: list[str]) -> SpringBones | None:
    """The scene's spring joints and colliders in MMD space (see ``SpringBones``); joints or
    colliders on nodes that are not bones are dropped with a warning."""
    vrm = getattr(scene, "vrm", None)
    sp = vrm.springs if vrm is not None else None
    if sp is None:
        return None
    pos = space.points(sk.bone_position)
    keep = sk.node_bone[sp.joint_node] >= 0
    bone_of = lambda nodes: np.where(nodes >= 0, sk.node_bone[np.maximum(nodes, 0)], -1).astype(np.int32)
    c_keep = bone_of(sp.collider_node) >= 0
    if not keep.all() or not c_keep.all():
        warnings.append(f"VRM spring bones: {int((~keep).sum())} joints and {int((~c_keep).sum())} colliders on "
                        "nodes that are not bones dropped")
    tails = _tails(sp, sk, space, scene, pos)
    cb = bone_of(sp.collider_node)
    local = lambda p: space.points(np.einsum("kij,kj->ki", sk.bone_bind[np.maximum(cb, 0)][:, :3, :3], p)
                                   + sk.bone_bind[np.maximum(cb, 0)][:, :3, 3]) - pos[np.maximum(cb, 0)]
    remap = np.cumsum(c_keep) - 1
    cols = [[int(remap[k]) for k in sp.chain_collider[sp.chain_collider_start[c]:sp.chain_collider_start[c + 1]]
             if c_keep[k]] for c in range(len(sp.chain_center))]
    jb = bone_of(sp.joint_node)
    order = np.argsort(np.where(keep, jb, 1 << 30), kind="stable")[:int(keep.sum())]
    s = space.scale
    f64 = lambda a: np.ascontiguousarray(a, np.float64)
    out = SpringBones(
        joint_bone=jb[order], joint_tail=f64(tails[order]), joint_chain=sp.joint_chain[order].astype(np.int32),
        joint_stiffness=f64(sp.joint_stiffness[order] * s), joint_drag=f64(sp.joint_drag[order]),
        joint_gravity_power=f64(sp.joint_gravity_power[order] * s),
        joint_gravity_dir=f64(space.directions(sp.joint_gravity_dir[order])),
        joint_hit_radius=f64(sp.joint_hit_radius[order] * s), chain_center=bone_of(sp.chain_center),
        chain_collider_start=np.cumsum([0] + [len(c) for c in cols]).astype(np.int32),
        chain_collider=np.array([k for c in cols for k in c], np.int32),
        collider_bone=cb[c_keep], collider_capsule=sp.collider_capsule[c_keep].copy(),
        collider_offset=f64(local(sp.collider_offset)[c_keep]), collider_tail=f64(local(sp.collider_tail)[c_keep]),
        collider_radius=f64(sp.collider_radius[c_keep] * s))
    for a in vars(out).values():
        a.flags.writeable = False
    return out


MTOON_RAMP_ROWS = 64
"""Rows of an MToon toon ramp image (top row: N·L = 1, bottom: −1, as MMD toon files are read)."""


def mtoon_ramp(mtoon, base_display: np.ndarray, version: str) -> np.ndarray:
    """(MTOON_RAMP_ROWS, 3) float64 ramp, top row lit: mix(shade / base, 1, MToon's shading) per row
    (see module); ``base_display``: the material's base colour as drawn (sRGB, 0..1)."""
    n_l = np.linspace(1.0, -1.0, MTOON_RAMP_ROWS)
    shift, toony = float(mtoon.shading_shift), float(np.clip(mtoon.shading_toony, 0.0, 1.0))
    if version == "0.x":  # UniVRM's MToon 0.x: from _ShadeShift to lerp(1, _ShadeShift, _ShadeToony)
        lo, hi = shift, 1.0 + (shift - 1.0) * toony
        lit = np.clip((n_l - lo) / max(hi - lo, 1e-4), 0.0, 1.0)
    else:
        lo, hi = -1.0 + toony, 1.0 - toony
        lit = np.clip((n_l + shift - lo) / max(hi - lo, 1e-4), 0.0, 1.0)
    shade = np.clip(srgb(mtoon.shade_color) / np.maximum(np.asarray(base_display, np.float64), 1e-3), 0.0, 1.0)
    return shade[None, :] + (1.0 - shade[None, :]) * lit[:, None]


def mtoon_toons(scene) -> tuple[dict[int, str], dict[str, bytes]]:
    """({material: toon ramp name}, {name: PNG bytes}) for the scene's MToon materials (see module)."""
    from PIL import Image

    vrm = getattr(scene, "vrm", None)
    toons, images = {}, {}
    for k, m in enumerate(vrm.mtoon if vrm is not None else ()):
        if m is None or k >= len(scene.materials):
            continue
        ramp = mtoon_ramp(m, srgb(scene.materials[k].base_color[:3]), vrm.version)
        rgb = np.repeat(np.round(ramp * 255).astype(np.uint8)[:, None, :], 4, axis=1)  # (rows, 4, 3)
        buf = io.BytesIO()
        Image.fromarray(rgb, "RGB").save(buf, "PNG")
        name = f"mtoon_ramp_{k}.png"
        toons[k], images[name] = name, buf.getvalue()
    return toons, images


def _json_safe(d):
    return d if isinstance(d, dict) else {}


def vrm_extras(scene, sk: Skeleton, space: Space, texture_names: list[str], warnings: list[str]) -> dict:
    """The ``source_extras`` entries of a VRM scene (see module); {} for other scenes."""
    vrm = getattr(scene, "vrm", None)
    if vrm is None:
        return {}
    out = {"vrm_first_person": _json_safe(vrm.first_person), "vrm_look_at": _json_safe(vrm.look_at)}
    springs = spring_bones(scene, sk, space, warnings)
    if springs is not None and springs.num_joints:
        out["vrm_springs"] = springs
    mtoon = []
    for m in vrm.mtoon:
        if m is None:
            mtoon.append(None)
            continue
        shade = srgb(m.shade_color)
        mtoon.append({"shade_color": tuple(float(c) for c in shade), "shading_shift": float(m.shading_shift),
                      "shading_toony": float(m.shading_toony),
                      "shade_texture": texture_names[m.shade_image] if m.shade_image >= 0 else None,
                      "toon": f"mtoon_ramp_{len(mtoon)}.png"})
    if any(m is not None for m in mtoon):
        out["vrm_mtoon"] = tuple(mtoon)
    return out
