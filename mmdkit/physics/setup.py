"""Physics set-up in numpy: a Model's rigid bodies and joints → the arrays a Bullet world is built from.

In: a ``Model`` (rigid_body_* (R,...), joint_* (J,...), bone_position (B, 3)).
Out: ``BodySetup`` (shapes, sizes, material values, collision bits, bind frames, the offsets
between each body and the bone it follows, which bones bodies drive) and ``JointSetup`` (kept
joints, their world frames, limits and springs). Imports without the C++ extension; bad indices
raise ``BuildError`` naming the model file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmdkit.errors import BuildError
from mmdkit.model.deform import effective_weights

__all__ = ["DEFAULT_FIXED_STEP", "DEFAULT_MAX_SUBSTEPS", "GRAVITY", "DEFAULT_WARMUP_STEPS", "BLOWUP_SIZES", "PHYSICS_WORLDS",
           "BodySetup", "JointSetup", "body_setup", "joint_setup", "euler_to_matrix", "body_frames",
           "model_array", "model_label", "model_size", "finite_or", "mesh_linked_bones", "body_partition",
           "subset_bodies", "subset_joints"]

#: Fixed simulation step (seconds) and substep cap: saba's settings (MMD documents none).
DEFAULT_FIXED_STEP = 1.0 / 120.0
DEFAULT_MAX_SUBSTEPS = 10
GRAVITY = (0.0, -98.0, 0.0)
#: Fixed steps simulated with the bones held still after a reset (start/seek): 0.5 s at 1/120.
DEFAULT_WARMUP_STEPS = 60
#: Bullet worlds one model's bodies are dealt into (``body_partition``) where they split into sets
#: that never meet: the worlds can step side by side on that many threads, and the motion does not
#: depend on how many threads step them.
PHYSICS_WORLDS = 2
#: Blow-up guard: a body farther than this many model sizes (``model_size``) from where its bone
#: puts it, or non-finite, is put back there at rest (a soft body: back to its rest shape).
BLOWUP_SIZES = 10.0


def model_label(model) -> str:
    """The file a model came from ('' for one built in code), for error messages."""
    return str(getattr(model, "source_path", "") or "")


def model_array(model, name: str, dtype, shape) -> np.ndarray:
    """``model.<name>`` as a C-contiguous array of ``dtype`` reshaped to ``shape``; zeros if absent."""
    a = getattr(model, name)
    if a is None:
        return np.zeros(shape, dtype)
    return np.ascontiguousarray(np.asarray(a).reshape(shape), dtype)


def finite_or(a: np.ndarray, fallback, what: str, warnings: list) -> np.ndarray:
    """``a`` with non-finite entries (per row when 2-D) replaced by ``fallback``; says how many rows
    in ``warnings`` ("<n> <what> non-finite, ...")."""
    bad = ~np.isfinite(a) if a.ndim == 1 else ~np.isfinite(a).all(axis=tuple(range(1, a.ndim)))
    if not bad.any():
        return a
    warnings.append(f"{int(bad.sum())} {what} non-finite, replaced")
    out = a.copy()
    out[bad] = fallback[bad] if isinstance(fallback, np.ndarray) else fallback
    return out


def model_size(model) -> float:
    """The model's size in units (≥ 1): the diagonal of the box around its finite bone and rigid
    body positions. The blow-up guard measures distances in it."""
    pts = [model_array(model, "bone_position", np.float64, (len(model.bone_name), 3)),
           model_array(model, "rigid_body_position", np.float64, (len(model.rigid_body_name), 3))]
    p = np.concatenate(pts)
    p = p[np.isfinite(p).all(axis=1)]
    if not len(p):
        return 1.0
    return max(1.0, float(np.linalg.norm(p.max(axis=0) - p.min(axis=0))))


def mesh_linked_bones(model) -> np.ndarray:
    """(B, B) bool: bones the mesh joins — a vertex weighted to both, or one the other's parent
    (and every bone with itself). A joint between such bones tears the mesh when it stretches."""
    B = int(len(model.bone_name))
    linked = np.eye(B, dtype=bool)
    weight = effective_weights(model.vertex_deform, model.vertex_bone_weight)
    bone = np.asarray(model.vertex_bone_index, np.int64).reshape(-1, 4)
    for k1 in range(4):
        for k2 in range(k1 + 1, 4):
            both = (weight[:, k1] > 0) & (weight[:, k2] > 0)
            a, b = bone[both, k1], bone[both, k2]
            ok = (a >= 0) & (a < B) & (b >= 0) & (b < B)
            linked[a[ok], b[ok]] = linked[b[ok], a[ok]] = True
    parent = model_array(model, "bone_parent", np.int64, (B,))
    child = np.nonzero((parent >= 0) & (parent < B))[0]
    linked[child, parent[child]] = linked[parent[child], child] = True
    return linked


def euler_to_matrix(euler: np.ndarray) -> np.ndarray:
    """(N,3) Euler radians as stored in PMX → (N,3,3) float64, MMD's order R = Ry·Rx·Rz."""
    e = np.asarray(euler, np.float64).reshape(-1, 3)
    cx, cy, cz = np.cos(e[:, 0]), np.cos(e[:, 1]), np.cos(e[:, 2])
    sx, sy, sz = np.sin(e[:, 0]), np.sin(e[:, 1]), np.sin(e[:, 2])
    n = len(e)
    rx = np.zeros((n, 3, 3)); ry = np.zeros((n, 3, 3)); rz = np.zeros((n, 3, 3))
    rx[:, 0, 0] = 1; rx[:, 1, 1] = cx; rx[:, 1, 2] = -sx; rx[:, 2, 1] = sx; rx[:, 2, 2] = cx
    ry[:, 1, 1] = 1; ry[:, 0, 0] = cy; ry[:, 0, 2] = sy; ry[:, 2, 0] = -sy; ry[:, 2, 2] = cy
    rz[:, 2, 2] = 1; rz[:, 0, 0] = cz; rz[:, 0, 1] = -sz; rz[:, 1, 0] = sz; rz[:, 1, 1] = cz
    return ry @ rx @ rz


