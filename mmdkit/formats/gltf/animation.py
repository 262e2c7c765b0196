"""glTF animations: reading channels and sampling them, vectorised over many times.

In: ``animations[i]`` JSON + ``Accessors`` (reading); a ``GltfChannel`` / clip and times in
seconds (sampling). Out: ``GltfAnimation`` clips; ``sample_channel`` → (T, n) float64 values with
STEP, LINEAR (slerp, shortest path, for rotations) and CUBICSPLINE (Hermite, per-second tangents)
as the glTF 2.0 spec defines them; times before the first / after the last key hold that key, and
a time equal to a key returns that key exactly. ``clip_node_trs`` gives every node's local TRS.
"""

from __future__ import annotations

import math

import numpy as np

from mmdkit.animation.rotation import slerp_rows
from mmdkit.formats.gltf.accessor import Accessors
from mmdkit.formats.gltf.asset import GltfAnimation, GltfAsset, GltfChannel
from mmdkit.formats.gltf.jsonpath import Obj
from mmdkit.formats.gltf.scene import MAX_VALUE, trs_matrices

PATH_WIDTH = {"translation": 3, "rotation": 4, "scale": 3}
INTERPOLATIONS = ("LINEAR", "STEP", "CUBICSPLINE")
MAX_CLIP_SECONDS = 2**31 / 30
"""Latest key time read (s): frame 30·t of a clip must fit a signed 32-bit frame number."""


