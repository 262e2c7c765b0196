"""PMD sections (``PmdRaw``) → a dict of Model fields, PMD concepts converted to PMX ones.

In: ``PmdRaw`` from ``reader.read_raw``. Out: ``dict`` of Model fields for ``build_model``
plus ``source_extras`` (raw PMD-only details so ``write_pmd`` gives the same bytes back) and
``warnings``. Conversions: bone types → BONE_* flags (see ``bones_to_model``), child index 0
→ -1, IK unit angle × 4, knee links (name contains ひざ) limited to X in [-180°, -0.5°], the
"base" morph folded into absolute vertex indices (and left out of the morph list), rigid body
positions made model-space (PMD stores them relative to their bone; bodies without a bone
relative to bone 0), toon numbers → shared toon / texture.
"""

from __future__ import annotations

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.pmd import records as P
from mmdkit.formats.pmd.reader import PmdRaw
from mmdkit.model import model as M
from mmdkit.text import decode_field


def names(raw: np.ndarray, warnings: list, what: str) -> tuple[list, tuple]:
    """(n, size) uint8 fixed fields → (decoded names, raw field bytes)."""
    out, fields = [], []
    for row in raw:
        b = row.tobytes()
        s, _, w = decode_field(b)
        if w:
            warnings.append(f"{what}: {w}")
        out.append(s)
        fields.append(b)
    return out, tuple(fields)


def split_texture(s: str) -> tuple[str | None, str | None, int]:
    """'a.bmp*b.sph' → (texture, sphere, sphere mode)."""
    if not s:
        return None, None, 0
    tex = sph = None
    for p in s.split("*"):
        low = p.lower()
        if low.endswith(".sph") or low.endswith(".spa"):
            sph = p
        elif p:
            tex = p if tex is None else tex
    mode = 0 if sph is None else (M.SPHERE_ADD if sph.lower().endswith(".spa") else M.SPHERE_MULTIPLY)
    return tex, sph, mode


def to_model(raw: PmdRaw, path: str) -> dict:
    """All sections → Model fields (see the module docstring)."""
    warn = raw.warnings
    ex: dict = {"format": "pmd", "version": raw.version, "name_field": raw.name_field,
                "comment_field": raw.comment_field}
    f: dict = {"name": decode_field(raw.name_field)[0], "comment": decode_field(raw.comment_field)[0]}
    vertices_to_model(raw, f, ex)
    bone_names, ex["bone_name_field"] = names(raw.bones["name"], warn, "bone names")
    extensions_to_model(raw, f, ex)
    if raw.trailing:
        ex["trailing"] = raw.trailing
        warn.append(f"{len(raw.trailing)} bytes after the last section (byte {raw.trailing_offset}) kept but ignored")
    materials_to_model(raw, f, ex, path)
    bones_to_model(raw, f, ex, bone_names)
    iks_to_model(raw, f, ex, bone_names)
    base_i = morphs_to_model(raw, f, ex, path)
    display_to_model(raw, f, ex, base_i)
    physics_to_model(raw, f, ex)
    f.update(source_format="pmd", source_path=str(path), source_extras=ex, warnings=tuple(warn))
    return f