def body_frames(position, euler) -> np.ndarray:
    """(N,3) positions + (N,3) Euler radians → (N,4,4) float64 model-space frames T·R."""
    n = len(position)
    m = np.zeros((n, 4, 4))
    m[:, :3, :3] = euler_to_matrix(euler)
    m[:, :3, 3] = np.asarray(position, np.float64).reshape(n, 3)
    m[:, 3, 3] = 1
    return m


@dataclass
class BodySetup:
    """Rigid bodies of one model as Bullet wants them (R bodies, B bones). Model space throughout.

    body_shape (R,) int32 0 sphere / 1 box / 2 capsule; body_size (R,3) float32 (clamped ≥ 0.001);
    body_mass, body_linear_damping, body_angular_damping, body_friction, body_restitution (R,) float32;
    body_group_bit (R,) int32 = 1 << group; body_collide_mask (R,) int32 (stored mask, 0xFFFF = all);
    body_mode (R,) int32 0 follow bone / 1 physics / 2 physics keeping the bone's translation;
    body_bone (R,) int32 (-1 none); body_bind (R,4,4) float64 bind frames; body_follow (R,) int32 bone
    whose world moves the body's target (bone 0 when none, -1 in a model without bones);
    body_offset / body_offset_inv (R,4,4) float32: body frame relative to translate(bone_position)
    and its inverse; drive_body, drive_bone, drive_mode (D,) int32: dynamic bodies that write a bone;
    bone_driven (B,) bool; warnings: list of str.
    """

    body_shape: np.ndarray
    body_size: np.ndarray
    body_mass: np.ndarray
    body_linear_damping: np.ndarray
    body_angular_damping: np.ndarray
    body_friction: np.ndarray
    body_restitution: np.ndarray
    body_group_bit: np.ndarray
    body_collide_mask: np.ndarray
    body_mode: np.ndarray
    body_bone: np.ndarray
    body_bind: np.ndarray
    body_follow: np.ndarray
    body_offset: np.ndarray
    body_offset_inv: np.ndarray
    drive_body: np.ndarray
    drive_bone: np.ndarray
    drive_mode: np.ndarray
    bone_driven: np.ndarray
    warnings: list = field(default_factory=list)


