"""VRM data beyond the humanoid: expressions, spring bones, first person / look-at, MToon materials.

In: a VRM file's parsed JSON root (dict) and its node/mesh/material counts. Out:
``read_vrm_extras(root, n_nodes, meshes, n_materials, warnings)`` → ``VrmExtras`` or None (no VRM
extension), all in the file's own terms (glTF space, metres, node and mesh indices):

- ``expressions``: VRM 0.x ``blendShapeMaster.blendShapeGroups`` / 1.0 ``expressions.preset`` +
  ``custom`` as ``Expression`` (name, preset name lower-cased as 1.0 spells it, morph target binds
  as (mesh, target, weight 0..1) — 0.x weights 0..100 scaled, 1.0 node binds resolved to the
  node's mesh —, is_binary, the 1.0 override* settings);
- ``springs``: ``SpringJoints`` — VRMC_springBone (1.0: ``springs[].joints[]``, joint i's tail is
  joint i+1, colliders from ``colliders``/``colliderGroups``) or 0.x ``secondaryAnimation`` (every
  node below a ``boneGroups[].bones`` root is a joint, its tail its first child or, at a leaf, a
  point 7 cm along it: tail -1). Collider offsets are glTF space (0.x's Unity ones have z negated);
- ``first_person``, ``look_at``: the 1.0 ``firstPerson``/``lookAt`` objects (0.x's ``firstPerson``
  holds both), kept as JSON;
- ``mtoon``: per material the MToon parameters (``VRMC_materials_mtoon`` or 0.x
  ``materialProperties``): linear shade colour, shading shift/toony, shade texture image or None.
Malformed entries are skipped with a line in ``warnings`` (the model still draws and poses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmdkit.formats.gltf.vrm_springs import SpringJoints, items, read_springs_0x, read_springs_1x


@dataclass(frozen=True)
class Expression:
    name: str  # as the file names it (0.x: group name, 1.0: preset or custom key)
    preset: str  # 1.0 preset name ('aa', 'blinkLeft', ...; 0.x presets mapped), '' for custom
    binds: tuple  # ((mesh index, morph target index, weight 0..1), ...)
    is_binary: bool = False
    overrides: tuple = ()  # (('overrideBlink', 'block'), ...) as 1.0 states them


@dataclass(frozen=True)
class MToon:
    shade_color: tuple  # linear RGB, 0..1
    shading_shift: float  # 1.0 shadingShiftFactor (0.x: _ShadeShift)
    shading_toony: float  # 1.0 shadingToonyFactor (0.x: _ShadeToony)
    shade_image: int  # image index of the shade multiply texture, -1 none
    rim_color: tuple = (0.0, 0.0, 0.0)  # linear RGB (parametric rim), kept
    outline_width: float = 0.0  # metres (1.0 worldCoordinates) or 0.x's _OutlineWidth, kept


@dataclass(frozen=True)
class VrmExtras:
    version: str  # '0.x' | '1.0'
    expressions: tuple  # Expression, ...
    springs: SpringJoints | None
    first_person: dict
    look_at: dict
    mtoon: tuple  # per material MToon or None


PRESETS_0X = {"neutral": "neutral", "a": "aa", "i": "ih", "u": "ou", "e": "ee", "o": "oh", "blink": "blink",
              "blink_l": "blinkLeft", "blink_r": "blinkRight", "joy": "happy", "angry": "angry",
              "sorrow": "sad", "fun": "relaxed", "lookup": "lookUp", "lookdown": "lookDown",
              "lookleft": "lookLeft", "lookright": "lookRight"}
"""VRM 0.x presetName → the 1.0 preset it became (UniVRM's migration)."""


def _num(x, default=0.0) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else default


def _index(x, hi: int) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and 0 <= x < hi else -1


def _bind(mesh: int, target, weight: float, meshes) -> tuple | None:
    if mesh < 0 or _index(target, len(meshes[mesh].target_name)) < 0:
        return None
    return mesh, target, weight


def _expressions_0x(vrm: dict, meshes, warnings: list[str]) -> tuple:
    groups = (vrm.get("blendShapeMaster") or {}).get("blendShapeGroups") if isinstance(
        vrm.get("blendShapeMaster"), dict) else None
    out, bad = [], 0
    for g in groups if isinstance(groups, list) else ():
        if not isinstance(g, dict) or not isinstance(g.get("name", ""), str):
            bad += 1
            continue
        binds = []
        for b in items(g, "binds"):
            r = _bind(_index(b.get("mesh"), len(meshes)), b.get("index"), _num(b.get("weight")) / 100.0,
                      meshes) if isinstance(b, dict) else None
            bad += r is None
            binds += [r] if r else []
        preset = PRESETS_0X.get(str(g.get("presetName", "")).lower(), "")
        name = g.get("name") if isinstance(g.get("name"), str) and g.get("name") else preset
        out.append(Expression(name, preset, tuple(binds), g.get("isBinary") is True))
    if bad and warnings is not None:
        warnings.append(f"VRM 0.x blendShapeMaster: {bad} groups or binds that name no morph target skipped")
    return tuple(out)


def _expressions_1x(vrm: dict, node_mesh: np.ndarray, meshes, warnings: list[str]) -> tuple:
    ex = vrm.get("expressions") if isinstance(vrm.get("expressions"), dict) else {}
    out, bad = [], 0
    for kind in ("preset", "custom"):
        table = ex.get(kind) if isinstance(ex.get(kind), dict) else {}
        for name, e in table.items():
            if not isinstance(e, dict):
                bad += 1
                continue
            binds = []
            for b in items(e, "morphTargetBinds"):
                node = _index(b.get("node"), len(node_mesh)) if isinstance(b, dict) else -1
                r = _bind(int(node_mesh[node]) if node >= 0 else -1, b.get("index"), _num(b.get("weight")),
                          meshes) if node >= 0 else None
                bad += r is None
                binds += [r] if r else []
            overrides = tuple((k, e[k]) for k in ("overrideBlink", "overrideLookAt", "overrideMouth")
                              if isinstance(e.get(k), str))
            out.append(Expression(name, name if kind == "preset" else "", tuple(binds),
                                  e.get("isBinary") is True, overrides))
    if bad and warnings is not None:
        warnings.append(f"VRM 1.0 expressions: {bad} expressions or binds that name no morph target skipped")
    return tuple(out)


def _vec(x, n: int, default) -> tuple:
    return tuple(_num(v) for v in x[:n]) if isinstance(x, list) and len(x) >= n else default


def _mtoon_1x(m: dict, textures: list, n_images: int) -> MToon | None:
    ext = (m.get("extensions") or {}).get("VRMC_materials_mtoon") if isinstance(m.get("extensions"), dict) else None
    if not isinstance(ext, dict):
        return None
    tex = ext.get("shadeMultiplyTexture")
    image = -1
    if isinstance(tex, dict) and _index(tex.get("index"), len(textures)) >= 0:
        t = textures[tex["index"]]
        image = _index(t.get("source"), n_images) if isinstance(t, dict) else -1
    return MToon(_vec(ext.get("shadeColorFactor"), 3, (0.0, 0.0, 0.0)), _num(ext.get("shadingShiftFactor")),
                 _num(ext.get("shadingToonyFactor"), 0.9), image, _vec(ext.get("parametricRimColorFactor"), 3,
                                                                      (0.0, 0.0, 0.0)),
                 _num(ext.get("outlineWidthFactor")))


def _mtoon_0x(p: dict, textures: list, n_images: int) -> MToon | None:
    if not isinstance(p, dict) or "MToon" not in str(p.get("shader", "")):
        return None
    f = p.get("floatProperties") if isinstance(p.get("floatProperties"), dict) else {}
    v = p.get("vectorProperties") if isinstance(p.get("vectorProperties"), dict) else {}
    t = p.get("textureProperties") if isinstance(p.get("textureProperties"), dict) else {}
    k = _index(t.get("_ShadeTexture"), len(textures))
    image = _index(textures[k].get("source"), n_images) if k >= 0 and isinstance(textures[k], dict) else -1
    # 0.x colours are gamma (Unity's Color): to linear, as 1.0's factors are
    shade = tuple(min(max(c, 0.0), 1e3) ** 2.2 for c in _vec(v.get("_ShadeColor"), 3, (0.97, 0.81, 0.86)))
    rim = tuple(min(max(c, 0.0), 1e3) ** 2.2 for c in _vec(v.get("_RimColor"), 3, (0.0, 0.0, 0.0)))
    return MToon(shade, _num(f.get("_ShadeShift")), _num(f.get("_ShadeToony"), 0.9), image, rim,
                 _num(f.get("_OutlineWidth")))


def _mtoon(root: dict, vrm: dict, version: str, n_materials: int) -> tuple:
    mats = root.get("materials") if isinstance(root.get("materials"), list) else []
    textures = root.get("textures") if isinstance(root.get("textures"), list) else []
    n_images = len(root.get("images")) if isinstance(root.get("images"), list) else 0
    if version == "1.0":
        return tuple(_mtoon_1x(m, textures, n_images) if isinstance(m, dict) else None for m in mats[:n_materials])
    props = vrm.get("materialProperties") if isinstance(vrm.get("materialProperties"), list) else []
    by_name = {p["name"]: p for p in props if isinstance(p, dict) and isinstance(p.get("name"), str)}
    return tuple(_mtoon_0x(by_name.get(m.get("name")) if isinstance(m, dict) and isinstance(m.get("name"), str)
                           else None, textures, n_images)
                 for m in mats[:n_materials])


def read_vrm_extras(root: dict, node_mesh: np.ndarray, meshes, n_materials: int,
                    warnings: list[str] | None = None) -> VrmExtras | None:
    """The VRM expressions, springs, first-person/look-at and MToon data of a glTF root (see module);
    None when the file has no VRM extension."""
    warnings = [] if warnings is None else warnings
    ext = root.get("extensions") if isinstance(root, dict) else None
    if not isinstance(ext, dict):
        return None
    n_nodes = len(node_mesh)
    if isinstance(ext.get("VRMC_vrm"), dict):
        vrm, version = ext["VRMC_vrm"], "1.0"
        expressions = _expressions_1x(vrm, node_mesh, meshes, warnings)
        springs = read_springs_1x(ext.get("VRMC_springBone"), root, n_nodes, warnings)
        first_person = vrm.get("firstPerson") if isinstance(vrm.get("firstPerson"), dict) else {}
        look_at = vrm.get("lookAt") if isinstance(vrm.get("lookAt"), dict) else {}
    elif isinstance(ext.get("VRM"), dict):
        vrm, version = ext["VRM"], "0.x"
        expressions = _expressions_0x(vrm, meshes, warnings)
        springs = read_springs_0x(vrm.get("secondaryAnimation"), root, n_nodes, warnings)
        fp = vrm.get("firstPerson") if isinstance(vrm.get("firstPerson"), dict) else {}
        first_person = {k: v for k, v in fp.items() if not k.startswith("lookAt")}
        look_at = {k: v for k, v in fp.items() if k.startswith("lookAt")}
    else:
        return None
    return VrmExtras(version, expressions, springs, dict(first_person), dict(look_at),
                     _mtoon(root, vrm, version, n_materials))
