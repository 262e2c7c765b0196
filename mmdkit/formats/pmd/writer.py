"""Model → PMD file bytes, section by section.

In: a ``Model`` from any source. Out: PMD bytes; raw PMD details of a PMD source
(``source_extras``) are reused where they still match the model, so an unmodified model
gives its file's bytes back. PMX-only data — non-vertex morphs, soft bodies, SDEF, more than
2 weights — is reduced to what PMD can hold.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.binary import BinaryWriter
from mmdkit.formats.pmd import records as P
from mmdkit.formats.pmd.convert import single_bone
from mmdkit.model import model as M
from mmdkit.text import decode_field, encode_field


def _field(name: str, raws, i: int, size: int) -> bytes:
    """The raw fixed field when it still decodes to ``name``, else ``name`` encoded."""
    if raws is not None and i < len(raws) and len(raws[i]) == size and decode_field(raws[i])[0] == name:
        return raws[i]
    return encode_field(name, size)


def _name_fields(names, raws, size: int) -> np.ndarray:
    """(n, size) uint8 name fields for writing."""
    out = np.zeros((len(names), size), np.uint8)
    for i, s in enumerate(names):
        out[i] = np.frombuffer(_field(s, raws, i, size), np.uint8)
    return out


def _same(a, b) -> bool:
    return a is not None and b is not None and np.shape(a) == np.shape(b) and np.array_equal(a, b)


def _keep_raw(raw, new, same_meaning):
    """The raw stored values where ``same_meaning(raw, new)``, else the new ones."""
    if raw is None or len(raw) != len(new):
        return new
    return np.where(same_meaning(raw, new), raw, new)


def write_pmd(model) -> bytes:
    """Serialise a ``Model`` as PMD (see the module docstring)."""
    ex = model.source_extras if model.source_format == "pmd" else {}
    V, B = model.num_vertices, model.num_bones
    if V > 65535 + 1 or B > 65535 or model.num_morphs > 65534:
        raise FormatError(f"too large for PMD ({V} vertices, {B} bones, {model.num_morphs} morphs; PMD indices are "
                          f"16-bit)", section="pmd")
    w = BinaryWriter()
    w.raw(b"Pmd")
    w.f32(ex.get("version", 1.0))
    w.raw(_field(model.name, [ex.get("name_field", b"")], 0, P.NAME_SIZE))
    w.raw(_field(model.comment, [ex.get("comment_field", b"")], 0, P.COMMENT_SIZE))
    _write_vertices(w, model, ex)
    toon_names = _write_materials(w, model, ex)
    _write_bones(w, model, ex)
    _write_iks(w, model, ex)
    vm, has_base, base_at = _write_morphs(w, model, ex)
    groups = _write_display(w, model, ex, vm, has_base, base_at)
    is_pmd = model.source_format == "pmd"
    if not is_pmd or ex.get("has_english"):
        _write_english(w, model, ex, vm, groups)
    if not is_pmd or ex.get("has_toon"):
        tf = ex.get("toon_field") or ()
        for k in range(10):
            w.raw(_field(toon_names[k], tf, k, P.TOON_NAME_SIZE))
    if not is_pmd or ex.get("has_physics"):
        _write_physics(w, model, ex)
    if ex.get("trailing"):
        w.raw(ex["trailing"])
    return w.getvalue()


def _write_vertices(w: BinaryWriter, model, ex: dict) -> None:
    """Vertices (BDEF2 with an integer percentage: the two heaviest bones) and face indices."""
    V = model.num_vertices
    v = np.zeros(V, P.VERTEX)
    v["p"], v["n"], v["uv"] = model.vertex_position, model.vertex_normal, model.vertex_uv
    bi, bw = model.vertex_bone_index, model.vertex_bone_weight
    if V:
        order = np.argsort(-bw, axis=1, kind="stable")[:, :2]
        two = np.take_along_axis(bi, order, 1)
        wt = np.take_along_axis(bw, order, 1)
        simple = np.isin(model.vertex_deform, (M.DEFORM_BDEF2, M.DEFORM_SDEF))
        two[simple] = bi[simple, :2]
        wt[simple] = bw[simple, :2]
        b1 = model.vertex_deform == M.DEFORM_BDEF1
        two[b1, 1] = two[b1, 0]
        tot = wt.sum(axis=1)
        w0 = np.where(tot > 0, wt[:, 0] / np.where(tot > 0, tot, 1), 1.0)
        pct = np.clip(np.rint(w0 * 100), 0, 100).astype(np.uint8)
        v["b"], v["w"] = _keep_raw_weights(ex, two, pct)
        edge = np.where(model.vertex_edge_scale == 0, 1, 0).astype(np.uint8)
        v["edge"] = _keep_raw(ex.get("vertex_edge_raw"), edge, lambda raw, new: (raw != 0) == (new != 0))
    w.u32(V)
    w.array(v)
    w.u32(model.face_vertex_index.size)
    w.array(model.face_vertex_index.astype("<u2"))


def _keep_raw_weights(ex: dict, bones: np.ndarray, pct: np.ndarray):
    """(V, 2) bone pairs and (V,) percentages to write: the stored ones where they mean the
    same weighting (same pair and percentage, or the same single bone however it was spelled)."""
    raw_b, raw_w = ex.get("vertex_bone_raw"), ex.get("vertex_weight_raw")
    if raw_b is None or raw_w is None or len(raw_b) != len(bones) or len(raw_w) != len(bones):
        return bones, pct
    one = single_bone(raw_b, raw_w)
    keep = ((raw_b == bones).all(axis=1) & (np.clip(raw_w, 0, 100) == pct)) | \
        ((one >= 0) & (one == single_bone(bones, pct)))
    return np.where(keep[:, None], raw_b, bones), np.where(keep, raw_w, pct)


def _toon_code(model, m: int, toon_names: list, toon_raw) -> int:
    """A material's toon number (0-9 a slot of the toon list, 255 none); a texture toon takes
    a matching slot, else the last slot still holding its default name."""
    ti = int(model.material_toon_index[m])
    if model.material_toon_shared[m]:
        code = ti if 0 <= ti <= 9 else 255
    elif ti >= 0:
        p = model.texture_path[ti]
        code = next((k for k in range(10) if toon_names[k] == p), None)
        if code is None:
            code = next((k for k in range(9, -1, -1) if toon_names[k] == P.DEFAULT_TOONS[k]), 9)
            toon_names[code] = p
    else:
        code = 255
    if toon_raw is not None and m < len(toon_raw) and toon_raw[m] >= 10 and code == 255:
        code = int(toon_raw[m])
    return code


def _write_materials(w: BinaryWriter, model, ex: dict) -> list:
    """Materials; returns the 10 toon texture names to write (texture toons fill slots)."""
    Mn = model.num_materials
    mt = np.zeros(Mn, P.MATERIAL)
    mt["diffuse"], mt["alpha"] = model.material_diffuse[:, :3], model.material_diffuse[:, 3]
    mt["power"], mt["specular"], mt["ambient"] = (model.material_specular_power, model.material_specular,
                                                  model.material_ambient)
    edge = ((model.material_flags & M.MATERIAL_EDGE) != 0).astype(np.uint8)
    mt["edge"] = _keep_raw(ex.get("material_edge_raw"), edge, lambda raw, new: (raw != 0) == (new != 0))
    mt["count"] = np.diff(model.material_face_start) * 3
    tf = ex.get("toon_field")
    toon_names = [decode_field(t)[0] for t in tf] if tf else list(P.DEFAULT_TOONS)
    tex_fields = ex.get("material_texture_field") or ()
    for m in range(Mn):
        t, s = int(model.material_texture_index[m]), int(model.material_sphere_index[m])
        name = "*".join([model.texture_path[i] for i in (t, s) if i >= 0])
        mt["tex"][m] = np.frombuffer(_field(name, tex_fields, m, 20), np.uint8)
        mt["toon"][m] = _toon_code(model, m, toon_names, ex.get("material_toon_raw"))
    w.u32(Mn)
    w.array(mt)
    return toon_names


def _derive_bone_type(model, b: int, fl: int, ik_link_of: dict, targets: set) -> tuple[int, int, int]:
    """(type, child field, IK field) of bone ``b`` from the PMX-style flags (a non-PMD model)."""
    tail = int(model.bone_tail_index[b]) if fl & M.BONE_TAIL_IS_BONE else -1
    if fl & M.BONE_IK:
        return P.BONE_IK, tail, 0
    if fl & M.BONE_APPEND_ROTATION and model.bone_append_parent[b] >= 0:
        r = float(model.bone_append_ratio[b])
        if r == 1.0:
            return P.BONE_ROTATION_AFFECTED, tail, int(model.bone_append_parent[b])
        return P.BONE_ROTATION_LINKED, int(model.bone_append_parent[b]), int(round(r * 100)) & 0xFFFF
    if fl & M.BONE_FIXED_AXIS:
        return P.BONE_TWIST, tail, 0
    if b in ik_link_of and not fl & M.BONE_TRANSLATABLE:  # type 4 would drop "translatable"
        return P.BONE_IK_LINK, tail, ik_link_of[b]
    if not fl & M.BONE_VISIBLE:
        return (P.BONE_IK_TARGET if b in targets else P.BONE_INVISIBLE), tail, 0
    if fl & M.BONE_TRANSLATABLE:
        return P.BONE_MOVE, tail, 0
    return P.BONE_ROTATE, tail, 0


def _write_bones(w: BinaryWriter, model, ex: dict) -> None:
    """Bones: the stored type/child/IK fields of a PMD source, else derived from the flags."""
    B = model.num_bones
    bo = np.zeros(B, P.BONE)
    bo["name"] = _name_fields(model.bone_name, ex.get("bone_name_field"), P.NAME_SIZE)
    bo["parent"] = np.where(model.bone_parent < 0, P.NO_BONE, model.bone_parent)
    bo["p"] = model.bone_position
    keep = _bones_as_read(model, ex)
    if keep.any():
        bo["type"][keep], bo["tail"][keep], bo["ik"][keep] = (ex["bone_type"][keep], ex["bone_tail_raw"][keep],
                                                             ex["bone_ik_raw"][keep])
        bo["parent"] = _keep_raw(ex.get("bone_parent_raw"), bo["parent"],
                                 lambda raw, new: P.to_index(raw, P.NO_BONE) == model.bone_parent)
    if not keep.all():
        ik_link_of = {}
        for k in range(len(model.ik_bone)):
            for i in range(model.ik_link_start[k], model.ik_link_start[k + 1]):
                ik_link_of.setdefault(int(model.ik_link_bone[i]), int(model.ik_bone[k]))
        targets = set(int(t) for t in model.ik_target)
        for b in np.flatnonzero(~keep):
            typ, tail, ikv = _derive_bone_type(model, b, int(model.bone_flags[b]), ik_link_of, targets)
            bo["type"][b], bo["tail"][b], bo["ik"][b] = typ, max(tail, 0), ikv
    w.u16(B)
    w.array(bo)


def _bones_as_read(model, ex: dict) -> np.ndarray:
    """(B,) bool: bones whose stored type/child/IK fields still describe them (a PMD source
    with the same bones, and the flags, append parent and ratio each bone had when read)."""
    B = model.num_bones
    if ex.get("bone_type") is None or len(ex["bone_type"]) != B:
        return np.zeros(B, bool)
    parent, ratio = ex["bone_append_read"]
    return (model.bone_flags == ex["bone_flags_read"]) & (model.bone_append_parent == parent) & \
        (model.bone_append_ratio == ratio)


def _write_iks(w: BinaryWriter, model, ex: dict) -> None:
    """IK solvers in the source file's order (bone order for other models)."""
    w.u16(len(model.ik_bone))
    head = np.zeros(1, P.IK_HEAD)
    for k in _ik_write_order(model, ex):
        s0, s1 = int(model.ik_link_start[k]), int(model.ik_link_start[k + 1])
        head[0] = (model.ik_bone[k], model.ik_target[k], s1 - s0, model.ik_loop_count[k],
                   np.float32(model.ik_limit_angle[k]) / np.float32(4))
        w.array(head)
        w.array(model.ik_link_bone[s0:s1].astype("<u2"))


