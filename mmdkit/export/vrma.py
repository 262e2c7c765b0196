"""VRM Animation (.vrma) writer: a humanoid model's baked motion as VRMC_vrm_animation 1.0.

In: a ``BakedMotion`` of any model with a humanoid map (``mmdkit.retarget.humanoid_map``: VRM
files, MMD models by their bone names, glTF/Assimp rigs). Out: one GLB (written atomically) with
the ``VRMC_vrm_animation`` extension: the humanoid bones the model has as glTF nodes in VRM 1.0's
T-pose (right-handed, metres, facing +z, no rest rotations; ``retarget.vrma.tpose``), the
humanoid bone → node map, one LINEAR clip keyed on every baked frame (time = (frame − first
frame) / 30 s) with a rotation track per humanoid bone (its VRM normalized rotation relative to
its humanoid parent) and a translation track on the hips (its world position, metres), and
preset expressions (``expressions.preset``: a node whose translation x is the weight) for every
VRM preset whose morph (the preset's name or its MMD name: あ → aa, まばたき → blink, …) moves.
Coordinates leave MMD space here only (``model.space.Space``: z flipped, × 1/12.5).
"""

from __future__ import annotations

import os

import numpy as np

from mmdkit.animation.frames import MOTION_FPS
from mmdkit.errors import OptionError
from mmdkit.export.gltf.animation import Channel, add_animation
from mmdkit.export.gltf.container import GltfDocument
from mmdkit.importers.vrm import MMD_NAMES
from mmdkit.model.space import MMD_UNITS_PER_METRE, Space
from mmdkit.retarget.humanoid import humanoid_map
from mmdkit.retarget.quat import qrot
from mmdkit.retarget.vrma import normalized_local, tpose

OPTIONS = ()
EXTENSION = "VRMC_vrm_animation"
TO_GLTF = Space(scale=1.0 / MMD_UNITS_PER_METRE, flip_z=True)
"""MMD space → glTF: z flipped, metres."""

__all__ = ["write", "check", "OPTIONS", "EXTENSION", "vrma_tracks"]


def _name(model) -> str:
    return os.fspath(getattr(model, "source_path", "") or "") or model.name or "the model"


def check(model, frames, **options) -> None:
    """FormatError (before baking) when ``model`` has no usable humanoid (hips, spine, head, arms, legs)."""
    tpose(model, humanoid_map(model), _name(model))


def _times(frames) -> np.ndarray:
    t = (np.asarray(frames, np.float64) - frames[0]) / MOTION_FPS
    if len(t) > 1 and not (np.diff(t.astype(np.float32)) > 0).all():
        raise OptionError("frames", "a VRM Animation needs increasing frames, each later than the one before")
    return t


def vrma_tracks(baked, hmap=None):
    """(TPose, local (F,J,4) glTF rotations, hips (F,3) glTF metres) of ``baked`` (see module)."""
    model = baked.model
    tp = tpose(model, hmap or humanoid_map(model), _name(model))
    local = normalized_local(tp, baked.bone_world_rotation)
    hips = qrot(tp.facing_q, baked.bone_world_position[:, tp.bone[0]])  # world position, turned to face −z
    return tp, TO_GLTF.quaternions(local), TO_GLTF.points(hips)


def _expressions(model, weight: np.ndarray) -> dict[str, np.ndarray]:
    """{VRM preset: (F,) weight} for the presets whose morph (preset or MMD name) moves."""
    index = {}
    for i, n in enumerate(model.morph_name):
        index.setdefault(n, i)
    out = {}
    for preset, mmd in MMD_NAMES.items():
        m = index.get(preset, index.get(mmd, -1))
        if m >= 0 and np.any(weight[:, m] != 0):
            out[preset] = np.clip(np.asarray(weight[:, m], np.float64), 0.0, 1.0)
    return out


def _nodes(doc, tp) -> list[int]:
    """The T-pose humanoid nodes (glTF metres, no rotation); their indices in row order."""
    rest = TO_GLTF.points(tp.position)
    nodes = []
    for j, n in enumerate(tp.bones):
        a = tp.parent[j]
        offset = rest[j] - (rest[a] if a >= 0 else 0.0)
        nodes.append(doc.add("nodes", {"name": n, "translation": [float(v) for v in offset]}))
    for j, a in enumerate(tp.parent):
        if a >= 0:
            doc.json["nodes"][nodes[a]].setdefault("children", []).append(nodes[j])
    return nodes


def write(baked, path, *, motion=None, warn=print) -> dict:
    """``baked`` (a ``BakedMotion`` of a humanoid model) → ``path`` (.vrma GLB); a summary dict."""
    time = _times(baked.frames)
    tp, local, hips = vrma_tracks(baked)
    doc = GltfDocument("mmdkit")
    nodes = _nodes(doc, tp)
    channels = [Channel(nodes[0], "translation", hips[:, None, :], np.ones(len(time), bool))]
    channels += [Channel(nodes[j], "rotation", local[:, j:j + 1], np.ones(len(time), bool))
                 for j in range(len(tp.bones))]
    ext = {"specVersion": "1.0", "humanoid": {"humanBones": {n: {"node": nodes[j]} for j, n in enumerate(tp.bones)}}}
    roots = [nodes[0]]
    expressions = _expressions(baked.model, np.asarray(baked.morph_weight))
    if expressions:
        preset = {}
        for name, w in expressions.items():
            node = doc.add("nodes", {"name": f"expression_{name}"})
            roots.append(node)
            preset[name] = {"node": node}
            values = np.zeros((len(time), 1, 3))
            values[:, 0, 0] = w
            channels.append(Channel(node, "translation", values, np.ones(len(time), bool)))
        ext["expressions"] = {"preset": preset}
    doc.add("scenes", {"nodes": roots})
    doc.json["scene"] = 0
    doc.json["extensionsUsed"] = [EXTENSION]
    doc.json["extensions"] = {EXTENSION: ext}
    add_animation(doc, "mmdkit", time, channels)
    files = doc.save(os.fspath(path), True)
    return {"path": os.fspath(path), "format": "vrma", "frames": len(time), "joints": len(tp.bones),
            "channels": len(channels), "expressions": sorted(expressions), "physics": baked.physics,
            "bytes": os.path.getsize(files[0])}