def single_bone(bones: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(V, 2) PMD bone pairs and (V,) weight bytes (percent of the first) → (V,) int32: the one
    bone that carries the whole vertex, or -1 where both share it."""
    b0, b1 = bones[:, 0].astype(np.int32), bones[:, 1].astype(np.int32)
    return np.where((b0 == b1) | (weight >= 100), b0, np.where(weight == 0, b1, np.int32(-1)))


def vertices_to_model(raw: PmdRaw, f: dict, ex: dict) -> None:
    """BDEF2 with an integer percentage → (V, 4) indices/weights (BDEF1 where one bone carries
    the vertex, as PMX Editor converts it); edge flag → edge scale."""
    v = raw.vertices
    nv = len(v)
    if (v["w"] > 100).any():
        i = int(np.flatnonzero(v["w"] > 100)[0])
        raw.warnings.append(f"vertex {i}: weight {int(v['w'][i])} > 100 clamped to 100 (raw byte kept)")
    w = np.minimum(v["w"], 100).astype(np.float32) / np.float32(100)
    one = single_bone(v["b"], v["w"])
    single = one >= 0
    bi = np.zeros((nv, 4), np.int32)
    bi[:, 0] = np.where(single, one, v["b"][:, 0])
    bi[:, 1] = np.where(single, 0, v["b"][:, 1])
    bw = np.zeros((nv, 4), np.float32)
    bw[:, 0] = np.where(single, np.float32(1), w)
    bw[:, 1] = np.where(single, np.float32(0), np.float32(1) - w)
    f.update(vertex_position=v["p"], vertex_normal=v["n"], vertex_uv=v["uv"],
             vertex_additional_uv=np.zeros((nv, 0, 4), np.float32),
             vertex_deform=np.where(single, M.DEFORM_BDEF1, M.DEFORM_BDEF2).astype(np.uint8),
             vertex_bone_index=bi, vertex_bone_weight=bw,
             vertex_edge_scale=np.where(v["edge"] == 0, np.float32(1), np.float32(0)),
             face_vertex_index=raw.face_index.astype(np.int32).reshape(-1, 3))
    ex["vertex_bone_raw"] = v["b"]
    ex["vertex_weight_raw"] = v["w"]
    ex["vertex_edge_raw"] = v["edge"]


def extensions_to_model(raw: PmdRaw, f: dict, ex: dict) -> None:
    """English names and toon texture names (physics: ``physics_to_model``)."""
    ex["has_english"] = raw.english is not None
    ex["has_toon"] = raw.toon_fields is not None
    ex["has_physics"] = raw.rigid_bodies is not None
    f["name_en"] = f["comment_en"] = ""
    f["bone_name_en"] = ("",) * len(raw.bones)
    en = raw.english or {}
    if raw.english is not None:
        ex["english_flag"] = en["flag"]
    if en.get("flag"):
        ex["name_en_field"], ex["comment_en_field"] = en["name"], en["comment"]
        f["name_en"], f["comment_en"] = decode_field(en["name"])[0], decode_field(en["comment"])[0]
        bone_en, ex["bone_name_en_field"] = names(en["bones"], raw.warnings, "English bone names")
        f["bone_name_en"] = tuple(bone_en)
    if raw.toon_fields is not None:
        ex["toon_field"] = raw.toon_fields
    if raw.rigid_bodies is not None and raw.joints is None:
        ex["physics_without_joints"] = True


def _toon_names(raw: PmdRaw) -> list:
    return [decode_field(t)[0] for t in raw.toon_fields] if raw.toon_fields else list(P.DEFAULT_TOONS)


def materials_to_model(raw: PmdRaw, f: dict, ex: dict, path: str) -> None:
    """Texture field 'tex*sphere' → texture list and indices; toon number → shared/texture toon."""
    mt = raw.materials
    nm = len(mt)
    tex_fields = tuple(row.tobytes() for row in mt["tex"])
    ex["material_texture_field"] = tex_fields
    textures: list[str] = []

    def tex_index(p):
        if p is None:
            return -1
        if p not in textures:
            textures.append(p)
        return textures.index(p)

    toon_names = _toon_names(raw)
    mti, msi, mtoon = (np.full(nm, -1, np.int32) for _ in range(3))
    msm = np.zeros(nm, np.uint8)
    mts = np.zeros(nm, bool)
    for m in range(nm):
        t, sp, mode = split_texture(decode_field(tex_fields[m])[0])
        mti[m], msi[m], msm[m] = tex_index(t), tex_index(sp), mode
        tn = int(mt["toon"][m])
        if tn < 10:
            if toon_names[tn].lower() == P.DEFAULT_TOONS[tn] or not toon_names[tn]:
                mts[m], mtoon[m] = True, tn
            else:
                mtoon[m] = tex_index(toon_names[tn])
    ex["material_toon_raw"] = mt["toon"]
    ex["material_edge_raw"] = mt["edge"]
    diffuse = np.empty((nm, 4), np.float32)
    diffuse[:, :3] = mt["diffuse"]
    diffuse[:, 3] = mt["alpha"]
    # as PMX Editor, mmd_tools and babylon-mmd: the edge flag also casts the ground shadow,
    # a translucent material (alpha < 1) draws both sides
    flags = np.where(mt["edge"] != 0, M.MATERIAL_EDGE | M.MATERIAL_GROUND_SHADOW, 0) \
        | np.where(mt["alpha"] < 1, M.MATERIAL_DOUBLE_SIDED, 0) | M.MATERIAL_SELF_SHADOW_MAP | M.MATERIAL_SELF_SHADOW
    fs = np.zeros(nm + 1, np.int64)
    np.cumsum(mt["count"] // 3, out=fs[1:])
    if fs[-1] > len(f["face_vertex_index"]):
        raise FormatError(f"materials use {int(fs[-1])} triangles but the file has {len(f['face_vertex_index'])}",
                          path=path, section="materials")
    f.update(texture_path=tuple(textures), material_name=tuple(f"材質{m + 1}" for m in range(nm)),
             material_name_en=tuple(f"Material{m + 1}" for m in range(nm)), material_diffuse=diffuse,
             material_specular=mt["specular"], material_specular_power=mt["power"], material_ambient=mt["ambient"],
             material_flags=flags.astype(np.uint8), material_edge_color=np.tile(np.float32([0, 0, 0, 1]), (nm, 1)),
             material_edge_size=np.ones(nm, np.float32), material_texture_index=mti, material_sphere_index=msi,
             material_sphere_mode=msm, material_toon_shared=mts, material_toon_index=mtoon,
             material_memo=("",) * nm, material_face_start=fs.astype(np.int32))


def bones_to_model(raw: PmdRaw, f: dict, ex: dict, bone_names: list) -> None:
    """Bone types → flags: 1/2 translatable, 2 IK, 6/7 hidden, 5 append rotation from the bone
    in its IK field (ratio 1), 9 append rotation from the bone in its child field (ratio = IK
    field as int16 / 100), 8 fixed axis toward the child."""
    bo = raw.bones
    nb = len(bo)
    btype = bo["type"]
    tail = P.to_index(bo["tail"], P.NO_BONE)
    tail[bo["tail"] == 0] = -1
    ikf = bo["ik"].astype(np.int32)
    fl = np.full(nb, M.BONE_ENABLED | M.BONE_ROTATABLE | M.BONE_VISIBLE | M.BONE_TAIL_IS_BONE, np.int32)
    fl[(btype == P.BONE_MOVE) | (btype == P.BONE_IK)] |= M.BONE_TRANSLATABLE
    fl[btype == P.BONE_IK] |= M.BONE_IK
    fl[(btype == P.BONE_IK_TARGET) | (btype == P.BONE_INVISIBLE)] &= ~M.BONE_VISIBLE
    app_par = np.full(nb, -1, np.int32)
    app_ratio = np.zeros(nb, np.float32)
    fixed = np.zeros((nb, 3), np.float32)
    for b in np.flatnonzero(btype == P.BONE_ROTATION_AFFECTED):
        if ikf[b] < nb:
            app_par[b], app_ratio[b] = ikf[b], 1.0
            fl[b] |= M.BONE_APPEND_ROTATION
    for b in np.flatnonzero(btype == P.BONE_ROTATION_LINKED):
        src = int(bo["tail"][b])
        if src < nb:
            app_par[b] = src
            app_ratio[b] = np.int16(np.uint16(bo["ik"][b])) / np.float32(100)
            fl[b] |= M.BONE_APPEND_ROTATION
        tail[b] = -1
    for b in np.flatnonzero(btype == P.BONE_TWIST):
        if 0 <= tail[b] < nb:
            d = bo["p"][tail[b]] - bo["p"][b]
            n = float(np.linalg.norm(d))
            if n > 0:
                fixed[b] = d / n
                fl[b] |= M.BONE_FIXED_AXIS
    bad = (tail >= nb)
    tail[bad] = -1  # an out-of-range child is only a display hint: dropped
    if bad.any():
        raw.warnings.append(f"{int(bad.sum())} bone child indices out of range dropped")
    for head, _ in raw.iks:
        if head["bone"] < nb:
            fl[head["bone"]] |= M.BONE_IK
    parent = P.to_index(bo["parent"], P.NO_BONE)
    ex.update(bone_type=btype, bone_tail_raw=bo["tail"], bone_ik_raw=bo["ik"], bone_parent_raw=bo["parent"],
              bone_flags_read=fl.astype(np.uint16), bone_append_read=(app_par, app_ratio))
    f.update(bone_name=tuple(bone_names), bone_position=bo["p"], bone_parent=parent,
             bone_layer=_bone_layers(btype, fl, parent), bone_flags=fl.astype(np.uint16), bone_tail_index=tail,
             bone_tail_offset=np.zeros((nb, 3), np.float32), bone_append_parent=app_par, bone_append_ratio=app_ratio,
             bone_fixed_axis=fixed)


def _bone_layers(btype: np.ndarray, flags: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """(B,) int32 transform layers as PMX Editor and mmd_tools convert a PMD: IK bones 1,
    rotation-affected bones (type 5) and everything below them 2, the rest 0."""
    below5 = btype == P.BONE_ROTATION_AFFECTED
    has_parent = (parent >= 0) & (parent < len(parent))
    for _ in range(len(parent)):  # spread down the hierarchy (depth steps; a cycle stops at B)
        grown = below5.copy()
        grown[has_parent] |= below5[parent[has_parent]]
        if (grown == below5).all():
            break
        below5 = grown
    layer = np.where((flags & M.BONE_IK) != 0, 1, 0).astype(np.int32)
    layer[below5] = 2
    return layer


def iks_to_model(raw: PmdRaw, f: dict, ex: dict, bone_names: list) -> None:
    """IK solvers in bone order (the Model contract; the file order is kept for write-back),
    limit angle × 4 (PMD stores it per quarter turn unit), knee links limited to bending."""
    nb = len(raw.bones)
    order = sorted(range(len(raw.iks)), key=lambda k: int(raw.iks[k][0]["bone"]))
    ex["ik_file_order"] = np.array(order, np.int64)
    ex["ik_file_names"] = tuple(bone_names[h["bone"]] if h["bone"] < nb else "" for h, _ in raw.iks)
    iks = [raw.iks[k] for k in order]
    bik = np.full(nb, -1, np.int32)
    ls = [0]
    links, lo, hi, has = [], [], [], []
    for k, (head, chain) in enumerate(iks):
        ikb = int(head["bone"])
        if ikb < nb and bik[ikb] < 0:
            bik[ikb] = k
        for c in chain.tolist():
            links.append(c)
            knee = 0 <= c < nb and P.KNEE in bone_names[c]
            has.append(knee)
            lo.append(P.KNEE_LOWER if knee else (0.0, 0.0, 0.0))
            hi.append(P.KNEE_UPPER if knee else (0.0, 0.0, 0.0))
        ls.append(len(links))
    heads = np.array([h for h, _ in iks], P.IK_HEAD).reshape(len(iks))
    ex["ik_bone_read"] = heads["bone"].astype(np.int32)
    f.update(bone_ik=bik, ik_bone=heads["bone"].astype(np.int32), ik_target=heads["target"].astype(np.int32),
             ik_loop_count=heads["loops"].astype(np.int32),
             ik_limit_angle=heads["limit"].astype(np.float32) * np.float32(4),
             ik_link_start=np.array(ls, np.int32), ik_link_bone=np.array(links, np.int32),
             ik_link_has_limit=np.array(has, bool), ik_link_lower=np.array(lo, np.float32).reshape(-1, 3),
             ik_link_upper=np.array(hi, np.float32).reshape(-1, 3))


def morphs_to_model(raw: PmdRaw, f: dict, ex: dict, path: str):
    """Vertex morphs with rows mapped through the base morph to absolute vertices; the base
    morph itself is kept in ``source_extras``. Returns the base morph's PMD index (or None)."""
    base_i = None
    names_, name_fields, panels, starts, offs, raw_idx = [], [], [], [0], [], []
    for i, (nf, kind, rows) in enumerate(raw.morphs):
        if kind == 0 and base_i is None:
            base_i = i
            ex["base_morph"] = (nf, rows["i"].copy(), rows["o"].copy())
            continue
        name_fields.append(nf)
        names_.append(decode_field(nf)[0])
        panels.append(kind)
        raw_idx.append(rows["i"])
        offs.append(rows["o"])
        starts.append(starts[-1] + len(rows))
    base_vertices = ex["base_morph"][1] if base_i is not None else np.zeros(0, np.uint32)
    ex["morph_name_field"] = tuple(name_fields)
    ex["morph_base_position"] = base_i
    ri = np.concatenate(raw_idx) if raw_idx else np.zeros(0, np.uint32)
    if len(ri) and (ri >= len(base_vertices)).any():
        j = int(np.flatnonzero(ri >= len(base_vertices))[0])
        raise FormatError(f"morph row {j} refers to base vertex {int(ri[j])} but the base morph has "
                          f"{len(base_vertices)}", path=path, section="morphs")
    ex["morph_base_index"] = ri
    n = len(names_)
    morph_en = [""] * n
    en_fields = (raw.english or {}).get("morphs") or ()
    if en_fields:
        ex["morph_name_en_field"] = en_fields
        for i in range(min(n, len(en_fields))):
            morph_en[i] = decode_field(en_fields[i])[0]
    f.update(morph_name=tuple(names_), morph_name_en=tuple(morph_en), morph_panel=np.array(panels, np.uint8),
             morph_kind=np.full(n, M.MORPH_VERTEX, np.uint8), vertex_morph_start=np.array(starts, np.int32),
             vertex_morph_vertex=base_vertices[ri].astype(np.int32) if len(ri) else np.zeros(0, np.int32),
             vertex_morph_offset=np.concatenate(offs) if offs else np.zeros((0, 3), np.float32))
    return base_i


def display_to_model(raw: PmdRaw, f: dict, ex: dict, base_i) -> None:
    """Morph display list and bone groups → PMX-style display frames (Root, 表情, groups)."""
    def morph_pos(j):  # PMD morph index (with base) → model morph index
        return j - 1 if base_i is not None and j > base_i else j

    nb, ng, bone_disp = len(raw.bones), len(raw.group_fields), raw.bone_display
    group_en_fields = (raw.english or {}).get("groups") or ()
    frames = [("Root", "Root", 1, ((False, 0),) if nb else ())]
    frames.append(("表情", "Exp", 1, tuple((True, morph_pos(int(j))) for j in raw.morph_display if int(j) != base_i)))
    for g in range(ng):
        gname = decode_field(raw.group_fields[g])[0].rstrip("\r\n")
        gen = decode_field(group_en_fields[g])[0].rstrip("\r\n") if g < len(group_en_fields) else ""
        items = tuple((False, int(b)) for b, gg in zip(bone_disp["b"], bone_disp["g"]) if gg == g + 1)
        frames.append((gname, gen, 0, items))
    f["display_frames"] = tuple(frames)
    ex.update(morph_display_raw=raw.morph_display, group_field=raw.group_fields, group_en_field=group_en_fields,
              bone_display_raw=bone_disp)
    if (bone_disp["g"] == 0).any() or (bone_disp["g"] > ng).any():
        raw.warnings.append("bone display entries with group numbers outside the group list dropped from display "
                            "frames")


def physics_to_model(raw: PmdRaw, f: dict, ex: dict) -> None:
    """Rigid bodies (bone-relative positions → model space) and joints (0xFFFFFFFF → -1)."""
    rig = raw.rigid_bodies if raw.rigid_bodies is not None else np.zeros(0, P.RIGID)
    jo = raw.joints if raw.joints is not None else np.zeros(0, P.JOINT)
    bo = raw.bones
    nb, nr = len(bo), len(rig)
    rbone = P.to_index(rig["bone"], P.NO_BONE)
    rb_names, ex["rigid_body_name_field"] = names(rig["name"], raw.warnings, "rigid body names")
    ref = np.where(rbone >= 0, rbone, 0)
    pos = rig["p"].copy()
    if nb and nr:
        okb = ref < nb
        pos[okb] = rig["p"][okb] + bo["p"][ref[okb]]
    ex["rigid_body_offset_raw"] = rig["p"]
    ex["rigid_body_position_built"] = pos
    f.update(rigid_body_name=tuple(rb_names), rigid_body_bone=rbone, rigid_body_group=rig["group"],
             rigid_body_collide_mask=rig["mask"], rigid_body_shape=rig["shape"], rigid_body_size=rig["size"],
             rigid_body_position=pos, rigid_body_rotation=rig["r"], rigid_body_mass=rig["mass"],
             rigid_body_linear_damping=rig["lin"], rigid_body_angular_damping=rig["ang"],
             rigid_body_restitution=rig["rest"], rigid_body_friction=rig["fric"], rigid_body_mode=rig["mode"])
    j_names, ex["joint_name_field"] = names(jo["name"], raw.warnings, "joint names")
    v = jo["v"]
    f.update(joint_name=tuple(j_names), joint_type=np.zeros(len(jo), np.uint8),
             joint_body_a=P.to_index(jo["a"], P.NO_BODY), joint_body_b=P.to_index(jo["b"], P.NO_BODY),
             joint_position=v[:, 0], joint_rotation=v[:, 1], joint_translation_lower=v[:, 2],
             joint_translation_upper=v[:, 3], joint_rotation_lower=v[:, 4], joint_rotation_upper=v[:, 5],
             joint_spring_translation=v[:, 6], joint_spring_rotation=v[:, 7])
    ex["joint_raw"] = jo[["a", "b"]]
