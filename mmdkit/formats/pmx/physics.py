"""PMX rigid bodies, joints and (2.1) soft bodies ⇄ Model ``rigid_body_*``, ``joint_*``,
``soft_bodies``.

In (read): a ``PmxReader`` at the rigid body count. Out: (R, ...) and (J, ...) arrays
(positions model space, rotations Euler radians) and a tuple of ``SoftBodyRecord``. The
fixed part of each record is one table (``RIGID_FIELDS``, ``JOINT_FIELDS``, ``SOFT_FIELDS``)
used by the reader and the writer.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields

import numpy as np

from mmdkit.formats.binary import join_records, record, record_bytes
from mmdkit.formats.pmx.common import PmxReader, PmxWriter, index_dtypes
from mmdkit.model.model import SOFT_BODY_MAX_ITERATIONS

# after the two names; Model fields are "rigid_body_" + name
RIGID_FIELDS = [("bone", "bone", 1), ("group", "B", 1), ("collide_mask", "H", 1), ("shape", "B", 1),
                ("size", "f", 3), ("position", "f", 3), ("rotation", "f", 3), ("mass", "f", 1),
                ("linear_damping", "f", 1), ("angular_damping", "f", 1), ("restitution", "f", 1),
                ("friction", "f", 1), ("mode", "B", 1)]
# after the two names; Model fields are "joint_" + name
JOINT_FIELDS = [("type", "B", 1), ("body_a", "rigid", 1), ("body_b", "rigid", 1), ("position", "f", 3),
                ("rotation", "f", 3), ("translation_lower", "f", 3), ("translation_upper", "f", 3),
                ("rotation_lower", "f", 3), ("rotation_upper", "f", 3), ("spring_translation", "f", 3),
                ("spring_rotation", "f", 3)]


@dataclass(frozen=True)
class SoftBodyRecord:
    """One PMX 2.1 soft body, as stored (indices resolved to ints; -1 none)."""

    name: str = ""
    name_en: str = ""
    shape: int = 0  # 0 tri-mesh, 1 rope
    material: int = -1
    group: int = 0
    collide_mask: int = 0xFFFF  # bit g set = collides with group g
    flags: int = 0  # 1 B-link, 2 clusters, 4 link hybrid
    b_link_distance: int = 0
    cluster_count: int = 0
    total_mass: float = 1.0
    collision_margin: float = 0.0
    aero_model: int = 0
    config: tuple = (0.0,) * 12  # VCF DP DG LF PR VC DF MT CHR KHR SHR AHR
    cluster: tuple = (0.0,) * 6  # SRHR_CL SKHR_CL SSHR_CL SR_SPLT_CL SK_SPLT_CL SS_SPLT_CL
    iteration: tuple = (0, 0, 0, 0)  # V_IT P_IT D_IT C_IT
    material_coef: tuple = (0.0, 0.0, 0.0)  # LST AST VST
    anchors: tuple = ()  # ((rigid_body, vertex, near_mode), ...)
    pins: tuple = ()  # (vertex, ...)


# SoftBodyRecord fields from "shape" to "material_coef", as stored
SOFT_FIELDS = [("shape", "B", 1), ("material", "material", 1), ("group", "B", 1), ("collide_mask", "H", 1),
               ("flags", "B", 1), ("b_link_distance", "i", 1), ("cluster_count", "i", 1), ("total_mass", "f", 1),
               ("collision_margin", "f", 1), ("aero_model", "i", 1), ("config", "f", 12), ("cluster", "f", 6),
               ("iteration", "i", 4), ("material_coef", "f", 3)]


def _cap_iterations(values: dict, capped: list) -> None:
    """Iteration counts outside [0, SOFT_BODY_MAX_ITERATIONS] clamped; ``capped`` collects them."""
    it = values["iteration"]
    ok = tuple(min(max(v, 0), SOFT_BODY_MAX_ITERATIONS) for v in it)
    if ok != it:
        capped.extend(v for v, o in zip(it, ok) if v != o)
        values["iteration"] = ok


def _read_named_records(r: PmxReader, f: dict, prefix: str, fields: list, what: str) -> None:
    """Count, then n × (name, name_en, fixed record) → Model fields ``prefix + field``."""
    dt = record(fields, index_dtypes(r.sizes))
    n = r.i32_count(8 + dt.itemsize, what)
    names, names_en, fixed = [], [], []
    for _ in range(n):
        names.append(r.text())
        names_en.append(r.text())
        fixed.append(r.raw(dt.itemsize))
    rec = join_records(fixed, dt)
    f[prefix + "name"], f[prefix + "name_en"] = tuple(names), tuple(names_en)
    for name in dt.names:
        f[prefix + name] = rec[name]


def _write_named_records(w: PmxWriter, model, prefix: str, fields: list, n: int) -> None:
    dt = record(fields, index_dtypes(w.sizes))
    rec = np.zeros(n, dt)
    for name in dt.names:
        rec[name] = getattr(model, prefix + name)
    names, names_en = getattr(model, prefix + "name"), getattr(model, prefix + "name_en")
    w.i32(n)
    for i, fixed in enumerate(record_bytes(rec)):
        w.text(names[i])
        w.text(names_en[i])
        w.raw(fixed)


def read_rigid_bodies(r: PmxReader, f: dict) -> None:
    _read_named_records(r, f, "rigid_body_", RIGID_FIELDS, "rigid body")


def read_joints(r: PmxReader, f: dict) -> None:
    _read_named_records(r, f, "joint_", JOINT_FIELDS, "joint")


def write_rigid_bodies(w: PmxWriter, model) -> None:
    _write_named_records(w, model, "rigid_body_", RIGID_FIELDS, model.num_rigid_bodies)


def write_joints(w: PmxWriter, model) -> None:
    _write_named_records(w, model, "joint_", JOINT_FIELDS, model.num_joints)


def read_soft_bodies(r: PmxReader, f: dict) -> None:
    """PMX 2.1 soft bodies (shape, material, parameters, anchors, pins) → ``soft_bodies``."""
    dt = record(SOFT_FIELDS, index_dtypes(r.sizes))
    rsz, vsz = r.sizes["rigid"], r.sizes["vertex"]
    ns = r.i32_count(8 + dt.itemsize + 4 + 4, "soft body")
    soft, capped = [], []
    for _ in range(ns):
        name, name_en = r.text(), r.text()
        v = np.frombuffer(r.raw(dt.itemsize), dt)[0]
        na = r.count(r.i32(), rsz + vsz + 1, "soft body anchor")
        anchors = tuple((r.index("rigid"), r.index("vertex"), r.u8()) for _ in range(na))
        npin = r.count(r.i32(), vsz, "soft body pin")
        pins = tuple(r.index("vertex") for _ in range(npin))
        values = {k: tuple(v[k].tolist()) if dt[k].shape else v[k].item() for k in dt.names}
        _cap_iterations(values, capped)
        soft.append(SoftBodyRecord(name=name, name_en=name_en, anchors=anchors, pins=pins, **values))
    if capped:
        r.warnings.append(f"soft bodies: {len(capped)} iteration counts outside [0, {SOFT_BODY_MAX_ITERATIONS}] "
                          f"clamped (e.g. {capped[0]})")
    f["soft_bodies"] = tuple(soft)


def write_soft_bodies(w: PmxWriter, model) -> None:
    dt = record(SOFT_FIELDS, index_dtypes(w.sizes))
    w.i32(len(model.soft_bodies))
    for sb in model.soft_bodies:
        w.text(sb.name)
        w.text(sb.name_en)
        rec = np.zeros(1, dt)
        for k in dt.names:
            rec[k] = getattr(sb, k)
        w.raw(rec.tobytes())
        w.i32(len(sb.anchors))
        for rb, vx, near in sb.anchors:
            w.index("rigid", rb)
            w.index("vertex", vx)
            w.u8(near)
        w.i32(len(sb.pins))
        for vx in sb.pins:
            w.index("vertex", vx)