def _ik_write_order(model, ex: dict) -> list:
    """Model solver indices in the order to write: the source file's order — exactly while the
    solvers are those read, else by their IK bones' names in the file's order (solvers the file
    did not have last, in bone order)."""
    K = len(model.ik_bone)
    order, read = ex.get("ik_file_order"), ex.get("ik_bone_read")
    if order is not None and read is not None and np.array_equal(read, model.ik_bone):
        inv = np.empty(K, np.int64)
        inv[order] = np.arange(K)
        return inv.tolist()
    free: dict[str, list] = {}
    for k in range(K):
        free.setdefault(model.bone_name[int(model.ik_bone[k])], []).append(k)
    out = [free[n].pop(0) for n in ex.get("ik_file_names", ()) if free.get(n)]
    return out + sorted(set(range(K)) - set(out))


def _base_morph(model, ex: dict, vm: list):
    """(name field, base vertices, base positions, per-row base index) of the base morph: the
    source's when the vertex morphs still use the same vertices, else built from them."""
    base = ex.get("base_morph")
    raw_idx = ex.get("morph_base_index")
    used = model.vertex_morph_vertex
    if base is not None and raw_idx is not None and len(raw_idx) == len(used) and len(vm) == model.num_morphs \
            and (len(raw_idx) == 0 or (raw_idx.max() < len(base[1]) and np.array_equal(base[1][raw_idx], used))):
        base_f, base_v, base_o = base
        base_o = model.vertex_position[base_v] if np.array_equal(base_o, model.vertex_position[base_v]) else base_o
        return base_f, base_v, base_o, raw_idx
    base_v = np.unique(used).astype(np.uint32)
    base_o = model.vertex_position[base_v] if len(base_v) else np.zeros((0, 3), np.float32)
    lookup = np.zeros(max(model.num_vertices, 1), np.int64)
    lookup[base_v] = np.arange(len(base_v))
    return encode_field("base", P.NAME_SIZE), base_v, base_o, lookup[used]


