"""PMD reader and writer: bytes ⇄ a dict of ``Model`` field arrays (the PMX-shaped model).

In (read): the bytes of a .pmd file (with the optional English-name, toon-texture and
physics extensions). Out: ``dict`` of Model fields for ``build_model``; PMD concepts are
converted to PMX ones: bone types → BONE_* flags (type 2 IK, 5 回転影響下 → append rotation
from the bone in its IK field with ratio 1, 8 twist → fixed axis toward the child, 9 回転連動 →
append rotation from the bone in its child field with ratio = IK field (int16) / 100), child
index 0 → -1, IK unit angle × 4, knee links (name contains ひざ) limited to X in
[-180°, -0.5°], the "base" morph folded into absolute vertex indices (and left out of the morph
list), rigid body positions made model-space (PMD stores them relative to their bone; bodies
without a bone relative to bone 0), toon numbers → shared toon / texture. Raw PMD-only
details go to ``source_extras`` so ``write_pmd`` gives the same bytes back.
Write: ``write_pmd(model) -> bytes`` (PMX-only data — non-vertex morphs, soft bodies, SDEF,
more than 2 weights — is reduced to what PMD can hold).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.binary import BinaryReader, BinaryWriter
from mmdkit.text import decode_field, encode_field
from mmdkit.model import model as M

VERTEX = np.dtype([("p", "<f4", 3), ("n", "<f4", 3), ("uv", "<f4", 2), ("b", "<u2", 2), ("w", "u1"), ("edge", "u1")])
MATERIAL = np.dtype([("diffuse", "<f4", 3), ("alpha", "<f4"), ("power", "<f4"), ("specular", "<f4", 3),
                     ("ambient", "<f4", 3), ("toon", "u1"), ("edge", "u1"), ("count", "<u4"), ("tex", "u1", 20)])
BONE = np.dtype([("name", "u1", 20), ("parent", "<u2"), ("tail", "<u2"), ("type", "u1"), ("ik", "<u2"),
                 ("p", "<f4", 3)])
RIGID = np.dtype([("name", "u1", 20), ("bone", "<u2"), ("group", "u1"), ("mask", "<u2"), ("shape", "u1"),
                  ("size", "<f4", 3), ("p", "<f4", 3), ("r", "<f4", 3), ("mass", "<f4"), ("lin", "<f4"),
                  ("ang", "<f4"), ("rest", "<f4"), ("fric", "<f4"), ("mode", "u1")])
JOINT = np.dtype([("name", "u1", 20), ("a", "<u4"), ("b", "<u4"), ("v", "<f4", (8, 3))])
MORPH_ROW = np.dtype([("i", "<u4"), ("o", "<f4", 3)])
DEFAULT_TOONS = tuple(f"toon{i:02d}.bmp" for i in range(1, 11))
KNEE = "ひざ"
KNEE_LOWER = (-math.pi, 0.0, 0.0)
KNEE_UPPER = (-math.radians(0.5), 0.0, 0.0)


def _names(raw: np.ndarray, warnings: list, what: str) -> tuple[list, tuple]:
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


def _split_texture(s: str) -> tuple[str | None, str | None, int]:
    """'a.bmp*b.sph' → (texture, sphere, sphere mode)."""
    if not s:
        return None, None, 0
    parts = s.split("*")
    tex = sph = None
    for p in parts:
        low = p.lower()
        if low.endswith(".sph") or low.endswith(".spa"):
            sph = p
        elif p:
            tex = p if tex is None else tex
    mode = 0 if sph is None else (M.SPHERE_ADD if sph.lower().endswith(".spa") else M.SPHERE_MULTIPLY)
    return tex, sph, mode


def read_pmd(data: bytes, path: str = "") -> dict:
    """Parse a PMD file into a dict of Model fields (see module docstring)."""
    r = BinaryReader(data, path)
    warn = r.warnings
    r.section = "header"
    magic = r.raw(3)
    if magic != b"Pmd":
        raise r.error(f"not a PMD file (magic {magic!r}, expected b'Pmd')", 0)
    version = r.f32()
    ex: dict = {"format": "pmd", "version": version}
    name_f, comment_f = r.raw(20), r.raw(256)
    ex["name_field"], ex["comment_field"] = name_f, comment_f
    f: dict = {"name": decode_field(name_f)[0], "comment": decode_field(comment_f)[0]}

    r.section = "vertices"
    nv = r.u32_count(VERTEX.itemsize, "vertex")
    v = r.array(VERTEX, nv)
    f["vertex_position"] = v["p"]
    f["vertex_normal"] = v["n"]
    f["vertex_uv"] = v["uv"]
    f["vertex_additional_uv"] = np.zeros((nv, 0, 4), np.float32)
    f["vertex_deform"] = np.full(nv, M.DEFORM_BDEF2, np.uint8)
    bi = np.zeros((nv, 4), np.int32)
    bi[:, :2] = v["b"]
    bw = np.zeros((nv, 4), np.float32)
    w = v["w"].astype(np.float32) / np.float32(100)
    if (v["w"] > 100).any():
        i = int(np.flatnonzero(v["w"] > 100)[0])
        warn.append(f"vertex {i}: weight {int(v['w'][i])} > 100 clamped to 100 (raw byte kept)")
    w = np.minimum(w, 1)
    bw[:, 0] = w
    bw[:, 1] = np.float32(1) - w
    f["vertex_bone_index"] = bi
    f["vertex_bone_weight"] = bw
    f["vertex_edge_scale"] = np.where(v["edge"] == 0, 1.0, 0.0).astype(np.float32)
    ex["vertex_weight_raw"] = v["w"]
    ex["vertex_edge_raw"] = v["edge"]

    r.section = "faces"
    nidx = r.u32_count(2, "face index")
    if nidx % 3:
        raise r.error(f"face index count {nidx} is not a multiple of 3", r.pos - 4)
    f["face_vertex_index"] = r.array("<u2", nidx).astype(np.int32).reshape(-1, 3)

    r.section = "materials"
    nm = r.u32_count(MATERIAL.itemsize, "material")
    mt = r.array(MATERIAL, nm)
    if (mt["count"] % 3 != 0).any():
        i = int(np.flatnonzero(mt["count"] % 3)[0])
        raise r.error(f"material {i}: face index count {int(mt['count'][i])} is not a multiple of 3")
    tex_fields = tuple(row.tobytes() for row in mt["tex"])
    ex["material_texture_field"] = tex_fields

    r.section = "bones"
    nb = r.count(r.u16(), BONE.itemsize, "bone", r.pos - 2)
    bo = r.array(BONE, nb)
    bone_names, bone_fields = _names(bo["name"], warn, "bone names")
    ex["bone_name_field"] = bone_fields

    r.section = "IK"
    nik = r.count(r.u16(), 11, "IK", r.pos - 2)
    iks = []
    for _ in range(nik):
        ikb, tgt, nl, loops, lim = r.unpack(struct.Struct("<HHBHf"))
        chain = r.array("<u2", nl).astype(np.int32)
        iks.append((ikb, tgt, loops, lim, chain))

    r.section = "morphs"
    nmo = r.count(r.u16(), 25, "morph", r.pos - 2)
    morphs = []
    for i in range(nmo):
        nf = r.raw(20)
        cnt = r.u32_count(16, f"morph {i} vertex")
        kind = r.u8()
        rows = r.array(MORPH_ROW, cnt)
        morphs.append((nf, kind, rows))

    r.section = "morph display list"
    nd = r.u8()
    morph_disp = r.array("<u2", nd).astype(np.int32)
    r.section = "bone display names"
    ng = r.u8()
    group_fields = tuple(r.raw(50) for _ in range(ng))
    r.section = "bone display list"
    nbd = r.u32_count(3, "bone display entry")
    bone_disp = r.array(np.dtype([("b", "<u2"), ("g", "u1")]), nbd)

    # --- extensions (each optional, in this order) -------------------------------------------
    ex["has_english"] = ex["has_toon"] = ex["has_physics"] = False
    bone_en = [""] * nb
    morph_en_fields = ()
    group_en_fields = ()
    f["name_en"] = f["comment_en"] = ""
    if r.remaining:
        r.section = "English names"
        flag = r.u8()
        ex["english_flag"] = flag
        ex["has_english"] = True
        if flag:
            ne_f, ce_f = r.raw(20), r.raw(256)
            ex["name_en_field"], ex["comment_en_field"] = ne_f, ce_f
            f["name_en"], f["comment_en"] = decode_field(ne_f)[0], decode_field(ce_f)[0]
            bone_en, ex["bone_name_en_field"] = _names(r.array(("u1", 20), nb), warn, "English bone names")
            nmorph_en = max(nmo - 1, 0)
            morph_en_fields = tuple(r.raw(20) for _ in range(nmorph_en))
            group_en_fields = tuple(r.raw(50) for _ in range(ng))
    toon_names = list(DEFAULT_TOONS)
    if r.remaining:
        r.section = "toon textures"
        ex["has_toon"] = True
        toon_fields = tuple(r.raw(100) for _ in range(10))
        ex["toon_field"] = toon_fields
        toon_names = [decode_field(t)[0] for t in toon_fields]
    rig = np.zeros(0, RIGID)
    jo = np.zeros(0, JOINT)
    if r.remaining:
        r.section = "rigid bodies"
        ex["has_physics"] = True
        rig = r.array(RIGID, r.u32_count(RIGID.itemsize, "rigid body"))
        r.section = "joints"
        if r.remaining:
            jo = r.array(JOINT, r.u32_count(JOINT.itemsize, "joint"))
        else:
            ex["physics_without_joints"] = True
    if r.remaining:
        ex["trailing"] = data[r.pos:]
        warn.append(f"{r.remaining} bytes after the last section (byte {r.pos}) kept but ignored")

    # --- materials → model -----------------------------------------------------------------
    textures: list[str] = []

    def tex_index(p):
        if p is None:
            return -1
        if p not in textures:
            textures.append(p)
        return textures.index(p)

    mti = np.full(nm, -1, np.int32)
    msi = np.full(nm, -1, np.int32)
    msm = np.zeros(nm, np.uint8)
    mts = np.zeros(nm, bool)
    mtoon = np.full(nm, -1, np.int32)
    for m in range(nm):
        s = decode_field(tex_fields[m])[0]
        t, sp, mode = _split_texture(s)
        mti[m], msi[m], msm[m] = tex_index(t), tex_index(sp), mode
        tn = int(mt["toon"][m])
        if tn < 10:
            if toon_names[tn].lower() == DEFAULT_TOONS[tn]:
                mts[m], mtoon[m] = True, tn
            elif toon_names[tn]:
                mtoon[m] = tex_index(toon_names[tn])
            else:
                mts[m], mtoon[m] = True, tn
    ex["material_toon_raw"] = mt["toon"]
    diffuse = np.empty((nm, 4), np.float32)
    diffuse[:, :3] = mt["diffuse"]
    diffuse[:, 3] = mt["alpha"]
    flags = np.where(mt["edge"] != 0, M.MATERIAL_EDGE, 0) | M.MATERIAL_GROUND_SHADOW | M.MATERIAL_SELF_SHADOW_MAP \
        | M.MATERIAL_SELF_SHADOW
    ex["material_edge_raw"] = mt["edge"]
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

    # --- bones → model -----------------------------------------------------------------------
    btype = bo["type"]
    parent = bo["parent"].astype(np.int32)
    parent[bo["parent"] == 0xFFFF] = -1
    tail = bo["tail"].astype(np.int32)
    tail[(bo["tail"] == 0) | (bo["tail"] == 0xFFFF)] = -1
    ikf = bo["ik"].astype(np.int32)
    fl = np.full(nb, M.BONE_ENABLED | M.BONE_ROTATABLE | M.BONE_VISIBLE | M.BONE_TAIL_IS_BONE, np.int32)
    fl[(btype == 1) | (btype == 2)] |= M.BONE_TRANSLATABLE
    fl[btype == 2] |= M.BONE_IK
    fl[(btype == 6) | (btype == 7)] &= ~M.BONE_VISIBLE
    app_par = np.full(nb, -1, np.int32)
    app_ratio = np.zeros(nb, np.float32)
    fixed = np.zeros((nb, 3), np.float32)
    for b in np.flatnonzero(btype == 5):
        if ikf[b] < nb:
            app_par[b], app_ratio[b] = ikf[b], 1.0
            fl[b] |= M.BONE_APPEND_ROTATION
    for b in np.flatnonzero(btype == 9):
        src = int(bo["tail"][b])
        if src < nb:
            app_par[b] = src
            app_ratio[b] = np.int16(np.uint16(bo["ik"][b])) / np.float32(100)
            fl[b] |= M.BONE_APPEND_ROTATION
        tail[b] = -1
    for b in np.flatnonzero(btype == 8):
        if 0 <= tail[b] < nb:
            d = bo["p"][tail[b]] - bo["p"][b]
            n = float(np.linalg.norm(d))
            if n > 0:
                fixed[b] = d / n
                fl[b] |= M.BONE_FIXED_AXIS
    bad = (tail >= nb)
    tail[bad] = -1  # an out-of-range child is only a display hint: dropped
    if bad.any():
        warn.append(f"{int(bad.sum())} bone child indices out of range dropped")
    ex.update(bone_type=btype, bone_tail_raw=bo["tail"], bone_ik_raw=bo["ik"], bone_parent_raw=bo["parent"])
    # solvers in bone order (the Model contract); the file order is kept for write-back
    order = sorted(range(len(iks)), key=lambda k: iks[k][0])
    ex["ik_file_order"] = np.array(order, np.int64)
    iks = [iks[k] for k in order]
    bik = np.full(nb, -1, np.int32)
    ls = [0]
    links, lo, hi, has = [], [], [], []
    for k, (ikb, tgt, loops, lim, chain) in enumerate(iks):
        if ikb < nb and bik[ikb] < 0:
            bik[ikb] = k
        for c in chain:
            links.append(int(c))
            knee = 0 <= c < nb and KNEE in bone_names[c]
            has.append(knee)
            lo.append(KNEE_LOWER if knee else (0.0, 0.0, 0.0))
            hi.append(KNEE_UPPER if knee else (0.0, 0.0, 0.0))
        ls.append(len(links))
    for k, ik in enumerate(iks):
        if ik[0] < nb:
            fl[ik[0]] |= M.BONE_IK
    f.update(bone_name=tuple(bone_names), bone_name_en=tuple(bone_en), bone_position=bo["p"], bone_parent=parent,
             bone_layer=np.zeros(nb, np.int32), bone_flags=fl.astype(np.uint16), bone_tail_index=tail,
             bone_tail_offset=np.zeros((nb, 3), np.float32), bone_append_parent=app_par, bone_append_ratio=app_ratio,
             bone_fixed_axis=fixed, bone_ik=bik,
             ik_bone=np.array([ik[0] for ik in iks], np.int32), ik_target=np.array([ik[1] for ik in iks], np.int32),
             ik_loop_count=np.array([ik[2] for ik in iks], np.int32),
             ik_limit_angle=np.array([ik[3] for ik in iks], np.float32) * np.float32(4),
             ik_link_start=np.array(ls, np.int32), ik_link_bone=np.array(links, np.int32),
             ik_link_has_limit=np.array(has, bool), ik_link_lower=np.array(lo, np.float32).reshape(-1, 3),
             ik_link_upper=np.array(hi, np.float32).reshape(-1, 3))

    # --- morphs → model (the base morph maps morph rows to absolute vertices) -----------------
    base_i = None
    names, name_fields, kinds, starts, verts, offs, raw_idx = [], [], [], [0], [], [], []
    for i, (nf, kind, rows) in enumerate(morphs):
        if kind == 0 and base_i is None:
            base_i = i
            ex["base_morph"] = (nf, rows["i"].copy(), rows["o"].copy())
            continue
        name_fields.append(nf)
        names.append(decode_field(nf)[0])
        kinds.append(kind)
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
    nmorph = len(names)
    morph_en = [""] * nmorph
    if morph_en_fields:
        ex["morph_name_en_field"] = morph_en_fields
        for i in range(min(nmorph, len(morph_en_fields))):
            morph_en[i] = decode_field(morph_en_fields[i])[0]
    f.update(morph_name=tuple(names), morph_name_en=tuple(morph_en),
             morph_panel=np.array(kinds, np.uint8), morph_kind=np.full(nmorph, M.MORPH_VERTEX, np.uint8),
             vertex_morph_start=np.array(starts, np.int32),
             vertex_morph_vertex=base_vertices[ri].astype(np.int32) if len(ri) else np.zeros(0, np.int32),
             vertex_morph_offset=np.concatenate(offs) if offs else np.zeros((0, 3), np.float32))

    # --- display frames ------------------------------------------------------------------------
    def morph_pos(j):  # PMD morph index (with base) → model morph index
        return j - 1 if base_i is not None and j > base_i else j

    frames = [("Root", "Root", 1, ((False, 0),) if nb else ())]
    exp = tuple((True, morph_pos(int(j))) for j in morph_disp if int(j) != base_i)
    frames.append(("表情", "Exp", 1, exp))
    for g in range(ng):
        gname = decode_field(group_fields[g])[0].rstrip("\r\n")
        gen = decode_field(group_en_fields[g])[0].rstrip("\r\n") if g < len(group_en_fields) else ""
        items = tuple((False, int(b)) for b, gg in zip(bone_disp["b"], bone_disp["g"]) if gg == g + 1)
        frames.append((gname, gen, 0, items))
    f["display_frames"] = tuple(frames)
    ex.update(morph_display_raw=morph_disp, group_field=group_fields, group_en_field=group_en_fields,
              bone_display_raw=bone_disp)
    if (bone_disp["g"] == 0).any() or (bone_disp["g"] > ng).any():
        warn.append("bone display entries with group numbers outside the group list dropped from display frames")

    # --- physics -------------------------------------------------------------------------------
    nr = len(rig)
    rbone = rig["bone"].astype(np.int32)
    rbone[rig["bone"] == 0xFFFF] = -1
    rb_names, ex["rigid_body_name_field"] = _names(rig["name"], warn, "rigid body names")
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
    j_names, ex["joint_name_field"] = _names(jo["name"], warn, "joint names")
    ja = jo["a"].astype(np.int64)
    jb = jo["b"].astype(np.int64)
    for arr in (ja, jb):
        arr[arr >= 2**31] = -1  # 0xFFFFFFFF = none
    f.update(joint_name=tuple(j_names), joint_type=np.zeros(len(jo), np.uint8),
             joint_body_a=ja.astype(np.int32), joint_body_b=jb.astype(np.int32),
             joint_position=jo["v"][:, 0], joint_rotation=jo["v"][:, 1], joint_translation_lower=jo["v"][:, 2],
             joint_translation_upper=jo["v"][:, 3], joint_rotation_lower=jo["v"][:, 4],
             joint_rotation_upper=jo["v"][:, 5], joint_spring_translation=jo["v"][:, 6],
             joint_spring_rotation=jo["v"][:, 7])
    ex["joint_raw"] = jo[["a", "b"]]
    f["source_format"] = "pmd"
    f["source_path"] = str(path)
    f["source_extras"] = ex
    f["warnings"] = tuple(warn)
    return f


# ----------------------------------------------------------------------------------------
# writer

def _field(name: str, raws, i: int, size: int) -> bytes:
    """The raw fixed field when it still decodes to ``name``, else ``name`` encoded."""
    if raws is not None and i < len(raws) and len(raws[i]) == size and decode_field(raws[i])[0] == name:
        return raws[i]
    return encode_field(name, size)


def _same(a, b) -> bool:
    return a is not None and b is not None and np.shape(a) == np.shape(b) and np.array_equal(a, b)


def write_pmd(model) -> bytes:
    """Serialise a ``Model`` as PMD (raw PMD details of a PMD source are reused when they
    still match, giving byte-identical output for an unmodified model)."""
    ex = model.source_extras if model.source_format == "pmd" else {}
    V, B, Mn = model.num_vertices, model.num_bones, model.num_materials
    if V > 65535 + 1 or B > 65535 or model.num_morphs > 65534:
        raise FormatError(f"too large for PMD ({V} vertices, {B} bones, {model.num_morphs} morphs; PMD indices are "
                          f"16-bit)", section="pmd")
    w = BinaryWriter()
    w.raw(b"Pmd")
    w.f32(ex.get("version", 1.0))
    w.raw(_field(model.name, [ex.get("name_field", b"")], 0, 20))
    w.raw(_field(model.comment, [ex.get("comment_field", b"")], 0, 256))

    # vertices (PMD: BDEF2 with an integer percentage)
    v = np.zeros(V, VERTEX)
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
        raw = ex.get("vertex_weight_raw")
        if raw is not None and len(raw) == V:
            keep = np.clip(raw, 0, 100) == pct
            pct = np.where(keep, raw, pct)
        v["b"], v["w"] = two, pct
        edge = np.where(model.vertex_edge_scale == 0, 1, 0).astype(np.uint8)
        raw = ex.get("vertex_edge_raw")
        if raw is not None and len(raw) == V:
            edge = np.where((raw != 0) == (edge != 0), raw, edge)
        v["edge"] = edge
    w.u32(V)
    w.array(v)
    w.u32(model.face_vertex_index.size)
    w.array(model.face_vertex_index.astype("<u2"))

    # materials
    fs = model.material_face_start
    mt = np.zeros(Mn, MATERIAL)
    mt["diffuse"], mt["alpha"] = model.material_diffuse[:, :3], model.material_diffuse[:, 3]
    mt["power"], mt["specular"], mt["ambient"] = (model.material_specular_power, model.material_specular,
                                                  model.material_ambient)
    mt["edge"] = (model.material_flags & M.MATERIAL_EDGE) != 0
    raw = ex.get("material_edge_raw")
    if raw is not None and len(raw) == Mn:
        mt["edge"] = np.where((raw != 0) == (mt["edge"] != 0), raw, mt["edge"])
    mt["count"] = np.diff(fs) * 3
    toon_names = list(DEFAULT_TOONS)
    tf = ex.get("toon_field")
    if tf:
        toon_names = [decode_field(t)[0] for t in tf]
    toon_raw = ex.get("material_toon_raw")
    tex_fields = ex.get("material_texture_field") or ()
    for m in range(Mn):
        t = int(model.material_texture_index[m])
        s = int(model.material_sphere_index[m])
        parts = [model.texture_path[t]] if t >= 0 else []
        if s >= 0:
            parts.append(model.texture_path[s])
        name = "*".join(parts)
        mt["tex"][m] = np.frombuffer(_field(name, tex_fields, m, 20), np.uint8)
        ti = int(model.material_toon_index[m])
        if model.material_toon_shared[m]:
            code = ti if 0 <= ti <= 9 else 255
        elif ti >= 0:
            p = model.texture_path[ti]
            code = next((k for k in range(10) if toon_names[k] == p), None)
            if code is None:
                slot = next((k for k in range(9, -1, -1) if toon_names[k] == DEFAULT_TOONS[k]), 9)
                toon_names[slot] = p
                code = slot
        else:
            code = 255
        if toon_raw is not None and m < len(toon_raw) and toon_raw[m] >= 10 and code == 255:
            code = int(toon_raw[m])
        mt["toon"][m] = code
    w.u32(Mn)
    w.array(mt)

    # bones
    bt, tail_raw, ik_raw = ex.get("bone_type"), ex.get("bone_tail_raw"), ex.get("bone_ik_raw")
    use_raw = bt is not None and len(bt) == B
    bo = np.zeros(B, BONE)
    names_f = ex.get("bone_name_field")
    for b in range(B):
        bo["name"][b] = np.frombuffer(_field(model.bone_name[b], names_f, b, 20), np.uint8)
    bo["parent"] = np.where(model.bone_parent < 0, 0xFFFF, model.bone_parent)
    bo["p"] = model.bone_position
    fl = model.bone_flags.astype(np.int32)
    if use_raw:
        bo["type"], bo["tail"], bo["ik"] = bt, tail_raw, ik_raw
        praw = ex.get("bone_parent_raw")
        if praw is not None and len(praw) == B:
            same = np.where(praw == 0xFFFF, -1, praw) == model.bone_parent
            bo["parent"] = np.where(same, praw, bo["parent"])
    else:
        iktarget_of = {}
        for k in range(len(model.ik_bone)):
            for i in range(model.ik_link_start[k], model.ik_link_start[k + 1]):
                iktarget_of.setdefault(int(model.ik_link_bone[i]), int(model.ik_bone[k]))
        targets = set(int(t) for t in model.ik_target)
        for b in range(B):
            typ, tail, ikv = 0, int(model.bone_tail_index[b]) if fl[b] & M.BONE_TAIL_IS_BONE else -1, 0
            if fl[b] & M.BONE_IK:
                typ = 2
            elif fl[b] & M.BONE_APPEND_ROTATION and model.bone_append_parent[b] >= 0:
                r = float(model.bone_append_ratio[b])
                if r == 1.0:
                    typ, ikv = 5, int(model.bone_append_parent[b])
                else:
                    typ, tail, ikv = 9, int(model.bone_append_parent[b]), int(round(r * 100)) & 0xFFFF
            elif fl[b] & M.BONE_FIXED_AXIS:
                typ = 8
            elif b in iktarget_of:
                typ, ikv = 4, iktarget_of[b]
            elif not fl[b] & M.BONE_VISIBLE:
                typ = 6 if b in targets else 7
            elif fl[b] & M.BONE_TRANSLATABLE:
                typ = 1
            bo["type"][b], bo["tail"][b], bo["ik"][b] = typ, max(tail, 0), ikv
    w.u16(B)
    w.array(bo)

    # IK
    K = len(model.ik_bone)
    w.u16(K)
    order = ex.get("ik_file_order")
    if order is None or len(order) != K:
        order = np.arange(K)
    inv = np.empty(K, np.int64)
    inv[order] = np.arange(K)
    for k in inv:
        s0, s1 = int(model.ik_link_start[k]), int(model.ik_link_start[k + 1])
        w.pack(struct.Struct("<HHBHf"), int(model.ik_bone[k]), int(model.ik_target[k]), s1 - s0,
               int(model.ik_loop_count[k]), float(np.float32(model.ik_limit_angle[k]) / np.float32(4)))
        w.array(model.ik_link_bone[s0:s1].astype("<u2"))

    # morphs: base morph + vertex morphs (others cannot be stored in PMD)
    vm = [i for i in range(model.num_morphs) if model.morph_kind[i] == M.MORPH_VERTEX]
    vs = model.vertex_morph_start
    base = ex.get("base_morph")
    raw_idx = ex.get("morph_base_index")
    used = model.vertex_morph_vertex
    if base is not None and raw_idx is not None and len(raw_idx) == len(used) and len(vm) == model.num_morphs \
            and (len(raw_idx) == 0 or (raw_idx.max() < len(base[1]) and np.array_equal(base[1][raw_idx], used))):
        base_f, base_v, base_o = base
        base_o = model.vertex_position[base_v] if np.array_equal(base_o, model.vertex_position[base_v]) else base_o
        row_idx = raw_idx
    else:
        base_f = encode_field("base", 20)
        base_v = np.unique(used).astype(np.uint32)
        base_o = model.vertex_position[base_v] if len(base_v) else np.zeros((0, 3), np.float32)
        lookup = np.zeros(max(V, 1), np.int64)
        lookup[base_v] = np.arange(len(base_v))
        row_idx = lookup[used]
    has_base = base is not None or len(vm) > 0
    base_at = ex.get("morph_base_position", 0) if base is not None else 0
    w.u16(len(vm) + (1 if has_base else 0))
    mf = ex.get("morph_name_field")
    items = []
    for j, i in enumerate(vm):
        s0, s1 = int(vs[i]), int(vs[i + 1])
        rows = np.zeros(s1 - s0, MORPH_ROW)
        rows["i"], rows["o"] = row_idx[s0:s1], model.vertex_morph_offset[s0:s1]
        items.append((_field(model.morph_name[i], mf, i, 20), int(model.morph_panel[i]), rows))
    if has_base:
        rows = np.zeros(len(base_v), MORPH_ROW)
        rows["i"], rows["o"] = base_v, base_o
        items.insert(min(base_at or 0, len(items)), (base_f, 0, rows))
    for nf, kind, rows in items:
        w.raw(nf)
        w.u32(len(rows))
        w.u8(kind)
        w.array(rows)

    # display lists
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
        raw_ok = g < len(gf) and decode_field(gf[g])[0].rstrip("\r\n") == fr[0]
        w.raw(gf[g] if raw_ok else encode_field(fr[0] + "\n", 50))
    bd = [(b, g + 1) for g, fr in enumerate(groups) for is_m, b in fr[3] if not is_m]
    raw = ex.get("bone_display_raw")
    arr = np.zeros(len(bd), [("b", "<u2"), ("g", "u1")])
    if bd:
        arr["b"], arr["g"] = zip(*bd)
    if raw is not None and len(raw) >= len(arr):
        valid = raw[(raw["g"] >= 1) & (raw["g"] <= len(groups))]
        if sorted(map(tuple, valid.tolist())) == sorted(map(tuple, arr.tolist())):
            arr = raw
    w.u32(len(arr))
    w.array(arr)

    # extensions
    is_pmd = model.source_format == "pmd"
    if not is_pmd or ex.get("has_english"):
        flag = ex.get("english_flag", 1)
        w.u8(flag)
        if flag:
            w.raw(_field(model.name_en, [ex.get("name_en_field", b"")], 0, 20))
            w.raw(_field(model.comment_en, [ex.get("comment_en_field", b"")], 0, 256))
            bf = ex.get("bone_name_en_field")
            for b in range(B):
                w.raw(_field(model.bone_name_en[b], bf, b, 20))
            mfe = ex.get("morph_name_en_field")
            for i in vm:
                w.raw(_field(model.morph_name_en[i], mfe, i, 20))
            gfe = ex.get("group_en_field") or ()
            for g, fr in enumerate(groups):
                raw_ok = g < len(gfe) and decode_field(gfe[g])[0].rstrip("\r\n") == fr[1]
                w.raw(gfe[g] if raw_ok else encode_field(fr[1], 50))
    if not is_pmd or ex.get("has_toon"):
        tf = ex.get("toon_field") or ()
        for k in range(10):
            w.raw(_field(toon_names[k], tf, k, 100))
    if not is_pmd or ex.get("has_physics"):
        R = model.num_rigid_bodies
        rg = np.zeros(R, RIGID)
        rf = ex.get("rigid_body_name_field")
        for i in range(R):
            rg["name"][i] = np.frombuffer(_field(model.rigid_body_name[i], rf, i, 20), np.uint8)
        rg["bone"] = np.where(model.rigid_body_bone < 0, 0xFFFF, model.rigid_body_bone)
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
        if not ex.get("physics_without_joints") or model.num_joints:
            J = model.num_joints
            jo = np.zeros(J, JOINT)
            jf = ex.get("joint_name_field")
            for i in range(J):
                jo["name"][i] = np.frombuffer(_field(model.joint_name[i], jf, i, 20), np.uint8)
            jo["a"] = model.joint_body_a.astype(np.int64) & 0xFFFFFFFF
            jo["b"] = model.joint_body_b.astype(np.int64) & 0xFFFFFFFF
            jraw = ex.get("joint_raw")
            if jraw is not None and len(jraw) == J:
                for k in ("a", "b"):
                    same = np.where(jraw[k] >= 2**31, -1, jraw[k].astype(np.int64)) == getattr(model, f"joint_body_{k}")
                    jo[k] = np.where(same, jraw[k], jo[k])
            for c, a in enumerate((model.joint_position, model.joint_rotation, model.joint_translation_lower,
                                   model.joint_translation_upper, model.joint_rotation_lower,
                                   model.joint_rotation_upper, model.joint_spring_translation,
                                   model.joint_spring_rotation)):
                jo["v"][:, c] = a
            w.u32(J)
            w.array(jo)
    if ex.get("trailing"):
        w.raw(ex["trailing"])
    return w.getvalue()


def load_pmd(data: bytes, path: str = ""):
    from mmdkit.model.build import build_model
    return build_model(read_pmd(data, path))