def _checked_shape_and_size(model, R: int, warnings: list):
    """(R,) int32 shapes (BuildError for unknown ones) and (R,3) float32 sizes ≥ 0.001."""
    shape = model_array(model, "rigid_body_shape", np.int32, (R,))
    if R and (shape.min() < 0 or shape.max() > 2):
        r = int(np.nonzero((shape < 0) | (shape > 2))[0][0])
        raise BuildError(f"rigid body {r} has unknown shape {shape[r]}", path=model_label(model),
                         section="rigid_body_shape")
    size = model_array(model, "rigid_body_size", np.float32, (R, 3))
    size = np.where(np.isfinite(size), size, 0).astype(np.float32)
    clamped = int(np.count_nonzero((size[:, 0] < 1e-3) | ((shape == 1)[:, None] & (size < 1e-3)).any(1)))
    if clamped:
        warnings.append(f"{clamped} rigid bodies with zero/negative size clamped to 0.001")
    return shape, np.maximum(size, 1e-3).astype(np.float32)


def body_setup(model) -> BodySetup:
    """The rigid bodies of ``model`` → ``BodySetup``; BuildError (naming the file) for a body whose
    bone or shape is out of range."""
    B = int(len(model.bone_name))
    R = int(len(model.rigid_body_name))
    warnings: list[str] = []
    body_bone = model_array(model, "rigid_body_bone", np.int32, (R,))
    bad = np.nonzero((body_bone < -1) | (body_bone >= B))[0]
    if len(bad):
        raise BuildError(f"rigid body {bad[0]} refers to bone {body_bone[bad[0]]}, model has {B} bones",
                         path=model_label(model), section="rigid_body_bone")
    shape, size = _checked_shape_and_size(model, R, warnings)
    mode = model_array(model, "rigid_body_mode", np.int32, (R,))
    group = model_array(model, "rigid_body_group", np.int32, (R,))
    # the stored mask says which groups a body collides with (0xFFFF all; a body's own group
    # is usually cleared), exactly Bullet's filter mask
    mask = (model_array(model, "rigid_body_collide_mask", np.int32, (R,)) & 0xFFFF).astype(np.int32)

    # Bind frames and offsets relative to the followed bone's rest (translate(bone_position));
    # non-finite positions/rotations (hostile files, code-built models) become finite ones
    follow = np.where(body_bone >= 0, body_bone, 0 if B > 0 else -1).astype(np.int32)
    bone_pos = model_array(model, "bone_position", np.float64, (B, 3)) if B else np.zeros((0, 3))
    bone_pos = finite_or(bone_pos, 0.0, "bone positions", warnings)
    followed = np.where((follow >= 0)[:, None], bone_pos[np.maximum(follow, 0)] if B else 0.0, 0.0)
    body_bind = body_frames(
        finite_or(model_array(model, "rigid_body_position", np.float64, (R, 3)), followed,
                  "rigid body positions", warnings),
        finite_or(model_array(model, "rigid_body_rotation", np.float64, (R, 3)), 0.0,
                  "rigid body rotations", warnings))
    offset = body_bind.copy()
    has = follow >= 0
    offset[has, :3, 3] -= bone_pos[follow[has]]

    drive = np.nonzero((mode != 0) & (body_bone >= 0))[0]
    bone_driven = np.zeros(B, bool)
    bone_driven[body_bone[drive]] = True
    return BodySetup(
        body_shape=shape, body_size=size, body_mass=model_array(model, "rigid_body_mass", np.float32, (R,)),
        body_linear_damping=finite_or(model_array(model, "rigid_body_linear_damping", np.float32, (R,)), 0.5,
                                      "rigid body linear dampings", warnings),
        body_angular_damping=finite_or(model_array(model, "rigid_body_angular_damping", np.float32, (R,)), 0.5,
                                       "rigid body angular dampings", warnings),
        body_friction=finite_or(model_array(model, "rigid_body_friction", np.float32, (R,)), 0.5,
                                "rigid body frictions", warnings),
        body_restitution=finite_or(model_array(model, "rigid_body_restitution", np.float32, (R,)), 0.0,
                                   "rigid body restitutions", warnings),
        body_group_bit=(np.left_shift(1, np.clip(group, 0, 15))).astype(np.int32), body_collide_mask=mask,
        body_mode=mode, body_bone=body_bone, body_bind=body_bind, body_follow=follow,
        body_offset=np.ascontiguousarray(offset, np.float32),
        body_offset_inv=np.ascontiguousarray(np.linalg.inv(offset), np.float32),
        drive_body=drive.astype(np.int32), drive_bone=body_bone[drive].astype(np.int32),
        drive_mode=mode[drive].astype(np.int32), bone_driven=bone_driven, warnings=warnings)