def _write_morphs(w: BinaryWriter, model, ex: dict):
    """The base morph and the vertex morphs (other kinds cannot be stored in PMD).
    Returns (model indices of the vertex morphs, whether a base morph is written, its position)."""
    vm = [i for i in range(model.num_morphs) if model.morph_kind[i] == M.MORPH_VERTEX]
    vs = model.vertex_morph_start
    base_f, base_v, base_o, row_idx = _base_morph(model, ex, vm)
    has_base = ex.get("base_morph") is not None or len(vm) > 0
    base_at = ex.get("morph_base_position", 0) if ex.get("base_morph") is not None else 0
    w.u16(len(vm) + (1 if has_base else 0))
    mf = ex.get("morph_name_field")
    items = []
    for i in vm:
        s0, s1 = int(vs[i]), int(vs[i + 1])
        rows = np.zeros(s1 - s0, P.MORPH_ROW)
        rows["i"], rows["o"] = row_idx[s0:s1], model.vertex_morph_offset[s0:s1]
        items.append((_field(model.morph_name[i], mf, i, P.NAME_SIZE), int(model.morph_panel[i]), rows))
    if has_base:
        rows = np.zeros(len(base_v), P.MORPH_ROW)
        rows["i"], rows["o"] = base_v, base_o
        items.insert(min(base_at or 0, len(items)), (base_f, 0, rows))
    head = np.zeros(1, P.MORPH_HEAD)
    for nf, kind, rows in items:
        head[0] = (np.frombuffer(nf, np.uint8), len(rows), kind)
        w.array(head)
        w.array(rows)
    return vm, has_base, base_at


