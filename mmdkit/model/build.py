"""Records → validated, frozen ``Model``.

In: a dict keyed by ``Model`` field names (from a format reader or ``ModelBuilder``); missing
arrays default to empty/neutral. Out: ``Model`` whose arrays have the documented dtype/shape,
are C-contiguous and read-only. Every index is range-checked and every float is finite and bounded
(±MAX_COORDINATE = 1e6 MMD units for positions and sizes, ±MAX_NUMBER = 1e9 otherwise) here
(``BuildError`` naming the field, row and value) so later stages can trust them.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import BuildError
from mmdkit.model.model import Model, freeze

# field -> (dtype, trailing shape, count symbol). 'A' in a shape = additional UV count.
_SPEC: dict[str, tuple] = {}


def _add(sym, dtype, shape, *names):
    for n in names:
        _SPEC[n] = (dtype, shape, sym)


_add("V", np.float32, (3,), "vertex_position", "vertex_normal", "vertex_sdef_c", "vertex_sdef_r0", "vertex_sdef_r1")
_add("V", np.float32, (2,), "vertex_uv")
_add("V", np.float32, ("A", 4), "vertex_additional_uv")
_add("V", np.uint8, (), "vertex_deform")
_add("V", np.int32, (4,), "vertex_bone_index")
_add("V", np.float32, (4,), "vertex_bone_weight")
_add("V", np.float32, (), "vertex_edge_scale")
_add("F", np.int32, (3,), "face_vertex_index")
_add("M", np.float32, (4,), "material_diffuse", "material_edge_color")
_add("M", np.float32, (3,), "material_specular", "material_ambient")
_add("M", np.float32, (), "material_specular_power", "material_edge_size")
_add("M", np.uint8, (), "material_flags", "material_sphere_mode")
_add("M", np.int32, (), "material_texture_index", "material_sphere_index", "material_toon_index")
_add("M", np.bool_, (), "material_toon_shared")
_add("M+1", np.int32, (), "material_face_start")
_add("B", np.float32, (3,), "bone_position", "bone_tail_offset", "bone_fixed_axis", "bone_local_axis_x",
     "bone_local_axis_z")
_add("B", np.int32, (), "bone_parent", "bone_layer", "bone_tail_index", "bone_append_parent", "bone_external_key",
     "bone_ik")
_add("B", np.uint16, (), "bone_flags")
_add("B", np.float32, (), "bone_append_ratio")
_add("K", np.int32, (), "ik_bone", "ik_target", "ik_loop_count")
_add("K", np.float32, (), "ik_limit_angle")
_add("K+1", np.int32, (), "ik_link_start")
_add("L", np.int32, (), "ik_link_bone")
_add("L", np.bool_, (), "ik_link_has_limit")
_add("L", np.float32, (3,), "ik_link_lower", "ik_link_upper")
_add("N", np.uint8, (), "morph_panel", "morph_kind")
for _t in ("vertex", "uv", "bone", "material", "group", "impulse"):
    _add("N+1", np.int32, (), f"{_t}_morph_start")
_add("Ev", np.int32, (), "vertex_morph_vertex")
_add("Ev", np.float32, (3,), "vertex_morph_offset")
_add("Eu", np.int32, (), "uv_morph_vertex")
_add("Eu", np.float32, (4,), "uv_morph_offset")
_add("Eb", np.int32, (), "bone_morph_bone")
_add("Eb", np.float32, (3,), "bone_morph_translation")
_add("Eb", np.float32, (4,), "bone_morph_rotation")
_add("Em", np.int32, (), "material_morph_material")
_add("Em", np.uint8, (), "material_morph_op")
_add("Em", np.float32, (4,), "material_morph_diffuse", "material_morph_edge_color", "material_morph_texture_tint",
     "material_morph_sphere_tint", "material_morph_toon_tint")
_add("Em", np.float32, (3,), "material_morph_specular", "material_morph_ambient")
_add("Em", np.float32, (), "material_morph_specular_power", "material_morph_edge_size")
_add("Eg", np.int32, (), "group_morph_target")
_add("Eg", np.float32, (), "group_morph_weight")
_add("Ei", np.int32, (), "impulse_morph_rigid_body")
_add("Ei", np.bool_, (), "impulse_morph_local")
_add("Ei", np.float32, (3,), "impulse_morph_velocity", "impulse_morph_torque")
_add("R", np.int32, (), "rigid_body_bone")
_add("R", np.uint8, (), "rigid_body_group", "rigid_body_shape", "rigid_body_mode")
_add("R", np.uint16, (), "rigid_body_collide_mask")
_add("R", np.float32, (3,), "rigid_body_size", "rigid_body_position", "rigid_body_rotation")
_add("R", np.float32, (), "rigid_body_mass", "rigid_body_linear_damping", "rigid_body_angular_damping",
     "rigid_body_restitution", "rigid_body_friction")
_add("J", np.uint8, (), "joint_type")
_add("J", np.int32, (), "joint_body_a", "joint_body_b")
_add("J", np.float32, (3,), "joint_position", "joint_rotation", "joint_translation_lower", "joint_translation_upper",
     "joint_rotation_lower", "joint_rotation_upper", "joint_spring_translation", "joint_spring_rotation")

_MINUS_ONE = {"bone_parent", "bone_tail_index", "bone_append_parent", "bone_ik", "material_texture_index",
              "material_sphere_index", "material_toon_index", "rigid_body_bone"}
_NAME_COUNTS = {"material_name": "M", "bone_name": "B", "morph_name": "N", "rigid_body_name": "R",
                "joint_name": "J"}
_NAME_OF = {sym: key for key, sym in _NAME_COUNTS.items()}
_MORPH_TABLES = {"vertex": ("Ev", (1,)), "uv": ("Eu", (3, 4, 5, 6, 7)), "bone": ("Eb", (2,)),
                 "material": ("Em", (8,)), "group": ("Eg", (0, 9)), "impulse": ("Ei", (10,))}
_TABLE_KEY = {"Ev": "vertex_morph_vertex", "Eu": "uv_morph_vertex", "Eb": "bone_morph_bone",
              "Em": "material_morph_material", "Eg": "group_morph_target", "Ei": "impulse_morph_rigid_body"}


def _err(detail, path, section, row=None):
    if row is not None:
        detail = f"row {row}: {detail}"
    return BuildError(detail, path=path, section=section)


def check_index(values, lo: int, hi: int, what: str, *, path: str = "", section: str = "") -> None:
    """Raise ``BuildError`` unless every entry of ``values`` lies in [lo, hi).

    ``values``: (n,) or (n, k) integer array; the message names ``section``, the first bad row
    and its value(s), e.g. "section 'bone_parent': row 1: bone index 7 out of range [-1, 2)".
    """
    a = np.asarray(values)
    if a.size == 0:
        return
    bad = (a < lo) | (a >= hi)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))[0])
        raise _err(f"{what} {a[i].tolist()} out of range [{lo}, {hi})", path, section, i)


def check_starts(starts, n_rows: int, n_table: int, *, path: str = "", section: str = "") -> None:
    """Raise ``BuildError`` unless ``starts`` (n_rows+1,) is a valid row-range table over a table of
    ``n_table`` rows: first entry 0, never decreasing, last entry ``n_table``."""
    s = starts
    if len(s) != n_rows + 1:
        raise _err(f"has {len(s)} entries, expected {n_rows + 1}", path, section)
    if s[0] != 0 or s[-1] != n_table or (len(s) > 1 and (np.diff(s) < 0).any()):
        raise _err(f"ranges must start at 0, not decrease and end at {n_table} (got {s[0]}..{s[-1]})", path, section)


def _check(f, key, lo, hi, path, what):
    check_index(f[key], lo, hi, what, path=path, section=key)


def _counts(f, path) -> dict:
    """Count symbol (see ``_SPEC``) → number of rows, from the fields present in ``f``."""
    counts = {}
    for sym, key in (("V", "vertex_position"), ("F", "face_vertex_index"), ("K", "ik_bone"),
                     ("L", "ik_link_bone"), *((s, k) for s, k in _TABLE_KEY.items())):
        counts[sym] = len(f[key]) if f.get(key) is not None else 0
    for key, sym in _NAME_COUNTS.items():
        f[key] = tuple(f.get(key) or ())
        counts[sym] = len(f[key])
    auv = f.get("vertex_additional_uv")
    counts["A"] = auv.shape[1] if auv is not None and getattr(auv, "ndim", 0) == 3 else 0
    if not 0 <= counts["A"] <= 4:
        raise _err(f"{counts['A']} additional UV sets (at most 4)", path, "vertex_additional_uv")
    return counts


def _default(key, n, shape, dtype):
    """The neutral value of an array field the caller left out."""
    if key in _MINUS_ONE:
        return np.full((n,) + shape, -1, dtype)
    if key == "vertex_bone_weight":
        a = np.zeros((n, 4), dtype)
        a[:, 0] = 1
        return a
    if key == "vertex_edge_scale":
        return np.ones((n,) + shape, dtype)
    return np.zeros((n,) + shape, dtype)


def _conform_arrays(f, counts, path) -> None:
    """Every ``_SPEC`` field in ``f`` converted to its dtype and (count,) + shape, or defaulted."""
    for key, (dtype, shape, sym) in _SPEC.items():
        n = counts[sym.split("+")[0]] + (1 if sym.endswith("+1") else 0)
        shape = tuple(counts["A"] if s == "A" else s for s in shape)
        v = f.get(key)
        if v is None:
            f[key] = _default(key, n, shape, dtype)
            continue
        try:
            a = np.ascontiguousarray(v, dtype=dtype)
        except (ValueError, TypeError) as e:
            raise _err(f"cannot convert to {np.dtype(dtype).name}: {e}", path, key) from None
        if a.shape != (n,) + shape:
            if a.size == n * int(np.prod(shape, dtype=np.int64)) and n > 0 or (n == 0 and a.size == 0):
                a = a.reshape((n,) + shape)
            else:
                raise _err(f"shape {a.shape}, expected {(n,) + shape}", path, key)
        f[key] = a


def _conform_names(f, counts, path) -> None:
    """English names (one per item, '' when absent), material memos and texture paths as tuples."""
    for key in ("material_name_en", "bone_name_en", "morph_name_en", "rigid_body_name_en", "joint_name_en"):
        base = f[key[:-3]]
        v = tuple(f.get(key) or ())
        if len(v) == 0:
            v = ("",) * len(base)
        if len(v) != len(base):
            raise _err(f"{len(v)} names for {len(base)} items", path, key)
        f[key] = v
    memo = tuple(f.get("material_memo") or ())
    f["material_memo"] = (memo + ("",) * (counts["M"] - len(memo)))[:counts["M"]]
    f["texture_path"] = tuple(f.get("texture_path") or ())


def _check_vertices(f, counts, path, extras) -> None:
    """Deform types and bone indices; slots with weight 0 may hold junk such as -1 (patched to 0,
    the original values kept in ``extras['vertex_bone_index_patch']`` for write-back)."""
    bi, bw = f["vertex_bone_index"], f["vertex_bone_weight"]
    B = counts["B"]
    if counts["V"]:
        _check(f, "vertex_deform", 0, 5, path, "deform type")
        bad = (bi < 0) | (bi >= B)
        if bad.any():
            hard = bad & (bw != 0)
            dfm = f["vertex_deform"]
            nslots = np.array([1, 2, 4, 2, 4], np.int8)[dfm]
            used = np.arange(4)[None, :] < nslots[:, None]
            hard |= bad & used & (dfm[:, None] == 0)  # BDEF1's single index is always used
            if hard.any():
                i = int(np.flatnonzero(hard.any(axis=1))[0])
                raise _err(f"bone index {bi[i].tolist()} out of range [0, {B}) with nonzero weight", path,
                           "vertex_bone_index", i)
            pos = np.flatnonzero(bad.ravel())
            extras["vertex_bone_index_patch"] = (pos, bi.ravel()[pos].copy())
            bi = bi.copy()
            bi.ravel()[pos] = 0
            f["vertex_bone_index"] = bi
    _check(f, "face_vertex_index", 0, counts["V"], path, "vertex index")


def _check_materials(f, counts, path) -> None:
    """Triangle ranges and texture/sphere/toon indices."""
    M, F, T = counts["M"], counts["F"], len(f["texture_path"])
    fs = f["material_face_start"]
    if M == 0 and len(fs) == 1:
        fs = np.zeros(1, np.int32)
        f["material_face_start"] = fs
    if fs[0] != 0 or (np.diff(fs) < 0).any():
        raise _err("triangle ranges must start at 0 and not decrease", path, "material_face_start")
    if fs[-1] > F:
        raise _err(f"materials use {int(fs[-1])} triangles but there are {F}", path, "material_face_start")
    _check(f, "material_texture_index", -1, T, path, "texture index")
    _check(f, "material_sphere_index", -1, T, path, "texture index")
    shared = f["material_toon_shared"]
    toon = f["material_toon_index"]
    if M:
        bad = np.where(shared, (toon < -1) | (toon > 9), (toon < -1) | (toon >= T))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _err(f"toon index {int(toon[i])} out of range", path, "material_toon_index", i)


def _check_bones(f, counts, path) -> None:
    """Bone links, no parent cycles, IK solvers and their link ranges."""
    B, K = counts["B"], counts["K"]
    for key in ("bone_parent", "bone_tail_index", "bone_append_parent"):
        _check(f, key, -1, B, path, "bone index")
    _check(f, "bone_ik", -1, K, path, "IK index")
    if B:
        par = f["bone_parent"]
        cur = par.copy()
        for _ in range(B):
            live = cur >= 0
            if not live.any():
                break
            cur[live] = par[cur[live]]
        else:
            if (cur >= 0).any():
                i = int(np.flatnonzero(cur >= 0)[0])
                raise _err(f"bone {f['bone_name'][i]!r} is in a parent cycle", path, "bone_parent", i)
    for key in ("ik_bone", "ik_target", "ik_link_bone"):
        _check(f, key, 0, B, path, "bone index")
    check_starts(f["ik_link_start"], K, counts["L"], path=path, section="ik_link_start")


def _check_morphs(f, counts, path) -> None:
    """Morph kinds, per-kind row ranges (only morphs of that kind own rows) and element indices."""
    V, M, B, N, R = (counts[s] for s in "VMBNR")
    kind = f["morph_kind"]
    _check(f, "morph_kind", 0, 11, path, "morph type")
    for t, (sym, kinds) in _MORPH_TABLES.items():
        key = f"{t}_morph_start"
        check_starts(f[key], N, counts[sym], path=path, section=key)
        if N and counts[sym]:
            sizes = np.diff(f[key])
            wrong = (sizes > 0) & ~np.isin(kind, kinds)
            if wrong.any():
                i = int(np.flatnonzero(wrong)[0])
                raise _err(f"morph {f['morph_name'][i]!r} of type {int(kind[i])} has {t} rows", path, key, i)
    _check(f, "vertex_morph_vertex", 0, V, path, "vertex index")
    _check(f, "uv_morph_vertex", 0, V, path, "vertex index")
    _check(f, "bone_morph_bone", 0, B, path, "bone index")
    _check(f, "material_morph_material", -1, M, path, "material index")
    _check(f, "group_morph_target", 0, N, path, "morph index")
    _check(f, "impulse_morph_rigid_body", 0, R, path, "rigid body index")


#: Largest magnitude of a position, translation, offset or size, in MMD units (~80 km): bigger
#: finite values (3.4e38 from a corrupt file) overflow float32 once squared and pose as NaN/inf.
MAX_COORDINATE = 1e6
#: Largest magnitude of every other float a model or motion holds (masses, springs, angles,
#: weights, colours, UVs); real springs reach 1e5.
MAX_NUMBER = 1e9
COORDINATE_FIELDS = frozenset({
    "vertex_position", "vertex_sdef_c", "vertex_sdef_r0", "vertex_sdef_r1", "vertex_morph_offset",
    "bone_position", "bone_tail_offset", "bone_morph_translation", "rigid_body_size", "rigid_body_position",
    "joint_position", "joint_translation_lower", "joint_translation_upper"})


def first_out_of_bounds(a: np.ndarray, bound: float) -> int | None:
    """Row index of ``a`` (n, ...) holding the first NaN, infinity or value beyond ±``bound``; None if none."""
    ok = np.abs(a) <= bound  # False for NaN
    if ok.all():
        return None
    return int(np.flatnonzero(~ok.reshape(len(a), -1).all(axis=1))[0])


def bound_detail(value, bound: float, unit: str = "") -> str:
    """'value [..] is not finite' or 'value [..] is beyond ±1e+06 MMD units' for a refused row."""
    v = np.asarray(value, np.float64)
    if not np.isfinite(v).all():
        return f"value {np.asarray(value).tolist()} is not finite"
    return f"value {np.asarray(value).tolist()} is beyond ±{bound:g}{unit}"


def _check_finite(f, path) -> None:
    """``BuildError`` naming the field, row and item of the first NaN, infinity or value out of
    bounds (±MAX_COORDINATE MMD units for positions and sizes, ±MAX_NUMBER otherwise)."""
    for key, (dtype, _, sym) in _SPEC.items():
        if dtype != np.float32:
            continue
        coordinate = key in COORDINATE_FIELDS
        bound = MAX_COORDINATE if coordinate else MAX_NUMBER
        a = f[key]
        i = first_out_of_bounds(a, bound)
        if i is None:
            continue
        names = _NAME_OF.get(sym)
        item = f" ({names.split('_name')[0].replace('_', ' ')} {f[names][i]!r})" if names else ""
        raise _err(bound_detail(a[i], bound, " MMD units" if coordinate else "") + item, path, key, i)


def _check_display_frames(f, counts, path) -> None:
    frames = tuple(f.get("display_frames") or ())
    for fi, fr in enumerate(frames):
        for is_morph, idx in fr[3]:
            if not 0 <= idx < (counts["N"] if is_morph else counts["B"]):
                raise _err(f"frame {fr[0]!r}: {'morph' if is_morph else 'bone'} index {idx} out of range",
                           path, "display_frames", fi)
    f["display_frames"] = frames


def _check_physics(f, counts, path) -> None:
    """Rigid body bones/shapes/groups, joint bodies, soft body materials, anchors and pins."""
    V, M, B, R = (counts[s] for s in "VMBR")
    _check(f, "rigid_body_bone", -1, B, path, "bone index")
    _check(f, "rigid_body_shape", 0, 3, path, "shape")
    _check(f, "rigid_body_group", 0, 16, path, "collision group")
    _check(f, "joint_body_a", -1, R, path, "rigid body index")
    _check(f, "joint_body_b", -1, R, path, "rigid body index")
    soft = tuple(f.get("soft_bodies") or ())
    for si, sb in enumerate(soft):
        if not -1 <= sb.material < M:
            raise _err(f"material index {sb.material} out of range", path, "soft_bodies", si)
        for rb, vx, _ in sb.anchors:
            if not (0 <= rb < R and 0 <= vx < V):
                raise _err(f"anchor ({rb}, {vx}) out of range", path, "soft_bodies", si)
        for vx in sb.pins:
            if not 0 <= vx < V:
                raise _err(f"pin vertex {vx} out of range", path, "soft_bodies", si)
    f["soft_bodies"] = soft


def build_model(fields: dict) -> Model:
    """Validate ``fields`` (Model field name → value) and return a frozen ``Model``."""
    f = dict(fields)
    path = str(f.get("source_path", ""))
    extras = dict(f.get("source_extras") or {})
    counts = _counts(f, path)
    _conform_arrays(f, counts, path)
    _conform_names(f, counts, path)
    _check_finite(f, path)
    _check_vertices(f, counts, path, extras)
    _check_materials(f, counts, path)
    _check_bones(f, counts, path)
    _check_morphs(f, counts, path)
    _check_display_frames(f, counts, path)
    _check_physics(f, counts, path)
    f["source_extras"] = extras
    f["warnings"] = tuple(f.get("warnings") or ())
    known = {fl.name for fl in Model.__dataclass_fields__.values()}
    unknown = set(f) - known
    if unknown:
        raise _err(f"unknown Model fields {sorted(unknown)}", path, "fields")
    for k in ("name", "name_en", "comment", "comment_en", "source_format", "source_path"):
        f[k] = str(f.get(k) or "")
    return freeze(Model(**f))