@dataclass
class JointSetup:
    """The joints of one model that Bullet gets (K kept of J), model space.

    joint_index (K,) int32 into the model's joints; joint_body_a, joint_body_b (K,) int32;
    joint_frame (K,4,4) float32 world frame at bind; joint_position (K,3) float32;
    joint_translation_lower/upper, joint_rotation_lower/upper (K,3) float32 (radians);
    joint_stiffness (K,6) float32 (translation springs, then rotation springs);
    joint_span (K,) float64: how far the translation limits let the two bodies drift apart;
    warnings: list of str (dropped joints).
    """

    joint_index: np.ndarray
    joint_body_a: np.ndarray
    joint_body_b: np.ndarray
    joint_frame: np.ndarray
    joint_position: np.ndarray
    joint_translation_lower: np.ndarray
    joint_translation_upper: np.ndarray
    joint_rotation_lower: np.ndarray
    joint_rotation_upper: np.ndarray
    joint_stiffness: np.ndarray
    joint_span: np.ndarray
    warnings: list = field(default_factory=list)


def joint_setup(model) -> JointSetup:
    """The joints of ``model`` → ``JointSetup``: joints missing a body or joining a body to itself
    are dropped with a warning; a body index out of range is a BuildError naming the file."""
    R = int(len(model.rigid_body_name))
    J = int(len(model.joint_name))
    ja = model_array(model, "joint_body_a", np.int32, (J,))
    jb = model_array(model, "joint_body_b", np.int32, (J,))
    out_of_range = np.nonzero((ja < -1) | (ja >= R) | (jb < -1) | (jb >= R))[0]
    if len(out_of_range):
        j = int(out_of_range[0])
        raise BuildError(f"joint {j} refers to rigid bodies ({ja[j]}, {jb[j]}), model has {R} rigid bodies",
                         path=model_label(model), section="joint_body_a/joint_body_b")
    position = model_array(model, "joint_position", np.float64, (J, 3))
    rotation = model_array(model, "joint_rotation", np.float64, (J, 3))
    keep = (ja >= 0) & (jb >= 0) & (ja != jb) & np.isfinite(position).all(1) & np.isfinite(rotation).all(1)
    dropped = np.nonzero(~keep)[0]
    warnings = []
    if len(dropped):
        names = model.joint_name
        warnings.append(f"{len(dropped)} joints dropped (missing body, A == B or non-finite frame): "
                        + ", ".join(repr(names[j]) if j < len(names) else str(j) for j in dropped[:8]))
    k = np.nonzero(keep)[0]

    def kept(name):  # (K,3) float32, non-finite limits/springs → 0
        return np.ascontiguousarray(finite_or(model_array(model, name, np.float32, (J, 3))[k], 0.0,
                                              name.replace("_", " ") + "s", warnings), np.float32)

    lower, upper = kept("joint_translation_lower"), kept("joint_translation_upper")
    span = 2 * np.linalg.norm(np.maximum(np.abs(lower.astype(np.float64)), np.abs(upper.astype(np.float64))), axis=1)
    frame = body_frames(position[k], rotation[k])
    stiffness = np.concatenate([kept("joint_spring_translation"), kept("joint_spring_rotation")], 1)
    return JointSetup(
        joint_index=k.astype(np.int32), joint_body_a=ja[k], joint_body_b=jb[k],
        joint_frame=np.ascontiguousarray(frame, np.float32),
        joint_position=frame[:, :3, 3].astype(np.float32),
        joint_translation_lower=lower, joint_translation_upper=upper,
        joint_rotation_lower=kept("joint_rotation_lower"), joint_rotation_upper=kept("joint_rotation_upper"),
        joint_stiffness=np.ascontiguousarray(stiffness, np.float32), joint_span=span, warnings=warnings)


def _meets(bodies: BodySetup, joints: JointSetup) -> np.ndarray:
    """(R, R) bool, symmetric: the two bodies share a joint or may collide (each one's group bit
    in the other's mask)."""
    g, m = bodies.body_group_bit, bodies.body_collide_mask
    meets = ((g[:, None] & m[None, :]) != 0) & ((g[None, :] & m[:, None]) != 0)
    meets[joints.joint_body_a, joints.joint_body_b] = True
    meets[joints.joint_body_b, joints.joint_body_a] = True
    np.fill_diagonal(meets, False)
    return meets


