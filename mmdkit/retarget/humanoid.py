"""``humanoid_map(model)``: which model bone plays each VRM 1.0 humanoid bone, how sure, and why.

In: a ``Model`` (any source: PMX/PMD, glTF/VRM, Assimp) and optionally a user override
{humanoid bone: model bone name}. Out: ``HumanoidMap`` — per humanoid bone (``bones.HUMANOID_BONES``)
the model bone index (-1 missing), a confidence 0..1 and its source, plus MMD's extra bones
(センター, グルーブ, 腰, 腕捩, 手捩). Sources, first wins per humanoid bone and per model bone:
1. 'vrm': the file's VRM 0.x/1.0 humanoid (kept by the glTF importer in
   ``source_extras['vrm_humanoid']``), confidence 1.0 — where a file has one, it is the whole map
   (2 and 3 are skipped: VRM files name every humanoid bone they have);
2. 'name:mmd' / 'name:generic': ``names.label_name`` (0.9 for unambiguous names, 0.7 for names
   another scheme uses for a neighbour, 0.5 for hints); torso bones in chain order become
   spine, chest, upperChest (the last of three or more), the first neck bone neck;
3. 'geometry': ``geometry.geometry_labels`` anchored on what 1-2 found (0.6), only where the bone
   hangs below its mapped humanoid parent (below the hips' parent for the torso: MMD's 上半身 is a
   sibling of 下半身);
4. 'override': the user's table (1.0), replacing any of the above; a null value unmaps.
A named hips that is not above both upper legs (RobotExpressive's 'Hips' beside its legs) moves to
their common ancestor (source 'geometry').
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.retarget.bones import (EXTRA_BONES, HUMANOID_BONES, HUMANOID_INDEX, HUMANOID_PARENT, REQUIRED_BONES,
                                   VRM0_RENAMES)
from mmdkit.retarget.geometry import ancestors, geometry_labels
from mmdkit.retarget.names import label_names

CONFIDENCE = {"vrm": 1.0, "override": 1.0, 2: 0.9, 1: 0.7, 0: 0.5, "geometry": 0.6}


@dataclass(frozen=True)
class HumanoidMap:
    """H = len(HUMANOID_BONES) humanoid bones of one model. humanoid_bone (H,) int32 model bone or
    -1; humanoid_confidence (H,) float32 0..1 (0 when missing); humanoid_source (H,) str ('' when
    missing); extra {EXTRA_BONES name: model bone}; bone_name: the model's bone names."""

    humanoid_bone: np.ndarray
    humanoid_confidence: np.ndarray
    humanoid_source: tuple[str, ...]
    extra: dict
    bone_name: tuple[str, ...]

    def __getitem__(self, name: str) -> int:
        """Model bone of humanoid bone ``name`` (-1 missing); KeyError for a name not in the set."""
        return int(self.humanoid_bone[HUMANOID_INDEX[name]])

    def as_dict(self) -> dict[str, int]:
        """{humanoid bone: model bone} of the mapped bones, humanoid order."""
        return {n: int(b) for n, b in zip(HUMANOID_BONES, self.humanoid_bone) if b >= 0}

    def names(self) -> dict[str, str]:
        """{humanoid bone: model bone name} of the mapped bones."""
        return {n: self.bone_name[b] for n, b in self.as_dict().items()}

    def missing(self, required_only: bool = False) -> list[str]:
        """Unmapped humanoid bones, the VRM-required ones first."""
        gone = [n for n in HUMANOID_BONES if self[n] < 0]
        req = [n for n in gone if n in REQUIRED_BONES]
        return req if required_only else req + [n for n in gone if n not in REQUIRED_BONES]

    def to_json(self) -> dict:
        """{'bones': {humanoid: {'bone', 'index', 'confidence', 'source'}}, 'extra': {...},
        'missing_required': [...], 'missing': [...]} for ``info --json``."""
        bones = {n: dict(bone=self.bone_name[b], index=int(b), confidence=round(float(c), 2), source=s)
                 for n, b, c, s in zip(HUMANOID_BONES, self.humanoid_bone, self.humanoid_confidence,
                                       self.humanoid_source) if b >= 0}
        return dict(bones=bones, extra={k: self.bone_name[v] for k, v in self.extra.items()},
                    missing_required=self.missing(True), missing=self.missing())


class _Builder:
    """Entries collected source by source; a humanoid bone or a model bone is taken once."""

    def __init__(self, model):
        self.model = model
        self.bone: dict[str, int] = {}
        self.conf: dict[str, float] = {}
        self.source: dict[str, str] = {}
        self.used: set[int] = set()

    def put(self, name: str, b: int, conf: float, source: str, force: bool = False) -> bool:
        if name not in HUMANOID_INDEX or not 0 <= b < self.model.num_bones:
            return False
        if not force and (name in self.bone or b in self.used):
            return False
        if name in self.bone:
            self.used.discard(self.bone[name])
        self.bone[name], self.conf[name], self.source[name] = b, conf, source
        self.used.add(b)
        return True


def _vrm(model, out: _Builder) -> None:
    vrm = (model.source_extras or {}).get("vrm_humanoid") or {}
    rename = VRM0_RENAMES if vrm.get("version") == "0.x" else {}
    for name, b in (vrm.get("bones") or {}).items():
        out.put(rename.get(name, name), int(b), CONFIDENCE["vrm"], "vrm")


def _depth(parent: np.ndarray, b: int) -> int:
    d = 0
    while parent[b] >= 0 and d <= len(parent):
        b, d = int(parent[b]), d + 1
    return d