def _channel(c: Obj, samplers: list[Obj], acc: Accessors, node_targets: np.ndarray,
             warnings: list[str]) -> GltfChannel | None:
    """One ``channels[j]`` with its sampler → ``GltfChannel`` (None, warned, for unknown targets)."""
    si = c.int("sampler", hi=len(samplers))
    tgt = c.obj("target")
    path = tgt.str("path")
    if not tgt.has("node") or path not in ("translation", "rotation", "scale", "weights"):
        warnings.append(f"{c.jpath}: target {path!r:.30} without a node or of an unknown path; skipped")
        return None
    node = tgt.int("node", hi=len(node_targets))
    if path == "weights" and node_targets[node] <= 0:
        raise tgt.error("node", f"node {node} has no mesh with morph targets to animate")
    width = PATH_WIDTH.get(path) or int(node_targets[node])
    s = samplers[si]
    interp = s.str("interpolation", "LINEAR", choices=INTERPOLATIONS)
    key_time = acc.floats(s.int("input"), s, "input", ("SCALAR",))[:, 0]
    # NaN fails >=; with the order checked, finite ends mean all times are finite
    if not ((key_time[1:] >= key_time[:-1]).all() and math.isfinite(key_time[0])
            and math.isfinite(key_time[-1])):
        raise s.error("input", "key times are not finite and increasing")
    if not (abs(float(key_time[0])) <= MAX_CLIP_SECONDS and abs(float(key_time[-1])) <= MAX_CLIP_SECONDS):
        raise s.error("input", f"key time {float(key_time[-1]):.6g} s is beyond the {MAX_CLIP_SECONDS:.3g} s "
                               "(2^31 frames at 30 fps) a clip may last")
    types = ("SCALAR",) if path == "weights" else (("VEC4",) if path == "rotation" else ("VEC3",))
    out = acc.floats(s.int("output"), s, "output", types)
    per = 3 if interp == "CUBICSPLINE" else 1
    if out.size != len(key_time) * per * width:
        raise s.error("output", f"has {out.size // width} values of {width}, {len(key_time)} keys "
                                f"{'× 3 (CUBICSPLINE) ' if per == 3 else ''}need {len(key_time) * per}")
    v = out.reshape(len(key_time), per, width)
    if v.size and not np.abs(v).max() <= MAX_VALUE:
        raise s.error("output", f"holds a value beyond ±{MAX_VALUE:g}")
    if path == "rotation":
        v = _unit_keys(v, per, s)
    tangents = (v[:, 0], v[:, 2]) if per == 3 else (None, None)
    return GltfChannel(node=node, path=path, interpolation=interp, key_time=key_time,
                       key_value=v[:, per // 2], key_in_tangent=tangents[0], key_out_tangent=tangents[1])


def _unit_keys(v: np.ndarray, per: int, s: Obj) -> np.ndarray:
    """(K, per, 4) rotation keys with the values (middle column) made unit quaternions."""
    q = v[:, per // 2].astype(np.float64)
    n = np.sqrt(np.einsum("ij,ij->i", q, q))
    if not (n > 1e-6).all():
        raise s.error("output", "holds a rotation key of length 0 (not a quaternion)")
    out = np.array(v, np.float32)
    out[:, per // 2] = q / n[:, None]
    out.flags.writeable = False
    return out


def read_animation(a: Obj, acc: Accessors, node_targets: np.ndarray, warnings: list[str]) -> GltfAnimation:
    """``animations[i]`` → ``GltfAnimation``; ``node_targets`` (N,) = morph target count per node."""
    samplers = a.objs("samplers")
    channels = []
    for c in a.objs("channels"):
        ch = _channel(c, samplers, acc, node_targets, warnings)
        if ch is not None:
            channels.append(ch)
    duration = max((float(ch.key_time[-1]) for ch in channels), default=0.0)
    return GltfAnimation(name=a.str("name", ""), channels=tuple(channels), duration=duration)


def sample_channel(channel: GltfChannel, times) -> np.ndarray:
    """Values of ``channel`` at ``times`` (T,) seconds → (T, n) float64 (rotations unit x y z w)."""
    times = np.atleast_1d(np.asarray(times, np.float64))
    kt = channel.key_time.astype(np.float64)
    kv = channel.key_value.astype(np.float64)
    if len(kt) == 1:
        return np.repeat(kv, len(times), axis=0)
    k = np.searchsorted(kt, times, side="right") - 1
    if channel.interpolation == "STEP":
        return kv[np.clip(k, 0, len(kt) - 1)]
    k = np.clip(k, 0, len(kt) - 2)
    dt = kt[k + 1] - kt[k]
    s = np.clip((times - kt[k]) / np.where(dt > 0, dt, 1.0), 0.0, 1.0)
    # a time that is a key's time at the file's float32 precision (f/30 s written, f/30 s asked) is that key
    t32 = times.astype(np.float32).astype(np.float64)
    s = np.where(t32 == kt[k], 0.0, np.where(t32 == kt[k + 1], 1.0, s))
    v0, v1 = kv[k], kv[k + 1]
    if channel.interpolation == "CUBICSPLINE":
        s2, s3 = s * s, s * s * s
        b0 = channel.key_out_tangent.astype(np.float64)[k] * dt[:, None]
        a1 = channel.key_in_tangent.astype(np.float64)[k + 1] * dt[:, None]
        out = ((2 * s3 - 3 * s2 + 1)[:, None] * v0 + (s3 - 2 * s2 + s)[:, None] * b0
               + (-2 * s3 + 3 * s2)[:, None] * v1 + (s3 - s2)[:, None] * a1)
        if channel.path == "rotation":
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-30)
    elif channel.path == "rotation":
        out = slerp_rows(v0, v1, s)
    else:
        out = v0 + s[:, None] * (v1 - v0)
    # a time on a key gives that key's stored value exactly
    return np.where((s == 0)[:, None], v0, np.where((s == 1)[:, None], v1, out))


def clip_node_trs(asset: GltfAsset, clip, times, nodes=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local TRS of every node (or of the node indices ``nodes`` (M,), in that order) at ``times``
    (T,) s of ``clip`` (index, name or ``GltfAnimation``).

    Out: translation (T, N|M, 3), rotation (T, N|M, 4) x y z w, scale (T, N|M, 3), float64; nodes
    a clip does not animate keep their rest TRS.
    """
    anim = clip if isinstance(clip, GltfAnimation) else asset.animation(clip)
    times = np.atleast_1d(np.asarray(times, np.float64))
    nodes = np.arange(asset.num_nodes) if nodes is None else np.asarray(nodes, np.int64)
    column = np.full(asset.num_nodes, -1, np.int64)
    column[nodes] = np.arange(len(nodes))
    rest = {"translation": asset.node_translation, "rotation": asset.node_rotation, "scale": asset.node_scale}
    trs = {k: np.array(np.broadcast_to(v[nodes], (len(times), len(nodes), v.shape[1])), np.float64)
           for k, v in rest.items()}
    for ch in anim.channels:
        if ch.path != "weights" and column[ch.node] >= 0:
            trs[ch.path][:, column[ch.node]] = sample_channel(ch, times)
    return trs["translation"], trs["rotation"], trs["scale"]


def clip_node_local(asset: GltfAsset, clip, times, nodes=None) -> np.ndarray:
    """Local matrices (T, N|M, 4, 4) float64 of every node (or of ``nodes``) at ``times`` of
    ``clip``; nodes given by a ``matrix`` (which glTF forbids animating) keep it exactly."""
    nodes = np.arange(asset.num_nodes) if nodes is None else np.asarray(nodes, np.int64)
    local = trs_matrices(*clip_node_trs(asset, clip, times, nodes))
    fixed = asset.node_has_matrix[nodes]
    local[:, fixed] = asset.node_local[nodes[fixed]]
    return local


def clip_target_weights(asset: GltfAsset, clip, times) -> dict[int, np.ndarray]:
    """Morph weights of the nodes ``clip`` animates: {node: (T, K) float64}."""
    anim = clip if isinstance(clip, GltfAnimation) else asset.animation(clip)
    return {ch.node: sample_channel(ch, times) for ch in anim.channels if ch.path == "weights"}