def _dynamic_sets(dyn: np.ndarray, meets: np.ndarray) -> list[np.ndarray]:
    """The bodies that may be dynamic (``dyn``, (R,) bool: mode ≠ 0) cut into sets that never
    act on one another: no pair in ``meets`` joins two sets (kinematic bodies move as their bones
    say, so they join nothing). Each set int64 ascending, in the order of its lowest body."""
    R = len(dyn)
    root = np.arange(R)

    def find(x):
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for a, b in np.argwhere(np.triu(meets & dyn[:, None] & dyn[None, :], 1)):
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    label = np.array([find(x) for x in range(R)], np.int64)
    return [np.nonzero(dyn & (label == r))[0] for r in np.unique(label[dyn])]


def body_partition(bodies: BodySetup, joints: JointSetup, parts: int) -> list[np.ndarray]:
    """Bodies for ``parts`` Bullet worlds that step side by side (one per thread) and give what
    one world gives: each body that may be dynamic in exactly one world, with every kinematic body
    it can meet (joint partners, bodies it may collide with; these may be in several worlds).
    Sets that never act on one another (``_dynamic_sets``) are dealt out largest first, each to
    the world with the fewest bodies and joints so far. Returns each world's body indices (int64,
    ascending: Bullet sees them in the model's order); one list of all bodies when the model does
    not split (``parts`` < 2, one set, soft bodies are the caller's business)."""
    R = len(bodies.body_mode)
    dyn = bodies.body_mode != 0
    meets = _meets(bodies, joints)
    sets = _dynamic_sets(dyn, meets)
    if parts < 2 or len(sets) < 2:
        return [np.arange(R)]
    jointed = np.zeros(R, np.int64)
    np.add.at(jointed, joints.joint_body_a, 1)
    load = np.zeros(min(parts, len(sets)), np.int64)
    mine = np.zeros((len(load), R), bool)
    for s in sorted(sets, key=len, reverse=True):
        w = int(np.argmin(load))
        mine[w, s] = True
        load[w] += len(s) + jointed[s].sum()
    return [np.nonzero(own | (~dyn & meets[:, own].any(1)))[0] for own in mine]


def _renumbered(index: np.ndarray, num_bodies: int) -> np.ndarray:
    """(num_bodies,) int64: each body's row among the bodies ``index`` (ascending), -1 if not there."""
    new = np.full(num_bodies, -1, np.int64)
    new[index] = np.arange(len(index))
    return new


def subset_bodies(bodies: BodySetup, index: np.ndarray) -> BodySetup:
    """``bodies`` restricted to the bodies ``index`` (ascending int64), renumbered 0..len-1: the
    per-body arrays taken, the drive table kept for the bodies taken and pointed at their new rows."""
    new = _renumbered(index, len(bodies.body_mode))
    keep = new[bodies.drive_body] >= 0
    per_body = {f: getattr(bodies, f)[index] for f in BodySetup.__dataclass_fields__ if f.startswith("body_")}
    return BodySetup(**per_body, drive_body=new[bodies.drive_body[keep]].astype(np.int32),
                     drive_bone=bodies.drive_bone[keep], drive_mode=bodies.drive_mode[keep],
                     bone_driven=bodies.bone_driven, warnings=[])


def subset_joints(joints: JointSetup, index: np.ndarray, num_bodies: int) -> JointSetup:
    """The joints of ``joints`` between two of the bodies ``index`` (ascending), their body
    numbers renumbered as ``subset_bodies`` does (``num_bodies``: R of the whole model)."""
    new = _renumbered(index, num_bodies)
    keep = (new[joints.joint_body_a] >= 0) & (new[joints.joint_body_b] >= 0)
    fields = {f: getattr(joints, f)[keep] for f in JointSetup.__dataclass_fields__ if f != "warnings"}
    fields["joint_body_a"] = new[joints.joint_body_a[keep]].astype(np.int32)
    fields["joint_body_b"] = new[joints.joint_body_b[keep]].astype(np.int32)
    return JointSetup(**fields, warnings=[])