def _names(model, out: _Builder, extra: dict) -> None:
    parent = np.asarray(model.bone_parent)
    matches = [(b, m) for b, m in enumerate(label_names(model.bone_name)) if m is not None]
    chains = {"torso": [], "neck": []}
    ranked = []
    for b, m in matches:
        if m.label in chains:
            chains[m.label].append((m.order, _depth(parent, b), b, m))
        elif m.label in EXTRA_BONES:
            extra.setdefault(m.label, b)
        else:
            ranked.append((-m.priority, _depth(parent, b), b, m))
    for _, _, b, m in sorted(ranked):
        out.put(m.label, b, CONFIDENCE[m.priority], f"name:{m.scheme}")
    torso = [(b, m) for *_, b, m in sorted(chains["torso"])]
    labels = ["spine", "chest", "upperChest"][:len(torso)]
    if len(torso) > 3:
        labels = ["spine", "chest"] + [""] * (len(torso) - 3) + ["upperChest"]
    for (b, m), name in zip(torso, labels):
        if name:
            out.put(name, b, CONFIDENCE[m.priority], f"name:{m.scheme}")
    necks = sorted(chains["neck"])
    if necks:
        out.put("neck", necks[0][2], CONFIDENCE[necks[0][3].priority], f"name:{necks[0][3].scheme}")


def _fix_hips(model, out: _Builder) -> None:
    """Hips must be above both upper legs: else their common ancestor (see module)."""
    parent = np.asarray(model.bone_parent)
    legs = [out.bone.get(f"{s}UpperLeg", -1) for s in ("left", "right")]
    if min(legs) < 0:
        return
    left = ancestors(parent, legs[0])[1:]
    right = set(ancestors(parent, legs[1])[1:])
    common = next((a for a in left if a in right), -1)
    hips = out.bone.get("hips", -1)
    if common >= 0 and (hips < 0 or hips not in left or hips not in right):
        if hips >= 0:
            del out.bone["hips"]
            out.used.discard(hips)
        out.used.discard(common)
        for n, b in list(out.bone.items()):  # the ancestor may have been named spine or alike
            if b == common:
                del out.bone[n]
        out.put("hips", common, CONFIDENCE["geometry"], "geometry")


def _mapped_parent(out: _Builder, name: str) -> int:
    p = HUMANOID_PARENT[name]
    while p is not None and p not in out.bone:
        p = HUMANOID_PARENT[p]
    return out.bone[p] if p is not None else -1


def _geometry(model, out: _Builder) -> None:
    parent = np.asarray(model.bone_parent)
    for name, b in geometry_labels(model, dict(out.bone)).items():
        if name in out.bone:
            continue
        above = _mapped_parent(out, name)  # MMD's 上半身 hangs beside 下半身 (hips), not below it
        if above < 0 or above == out.bone.get("hips") or above in ancestors(parent, b)[1:]:
            out.put(name, b, CONFIDENCE["geometry"], "geometry")


def read_override(path) -> dict:
    """A user's map file: JSON {humanoid bone: model bone name or null}; FormatError naming the
    file for anything else (unknown humanoid names included)."""
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
    except OSError as e:
        raise FormatError(f"cannot be read ({e.strerror})", path=str(path)) from None
    except (ValueError, RecursionError) as e:
        raise FormatError(f"is not JSON ({str(e)[:80]})", path=str(path)) from None
    if not isinstance(table, dict):
        raise FormatError("expected a JSON object {humanoid bone: model bone name}", path=str(path))
    for k, v in table.items():
        if k not in HUMANOID_INDEX:
            raise FormatError(f"'{k:.60}' is not a humanoid bone (VRM 1.0 names: hips, spine, leftUpperArm, ...)",
                              path=str(path))
        if v is not None and not isinstance(v, str):
            raise FormatError(f"{k}: expected a bone name or null, got {v!r:.40}", path=str(path))
    return table


def humanoid_map(model, override: dict | None = None, override_path: str = "") -> HumanoidMap:
    """The ``HumanoidMap`` of ``model`` (see module). ``override``: {humanoid bone: model bone
    name or None}; a name the model lacks is a FormatError naming ``override_path`` and the bone."""
    out, extra = _Builder(model), {}
    _vrm(model, out)
    if not out.bone:  # a VRM file's own humanoid is complete by definition: names and shape not asked
        _names(model, out, extra)
        _fix_hips(model, out)
        _geometry(model, out)
    if override:
        index = {n: i for i, n in reversed(list(enumerate(model.bone_name)))}
        for name, bone in override.items():
            if name not in HUMANOID_INDEX:
                raise FormatError(f"'{name:.60}' is not a humanoid bone", path=override_path)
            if bone is None:
                if name in out.bone:
                    out.used.discard(out.bone.pop(name))
                continue
            if bone not in index:
                raise FormatError(f"{name}: no bone named '{bone:.60}' in {model.name or 'the model'}",
                                  path=override_path)
            for n, b in list(out.bone.items()):
                if b == index[bone] and n != name:
                    del out.bone[n]
            out.put(name, index[bone], CONFIDENCE["override"], "override", force=True)
    H = len(HUMANOID_BONES)
    bone = np.full(H, -1, np.int32)
    conf = np.zeros(H, np.float32)
    source = [""] * H
    for n, b in out.bone.items():
        i = HUMANOID_INDEX[n]
        bone[i], conf[i], source[i] = b, out.conf[n], out.source[n]
    return HumanoidMap(bone, conf, tuple(source), extra, tuple(model.bone_name))