def _group_field(raws, g: int, name: str, size: int, suffix: str) -> bytes:
    """A bone group name field: the stored one when it still reads as ``name``."""
    if g < len(raws) and decode_field(raws[g])[0].rstrip("\r\n") == name:
        return raws[g]
    return encode_field(name + suffix, size)


def _write_display(w: BinaryWriter, model, ex: dict, vm: list, has_base: bool, base_at) -> list:
    """Morph display list (from the 表情 frame), bone group names and bone display list.
    Returns the bone groups (the display frames that are not special)."""
    frames = model.display_frames
    exp = next((fr for fr in frames if fr[2] == 1 and fr[0] == "表情"), None)
    disp = [morph for is_m, morph in (exp[3] if exp else ()) if is_m]
    pmd_index = {i: j + (1 if has_base and j >= (base_at or 0) else 0) for j, i in enumerate(vm)}
    md = np.array([pmd_index[i] for i in disp if i in pmd_index], "<u2")
    raw = ex.get("morph_display_raw")
    if raw is not None and len(raw) == len(md) and np.array_equal(
            np.array([j - 1 if has_base and j > (base_at or 0) else j for j in raw]), np.array(disp[:len(raw)])):
        md = raw.astype("<u2")
    w.u8(len(md))
    w.array(md)
    groups = [fr for fr in frames if fr[2] == 0]
    gf = ex.get("group_field") or ()
    w.u8(len(groups))
    for g, fr in enumerate(groups):
        w.raw(_group_field(gf, g, fr[0], P.GROUP_NAME_SIZE, "\n"))
    bd = [(b, g + 1) for g, fr in enumerate(groups) for is_m, b in fr[3] if not is_m]
    raw = ex.get("bone_display_raw")
    arr = np.zeros(len(bd), P.BONE_DISPLAY)
    if bd:
        arr["b"], arr["g"] = zip(*bd)
    if raw is not None and len(raw) >= len(arr):
        valid = raw[(raw["g"] >= 1) & (raw["g"] <= len(groups))]
        if sorted(map(tuple, valid.tolist())) == sorted(map(tuple, arr.tolist())):
            arr = raw
    w.u32(len(arr))
    w.array(arr)
    return groups


