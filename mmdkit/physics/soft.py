"""PMX 2.1 soft bodies: a material's triangles → a Bullet soft body with the file's settings.

In: a ``Model`` (soft_bodies records, material_face_start, face_vertex_index, vertex_position)
and a Bullet world built with soft-body support. Out: per added soft body the model vertices
of its nodes ((n,) int32) and its record index; warnings for records that cannot be simulated.
"""

from __future__ import annotations

import numpy as np

from mmdkit.model.model import SOFT_BODY_MAX_ITERATIONS  # one cap, read by the PMX reader too

__all__ = ["soft_body_mesh", "add_soft_bodies", "SOFT_BODY_MAX_ITERATIONS"]


def soft_body_mesh(model, rec):
    """Record → (node vertex (n,) int64 model vertex ids, faces (m,3) int32 node ids, node positions
    (n,3) float32 model space), or a str saying why it cannot be simulated."""
    if rec.shape != 0:
        return "rope soft bodies are not supported, skipped"
    start = np.asarray(model.material_face_start)
    faces = np.asarray(model.face_vertex_index)[start[rec.material]:start[rec.material + 1]]
    if len(faces) == 0:
        return f"material {rec.material} has no faces, skipped"
    used, local = np.unique(faces, return_inverse=True)
    local = local.reshape(-1, 3).astype(np.int32)
    verts = np.ascontiguousarray(np.asarray(model.vertex_position, np.float32)[used])
    return used, local, verts


def capped_iterations(rec, warnings: list) -> np.ndarray:
    """(4,) int32 solver iterations of a soft body record, clamped to [0, SOFT_BODY_MAX_ITERATIONS]."""
    it = np.asarray(rec.iteration, np.int64).reshape(4)
    ok = np.clip(it, 0, SOFT_BODY_MAX_ITERATIONS)
    if (ok != it).any():
        warnings.append(f"soft body {rec.name!r}: solver iterations {it.tolist()} clamped to "
                        f"[0, {SOFT_BODY_MAX_ITERATIONS}]")
    return ok.astype(np.int32)


def _add_one(world, rec, used, local, verts, num_bodies: int, warnings: list) -> int:
    """Add one soft body with the record's config, pins and anchors; returns its world index."""
    k = world.add_soft_body(verts, local, mass=float(rec.total_mass), margin=float(rec.collision_margin),
                            group=int(1 << (int(rec.group) & 15)), mask=int(rec.collide_mask) & 0xFFFF)
    world.configure_soft(k, np.asarray(rec.config, np.float32), capped_iterations(rec, warnings),
                         np.asarray(rec.material_coef, np.float32),
                         int(rec.b_link_distance) if rec.flags & 1 else 0,
                         int(rec.cluster_count) if rec.flags & 2 else 0,
                         float(rec.total_mass), float(rec.collision_margin), int(rec.aero_model))
    node_of = {int(v): i for i, v in enumerate(used)}
    for vx in rec.pins:
        if int(vx) in node_of:
            world.pin_soft_node(k, node_of[int(vx)])
    for rb, vx, _near in rec.anchors:
        if int(vx) in node_of and 0 <= int(rb) < num_bodies:
            world.anchor_soft_node(k, node_of[int(vx)], int(rb))
    return k


def add_soft_bodies(world, model, num_bodies: int):
    """Every soft body record of ``model`` into ``world`` → (soft_body_vertex: list of (n,) int32
    model vertices per added body, soft_body_index: list of record indices, warnings: list of str)."""
    vertex, index, warnings = [], [], []
    for si, rec in enumerate(tuple(getattr(model, "soft_bodies", ()) or ())):
        mesh = soft_body_mesh(model, rec)
        if isinstance(mesh, str):
            warnings.append(f"soft body {si} ({rec.name!r}): {mesh}")
            continue
        used, local, verts = mesh
        _add_one(world, rec, used, local, verts, num_bodies, warnings)
        vertex.append(used.astype(np.int32))
        index.append(si)
    return vertex, index, warnings