def _write_english(w: BinaryWriter, model, ex: dict, vm: list, groups: list) -> None:
    flag = ex.get("english_flag", 1)
    w.u8(flag)
    if not flag:
        return
    w.raw(_field(model.name_en, [ex.get("name_en_field", b"")], 0, P.NAME_SIZE))
    w.raw(_field(model.comment_en, [ex.get("comment_en_field", b"")], 0, P.COMMENT_SIZE))
    w.array(_name_fields(model.bone_name_en, ex.get("bone_name_en_field"), P.NAME_SIZE))
    mfe = ex.get("morph_name_en_field")
    for i in vm:
        w.raw(_field(model.morph_name_en[i], mfe, i, P.NAME_SIZE))
    gfe = ex.get("group_en_field") or ()
    for g, fr in enumerate(groups):
        w.raw(_group_field(gfe, g, fr[1], P.GROUP_NAME_SIZE, ""))


def _write_physics(w: BinaryWriter, model, ex: dict) -> None:
    """Rigid bodies (positions back relative to their bone) and joints."""
    R, B = model.num_rigid_bodies, model.num_bones
    rg = np.zeros(R, P.RIGID)
    rg["name"] = _name_fields(model.rigid_body_name, ex.get("rigid_body_name_field"), P.NAME_SIZE)
    rg["bone"] = np.where(model.rigid_body_bone < 0, P.NO_BONE, model.rigid_body_bone)
    rg["group"], rg["mask"], rg["shape"] = model.rigid_body_group, model.rigid_body_collide_mask, \
        model.rigid_body_shape
    rg["size"], rg["r"] = model.rigid_body_size, model.rigid_body_rotation
    if _same(ex.get("rigid_body_position_built"), model.rigid_body_position) and \
            len(ex.get("rigid_body_offset_raw", ())) == R:
        rg["p"] = ex["rigid_body_offset_raw"]
    elif R:
        ref = np.where(model.rigid_body_bone >= 0, model.rigid_body_bone, 0)
        rg["p"] = model.rigid_body_position - (model.bone_position[ref] if B else 0)
    rg["mass"], rg["lin"], rg["ang"] = (model.rigid_body_mass, model.rigid_body_linear_damping,
                                        model.rigid_body_angular_damping)
    rg["rest"], rg["fric"], rg["mode"] = (model.rigid_body_restitution, model.rigid_body_friction,
                                          model.rigid_body_mode)
    w.u32(R)
    w.array(rg)
    if ex.get("physics_without_joints") and not model.num_joints:
        return
    J = model.num_joints
    jo = np.zeros(J, P.JOINT)
    jo["name"] = _name_fields(model.joint_name, ex.get("joint_name_field"), P.NAME_SIZE)
    jraw = ex.get("joint_raw")
    for k in ("a", "b"):
        new = getattr(model, f"joint_body_{k}").astype(np.int64) & 0xFFFFFFFF
        jo[k] = _keep_raw(None if jraw is None else jraw[k], new,
                          lambda raw, _: P.to_index(raw, P.NO_BODY) == getattr(model, f"joint_body_{k}"))
    for c, a in enumerate((model.joint_position, model.joint_rotation, model.joint_translation_lower,
                           model.joint_translation_upper, model.joint_rotation_lower, model.joint_rotation_upper,
                           model.joint_spring_translation, model.joint_spring_rotation)):
        jo["v"][:, c] = a
    w.u32(J)
    w.array(jo)
