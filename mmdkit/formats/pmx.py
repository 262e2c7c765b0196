"""PMX 2.0/2.1 reader and writer: bytes ⇄ a dict of ``Model`` field arrays.

In (read): the bytes of a .pmx file. Out: ``dict`` keyed by ``Model`` field names (numpy
arrays as documented in ``mmdkit.model.model``) plus ``source_extras``/``warnings``; build it
with ``mmdkit.model.build.build_model``. Vertices are decoded without a Python loop per
vertex (a numba scan of the variable-size records, then structured-dtype views).
Write: ``write_pmx(model) -> bytes``.

Quirks handled (see docs/formats.md): a file that declares 1-byte bone indices but writes
2-byte ones is re-read with 2-byte bone indices when that consumes the file exactly, with a
warning; bytes after the last section are kept (``source_extras['trailing']``) with a warning.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numba
import numpy as np

from mmdkit.errors import FormatError
from mmdkit.formats.binary import F32x3, I32, BinaryReader, BinaryWriter

MORPH_ELEMENT_NAMES = {0: "group", 1: "vertex", 2: "bone", 3: "uv", 4: "uv1", 5: "uv2", 6: "uv3",
                       7: "uv4", 8: "material", 9: "flip", 10: "impulse"}


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


# ----------------------------------------------------------------------------------------
# vertex scan (compiled): variable-size records → fixed-size byte tables
_WEIGHT_SIZE_IDX = (1, 2, 4, 2, 4)  # bone indices per deform type
_WEIGHT_SIZE_W = (0, 4, 16, 4 + 36, 16)  # weight (+SDEF C,R0,R1) bytes per deform type


@numba.njit(cache=True, nogil=True)
def _scan_vertices(buf, start, count, head, bsize, wmax, out_head, out_w, out_edge):
    """Copy each vertex's fixed head (pos..deform byte), weight block and edge scale into
    tables. Returns (end offset, 0) or (byte offset, 1 truncated | 2 unknown deform type)."""
    n = buf.shape[0]
    p = start
    for v in range(count):
        if p + head > n:
            return p, 1
        for j in range(head):
            out_head[v, j] = buf[p + j]
        t = buf[p + head - 1]
        if t == 0:
            s = bsize
        elif t == 1:
            s = 2 * bsize + 4
        elif t == 2 or t == 4:
            s = 4 * bsize + 16
        elif t == 3:
            s = 2 * bsize + 40
        else:
            return p + head - 1, 2
        q = p + head
        if q + s + 4 > n:
            return p, 1
        for j in range(s):
            out_w[v, j] = buf[q + j]
        for j in range(s, wmax):
            out_w[v, j] = 0
        q += s
        for j in range(4):
            out_edge[v, j] = buf[q + j]
        p = q + 4
    return p, 0


def _idx_dtype(size: int, unsigned: bool = False) -> str:
    if size == 1:
        return "u1" if unsigned else "i1"
    if size == 2:
        return "<u2" if unsigned else "<i2"
    return "<i4"


_IDX_STRUCT = {(1, False): struct.Struct("<b"), (2, False): struct.Struct("<h"), (4, False): struct.Struct("<i"),
               (1, True): struct.Struct("<B"), (2, True): struct.Struct("<H"), (4, True): struct.Struct("<i")}


class _PmxReader(BinaryReader):
    __slots__ = ("utf8", "sizes")

    def text(self) -> str:
        n = self.one(I32)
        if n < 0 or n > self.end - self.pos:
            raise self.error(f"text length {n} exceeds the {self.end - self.pos} bytes that remain", self.pos - 4)
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        if self.utf8:
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                self.warnings.append(f"{self.section}: invalid UTF-8 text at byte {self.pos - n}; replaced")
                return b.decode("utf-8", errors="replace")
        try:
            return b.decode("utf-16-le")
        except UnicodeDecodeError:
            self.warnings.append(f"{self.section}: invalid UTF-16 text at byte {self.pos - n}; kept with surrogates")
            return b.decode("utf-16-le", errors="surrogatepass" if n % 2 == 0 else "replace")

    def index(self, kind: str) -> int:
        return self.one(_IDX_STRUCT[(self.sizes[kind], kind == "vertex")])


_KIND_ORDER = ("vertex", "texture", "material", "bone", "morph", "rigid")


def read_pmx(data: bytes, path: str = "") -> dict:
    """Parse a PMX file into a dict of Model fields (see module docstring)."""
    try:
        return _read_pmx(data, path, None)
    except FormatError as first:
        # Quirk: 1-byte bone indices declared, 2-byte written (some exporters).
        if len(data) >= 17 and data[:4] in (b"PMX ", b"PMXP") and data[8] >= 8 and data[14] == 1:
            try:
                out = _read_pmx(data, path, {"vertex_bone": 2})
            except FormatError:
                raise first from None
            if not out["source_extras"].get("trailing"):
                out["warnings"] = (f"header declares 1-byte bone indices but the vertices use 2-byte ones; "
                                   f"read them as 2-byte (strict read failed: {first.detail} in "
                                   f"'{first.section}' at byte {first.offset})",) + tuple(out["warnings"])
                return out
        raise


def _read_pmx(data: bytes, path: str, bone_size_override) -> dict:
    r = _PmxReader(data, path)
    r.section = "header"
    magic = r.raw(4)
    if magic not in (b"PMX ", b"PMXP"):
        raise r.error(f"not a PMX file (magic {magic!r}, expected b'PMX ')", 0)
    version = r.f32()
    if not (1.95 <= version <= 2.15):
        raise r.error(f"unsupported PMX version {version:g} (expected 2.0 or 2.1)", 4)
    version = 2.1 if version > 2.05 else 2.0
    nglob = r.u8()
    if nglob < 8:
        raise r.error(f"header has {nglob} globals, needs 8", 8)
    glob = r.raw(nglob)
    enc, nuv = glob[0], glob[1]
    if enc not in (0, 1):
        raise r.error(f"unknown text encoding {enc} (0 UTF-16LE, 1 UTF-8)", 9)
    if nuv > 4:
        raise r.error(f"additional UV count {nuv} > 4", 10)
    sizes = {}
    for i, kind in enumerate(_KIND_ORDER):
        s = glob[2 + i]
        if s not in (1, 2, 4):
            raise r.error(f"{kind} index size {s} is not 1, 2 or 4", 11 + i)
        sizes[kind] = s
    declared_sizes = dict(sizes)
    if bone_size_override:
        sizes.update(bone_size_override)
    r.utf8 = enc == 1
    r.sizes = sizes
    f: dict = {}
    f["name"] = r.text()
    f["name_en"] = r.text()
    f["comment"] = r.text()
    f["comment_en"] = r.text()

    # --- vertices ------------------------------------------------------------------------
    r.section = "vertices"
    offsets = {"vertices": r.pos}
    head = 33 + 16 * nuv
    bsz = sizes.get("vertex_bone", sizes["bone"])
    nv = r.i32_count(head + 4 + bsz, "vertex")
    wmax = max(4 * bsz + 16, 2 * bsz + 40)
    out_head = np.empty((nv, head), np.uint8)
    out_w = np.empty((nv, wmax), np.uint8)
    out_edge = np.empty((nv, 4), np.uint8)
    buf = np.frombuffer(data, np.uint8)
    end, err = _scan_vertices(buf, r.pos, nv, head, bsz, wmax, out_head, out_w, out_edge)
    if err == 2:
        raise r.error(f"unknown deform type {data[end]}", end)
    if err == 1:
        raise r.error(f"file ends inside vertex record starting here ({nv} vertices declared)", end)
    hdt = np.dtype([("p", "<f4", 3), ("n", "<f4", 3), ("uv", "<f4", 2), ("auv", "<f4", (nuv, 4)), ("d", "u1")])
    hv = out_head.view(hdt).reshape(nv)
    f["vertex_position"] = hv["p"]
    f["vertex_normal"] = hv["n"]
    f["vertex_uv"] = hv["uv"]
    f["vertex_additional_uv"] = hv["auv"]
    deform = hv["d"].copy()
    f["vertex_deform"] = deform
    bi = np.zeros((nv, 4), np.int32)
    bw = np.zeros((nv, 4), np.float32)
    sc = np.zeros((nv, 3), np.float32)
    sr0 = np.zeros((nv, 3), np.float32)
    sr1 = np.zeros((nv, 3), np.float32)
    idt = _idx_dtype(bsz)
    for t in np.unique(deform):
        sel = np.nonzero(deform == t)[0]
        if t == 0:
            d = np.dtype([("i", idt, 1)])
        elif t == 1:
            d = np.dtype([("i", idt, 2), ("w", "<f4")])
        elif t == 3:
            d = np.dtype([("i", idt, 2), ("w", "<f4"), ("c", "<f4", 3), ("r0", "<f4", 3), ("r1", "<f4", 3)])
        else:
            d = np.dtype([("i", idt, 4), ("w", "<f4", 4)])
        blk = np.ascontiguousarray(out_w[sel, :d.itemsize]).view(d).reshape(len(sel))
        ii = blk["i"].reshape(len(sel), -1)
        bi[sel, :ii.shape[1]] = ii
        if t == 0:
            bw[sel, 0] = 1.0
        elif t in (1, 3):
            w = blk["w"]
            bw[sel, 0] = w
            bw[sel, 1] = np.float32(1.0) - w
            if t == 3:
                sc[sel] = blk["c"]
                sr0[sel] = blk["r0"]
                sr1[sel] = blk["r1"]
        else:
            bw[sel] = blk["w"]
    f["vertex_bone_index"] = bi
    f["vertex_bone_weight"] = bw
    f["vertex_sdef_c"] = sc
    f["vertex_sdef_r0"] = sr0
    f["vertex_sdef_r1"] = sr1
    f["vertex_edge_scale"] = out_edge.view("<f4").reshape(nv)
    r.pos = end

    # --- faces ---------------------------------------------------------------------------
    r.section = "faces"
    offsets["faces"] = r.pos
    vsz = sizes["vertex"]
    nidx = r.i32_count(vsz, "face index")
    if nidx % 3:
        raise r.error(f"face index count {nidx} is not a multiple of 3", r.pos - 4)
    f["face_vertex_index"] = r.array(_idx_dtype(vsz, True), nidx).astype(np.int32).reshape(-1, 3)

    # --- textures ------------------------------------------------------------------------
    r.section = "textures"
    offsets["textures"] = r.pos
    nt = r.i32_count(4, "texture")
    f["texture_path"] = tuple(r.text() for _ in range(nt))

    # --- materials -----------------------------------------------------------------------
    r.section = "materials"
    offsets["materials"] = r.pos
    nm = r.i32_count(4 * 4 + 16 + 65 + 2 * sizes["texture"] + 3 + 4 + 4, "material")
    mat_st = struct.Struct("<4f3ff3fB4ff")
    tsz = sizes["texture"]
    tst = _IDX_STRUCT[(tsz, False)]
    mname, mname_en, memo = [], [], []
    md = np.zeros((nm, 4), np.float32)
    ms = np.zeros((nm, 3), np.float32)
    mp = np.zeros(nm, np.float32)
    ma = np.zeros((nm, 3), np.float32)
    mf = np.zeros(nm, np.uint8)
    mec = np.zeros((nm, 4), np.float32)
    mes = np.zeros(nm, np.float32)
    mti = np.zeros(nm, np.int32)
    msi = np.zeros(nm, np.int32)
    msm = np.zeros(nm, np.uint8)
    mts = np.zeros(nm, bool)
    mtoon = np.zeros(nm, np.int32)
    mfc = np.zeros(nm, np.int64)
    for m in range(nm):
        mname.append(r.text())
        mname_en.append(r.text())
        v = r.unpack(mat_st)
        md[m] = v[0:4]
        ms[m] = v[4:7]
        mp[m] = v[7]
        ma[m] = v[8:11]
        mf[m] = v[11]
        mec[m] = v[12:16]
        mes[m] = v[16]
        mti[m] = r.one(tst)
        msi[m] = r.one(tst)
        mode = r.u8()
        shared = r.u8()
        msm[m] = mode
        if shared > 1:
            raise r.error(f"material {m}: toon flag {shared} is not 0 or 1", r.pos - 1)
        mts[m] = shared == 1
        mtoon[m] = r.u8() if shared else r.one(tst)
        memo.append(r.text())
        c = r.i32()
        if c < 0 or c % 3:
            raise r.error(f"material {m}: face index count {c} is not a non-negative multiple of 3", r.pos - 4)
        mfc[m] = c // 3
    f.update(material_name=tuple(mname), material_name_en=tuple(mname_en), material_diffuse=md,
             material_specular=ms, material_specular_power=mp, material_ambient=ma, material_flags=mf,
             material_edge_color=mec, material_edge_size=mes, material_texture_index=mti,
             material_sphere_index=msi, material_sphere_mode=msm, material_toon_shared=mts,
             material_toon_index=mtoon, material_memo=tuple(memo))
    fs = np.zeros(nm + 1, np.int64)
    np.cumsum(mfc, out=fs[1:])
    if fs[-1] != len(f["face_vertex_index"]):
        r.warnings.append(f"materials cover {int(fs[-1])} triangles but the file has "
                          f"{len(f['face_vertex_index'])}")
    f["material_face_start"] = fs.astype(np.int32) if fs[-1] < 2**31 else fs

    # --- bones ---------------------------------------------------------------------------
    r.section = "bones"
    offsets["bones"] = r.pos
    bsz = sizes["bone"]
    bst = _IDX_STRUCT[(bsz, False)]
    nb = r.i32_count(8 + 12 + bsz + 4 + 2 + bsz, "bone")
    bname, bname_en = [], []
    bpos = np.zeros((nb, 3), np.float32)
    bpar = np.zeros(nb, np.int32)
    blay = np.zeros(nb, np.int32)
    bfl = np.zeros(nb, np.uint16)
    btail = np.full(nb, -1, np.int32)
    btoff = np.zeros((nb, 3), np.float32)
    bap = np.full(nb, -1, np.int32)
    bar = np.zeros(nb, np.float32)
    bfa = np.zeros((nb, 3), np.float32)
    blx = np.zeros((nb, 3), np.float32)
    blz = np.zeros((nb, 3), np.float32)
    bext = np.zeros(nb, np.int32)
    bik = np.full(nb, -1, np.int32)
    ik_bone, ik_target, ik_loop, ik_limit, ik_nlinks = [], [], [], [], []
    link_bone, link_lim, link_lo, link_hi = [], [], [], []
    head_st = struct.Struct("<3f")
    ph_st = struct.Struct("<iH")
    for b in range(nb):
        bname.append(r.text())
        bname_en.append(r.text())
        bpos[b] = r.unpack(head_st)
        bpar[b] = r.one(bst)
        blay[b], fl = r.unpack(ph_st)
        bfl[b] = fl
        if fl & 0x0001:
            btail[b] = r.one(bst)
        else:
            btoff[b] = r.unpack(F32x3)
        if fl & 0x0300:
            bap[b] = r.one(bst)
            bar[b] = r.f32()
        if fl & 0x0400:
            bfa[b] = r.unpack(F32x3)
        if fl & 0x0800:
            blx[b] = r.unpack(F32x3)
            blz[b] = r.unpack(F32x3)
        if fl & 0x2000:
            bext[b] = r.i32()
        if fl & 0x0020:
            bik[b] = len(ik_bone)
            ik_bone.append(b)
            ik_target.append(r.one(bst))
            ik_loop.append(r.i32())
            ik_limit.append(r.f32())
            nl = r.count(r.i32(), bsz + 1, "IK link")
            ik_nlinks.append(nl)
            for _ in range(nl):
                link_bone.append(r.one(bst))
                has = r.u8()
                link_lim.append(has)
                if has:
                    link_lo.append(r.unpack(F32x3))
                    link_hi.append(r.unpack(F32x3))
                else:
                    link_lo.append((0.0, 0.0, 0.0))
                    link_hi.append((0.0, 0.0, 0.0))
    f.update(bone_name=tuple(bname), bone_name_en=tuple(bname_en), bone_position=bpos, bone_parent=bpar,
             bone_layer=blay, bone_flags=bfl, bone_tail_index=btail, bone_tail_offset=btoff,
             bone_append_parent=bap, bone_append_ratio=bar, bone_fixed_axis=bfa, bone_local_axis_x=blx,
             bone_local_axis_z=blz, bone_external_key=bext, bone_ik=bik)
    ls = np.zeros(len(ik_bone) + 1, np.int32)
    np.cumsum(ik_nlinks, out=ls[1:])
    f.update(ik_bone=np.array(ik_bone, np.int32), ik_target=np.array(ik_target, np.int32),
             ik_loop_count=np.array(ik_loop, np.int32), ik_limit_angle=np.array(ik_limit, np.float32),
             ik_link_start=ls, ik_link_bone=np.array(link_bone, np.int32),
             ik_link_has_limit=np.array(link_lim, np.uint8),
             ik_link_lower=np.array(link_lo, np.float32).reshape(-1, 3),
             ik_link_upper=np.array(link_hi, np.float32).reshape(-1, 3))
    link_flag_raw = f["ik_link_has_limit"]
    f["ik_link_has_limit"] = link_flag_raw != 0

    # --- morphs --------------------------------------------------------------------------
    r.section = "morphs"
    offsets["morphs"] = r.pos
    _read_morphs(r, f, sizes)

    # --- display frames --------------------------------------------------------------------
    r.section = "display frames"
    offsets["display frames"] = r.pos
    nf = r.i32_count(8 + 1 + 4, "display frame")
    frames = []
    for _ in range(nf):
        fname = r.text()
        fname_en = r.text()
        special = r.u8()
        ne = r.count(r.i32(), 1 + min(sizes["bone"], sizes["morph"]), "display frame element")
        items = []
        for _ in range(ne):
            is_morph = r.u8()
            if is_morph > 1:
                raise r.error(f"display frame element type {is_morph} is not 0 or 1", r.pos - 1)
            items.append((bool(is_morph), r.index("morph" if is_morph else "bone")))
        frames.append((fname, fname_en, special, tuple(items)))
    f["display_frames"] = tuple(frames)

    # --- rigid bodies ----------------------------------------------------------------------
    r.section = "rigid bodies"
    offsets["rigid bodies"] = r.pos
    rsz = sizes["rigid"]
    rb_st = struct.Struct("<BHB3f3f3f5fB")
    nr = r.i32_count(8 + bsz + rb_st.size, "rigid body")
    rname, rname_en = [], []
    rbone = np.zeros(nr, np.int32)
    rows = []
    for i in range(nr):
        rname.append(r.text())
        rname_en.append(r.text())
        rbone[i] = r.one(bst)
        rows.append(r.unpack(rb_st))
    ra = np.array(rows, np.float64).reshape(nr, 18)
    f.update(rigid_body_name=tuple(rname), rigid_body_name_en=tuple(rname_en), rigid_body_bone=rbone,
             rigid_body_group=ra[:, 0].astype(np.uint8), rigid_body_collide_mask=ra[:, 1].astype(np.uint16),
             rigid_body_shape=ra[:, 2].astype(np.uint8), rigid_body_size=ra[:, 3:6].astype(np.float32),
             rigid_body_position=ra[:, 6:9].astype(np.float32), rigid_body_rotation=ra[:, 9:12].astype(np.float32),
             rigid_body_mass=ra[:, 12].astype(np.float32), rigid_body_linear_damping=ra[:, 13].astype(np.float32),
             rigid_body_angular_damping=ra[:, 14].astype(np.float32),
             rigid_body_restitution=ra[:, 15].astype(np.float32), rigid_body_friction=ra[:, 16].astype(np.float32),
             rigid_body_mode=ra[:, 17].astype(np.uint8))

    # --- joints ------------------------------------------------------------------------------
    r.section = "joints"
    offsets["joints"] = r.pos
    rst = _IDX_STRUCT[(rsz, False)]
    j_st = struct.Struct("<24f")
    nj = r.i32_count(8 + 1 + 2 * rsz + 96, "joint")
    jname, jname_en = [], []
    jt = np.zeros(nj, np.uint8)
    ja = np.zeros(nj, np.int32)
    jb = np.zeros(nj, np.int32)
    jrows = []
    for i in range(nj):
        jname.append(r.text())
        jname_en.append(r.text())
        jt[i] = r.u8()
        ja[i] = r.one(rst)
        jb[i] = r.one(rst)
        jrows.append(r.unpack(j_st))
    jv = np.array(jrows, np.float32).reshape(nj, 8, 3)
    f.update(joint_name=tuple(jname), joint_name_en=tuple(jname_en), joint_type=jt, joint_body_a=ja,
             joint_body_b=jb, joint_position=jv[:, 0], joint_rotation=jv[:, 1],
             joint_translation_lower=jv[:, 2], joint_translation_upper=jv[:, 3],
             joint_rotation_lower=jv[:, 4], joint_rotation_upper=jv[:, 5],
             joint_spring_translation=jv[:, 6], joint_spring_rotation=jv[:, 7])

    # --- soft bodies (2.1) -------------------------------------------------------------------
    soft = []
    if version >= 2.1 and r.remaining > 0:
        r.section = "soft bodies"
        msz = sizes["material"]
        ns = r.i32_count(8 + 1 + msz + 1 + 2 + 1 + 4 + 4 + 4 + 4 + 4 + 22 * 4 + 4 * 4 + 4 + 4, "soft body")
        sb_st = struct.Struct("<BHBiiffi12f6f4i3f")
        for _ in range(ns):
            nm_ = r.text()
            nme = r.text()
            shape = r.u8()
            mat = r.index("material")
            v = r.unpack(sb_st)
            na = r.count(r.i32(), rsz + vsz + 1, "soft body anchor")
            anchors = tuple((r.index("rigid"), r.index("vertex"), r.u8()) for _ in range(na))
            npin = r.count(r.i32(), vsz, "soft body pin")
            pins = tuple(r.index("vertex") for _ in range(npin))
            soft.append(SoftBodyRecord(nm_, nme, shape, mat, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7],
                                       tuple(v[8:20]), tuple(v[20:26]), tuple(v[26:30]), tuple(v[30:33]),
                                       anchors, pins))
    f["soft_bodies"] = tuple(soft)

    extras = {"format": "pmx", "version": version, "encoding": "utf-8" if enc else "utf-16-le",
              "index_sizes": declared_sizes, "globals": bytes(glob), "magic": magic,
              "ik_link_has_limit_raw": link_flag_raw, "section_offsets": offsets}
    if bone_size_override:
        extras["vertex_bone_index_size_written"] = bone_size_override["vertex_bone"]
    if r.remaining:
        extras["trailing"] = data[r.pos:]
        r.warnings.append(f"{r.remaining} bytes after the last section (byte {r.pos}) kept but ignored")
    f["source_format"] = "pmx"
    f["source_path"] = str(path)
    f["source_extras"] = extras
    f["warnings"] = tuple(r.warnings)
    return f


_MAT_MORPH = [("op", "u1"), ("diffuse", "<f4", 4), ("specular", "<f4", 3), ("power", "<f4"),
              ("ambient", "<f4", 3), ("edge_color", "<f4", 4), ("edge_size", "<f4"), ("tex", "<f4", 4),
              ("sphere", "<f4", 4), ("toon", "<f4", 4)]


def _read_morphs(r: _PmxReader, f: dict, sizes: dict) -> None:
    vi = _idx_dtype(sizes["vertex"], True)
    bi = _idx_dtype(sizes["bone"])
    mi = _idx_dtype(sizes["morph"])
    ti = _idx_dtype(sizes["material"])
    ri = _idx_dtype(sizes["rigid"])
    dts = {
        0: np.dtype([("t", mi), ("w", "<f4")]),
        1: np.dtype([("v", vi), ("o", "<f4", 3)]),
        2: np.dtype([("b", bi), ("t", "<f4", 3), ("q", "<f4", 4)]),
        3: np.dtype([("v", vi), ("o", "<f4", 4)]),
        8: np.dtype([("m", ti)] + _MAT_MORPH),
        10: np.dtype([("r", ri), ("local", "u1"), ("vel", "<f4", 3), ("torque", "<f4", 3)]),
    }
    for k in (4, 5, 6, 7):
        dts[k] = dts[3]
    dts[9] = dts[0]
    n = r.i32_count(8 + 2 + 4, "morph")
    names, names_en = [], []
    panel = np.zeros(n, np.uint8)
    kind = np.zeros(n, np.uint8)
    tables = {"vertex": [], "uv": [], "bone": [], "material": [], "group": [], "impulse": []}
    counts = {k: np.zeros(n, np.int64) for k in tables}
    table_of = {0: "group", 9: "group", 1: "vertex", 2: "bone", 3: "uv", 4: "uv", 5: "uv", 6: "uv", 7: "uv",
                8: "material", 10: "impulse"}
    for i in range(n):
        names.append(r.text())
        names_en.append(r.text())
        p, k = r.u8(), r.u8()
        panel[i] = p
        kind[i] = k
        if k not in dts:
            raise r.error(f"morph {i} ({names[-1]!r}): unknown morph type {k}", r.pos - 1)
        dt = dts[k]
        c = r.count(r.i32(), dt.itemsize, f"morph {i} element")
        t = table_of[k]
        tables[t].append(r.array(dt, c))
        counts[t][i] = c

    def cat(t, dt):
        return np.concatenate(tables[t]) if tables[t] else np.zeros(0, dt)

    def start(t):
        s = np.zeros(n + 1, np.int32)
        np.cumsum(counts[t], out=s[1:])
        return s

    v = cat("vertex", dts[1])
    u = cat("uv", dts[3])
    b = cat("bone", dts[2])
    m = cat("material", dts[8])
    g = cat("group", dts[0])
    im = cat("impulse", dts[10])
    f.update(
        morph_name=tuple(names), morph_name_en=tuple(names_en), morph_panel=panel, morph_kind=kind,
        vertex_morph_start=start("vertex"), vertex_morph_vertex=v["v"].astype(np.int32),
        vertex_morph_offset=np.ascontiguousarray(v["o"]),
        uv_morph_start=start("uv"), uv_morph_vertex=u["v"].astype(np.int32), uv_morph_offset=np.ascontiguousarray(u["o"]),
        bone_morph_start=start("bone"), bone_morph_bone=b["b"].astype(np.int32),
        bone_morph_translation=np.ascontiguousarray(b["t"]), bone_morph_rotation=np.ascontiguousarray(b["q"]),
        material_morph_start=start("material"), material_morph_material=m["m"].astype(np.int32),
        material_morph_op=np.ascontiguousarray(m["op"]), material_morph_diffuse=np.ascontiguousarray(m["diffuse"]),
        material_morph_specular=np.ascontiguousarray(m["specular"]),
        material_morph_specular_power=np.ascontiguousarray(m["power"]),
        material_morph_ambient=np.ascontiguousarray(m["ambient"]),
        material_morph_edge_color=np.ascontiguousarray(m["edge_color"]),
        material_morph_edge_size=np.ascontiguousarray(m["edge_size"]),
        material_morph_texture_tint=np.ascontiguousarray(m["tex"]),
        material_morph_sphere_tint=np.ascontiguousarray(m["sphere"]),
        material_morph_toon_tint=np.ascontiguousarray(m["toon"]),
        group_morph_start=start("group"), group_morph_target=g["t"].astype(np.int32),
        group_morph_weight=np.ascontiguousarray(g["w"]),
        impulse_morph_start=start("impulse"), impulse_morph_rigid_body=im["r"].astype(np.int32),
        impulse_morph_local=im["local"] != 0, impulse_morph_velocity=np.ascontiguousarray(im["vel"]),
        impulse_morph_torque=np.ascontiguousarray(im["torque"]),
    )


# ----------------------------------------------------------------------------------------
# writer

def _min_size(n: int, unsigned: bool) -> int:
    if unsigned:
        return 1 if n <= 255 else 2 if n <= 65535 else 4
    return 1 if n <= 127 else 2 if n <= 32767 else 4


def _needs_21(model) -> bool:
    return bool(model.soft_bodies) or bool(np.isin(model.morph_kind, (9, 10)).any()) or \
        bool((model.joint_type != 0).any()) or bool((model.vertex_deform == 4).any()) or \
        bool((model.material_flags >= 0x20).any())


def write_pmx(model) -> bytes:
    """Serialise a ``Model`` (from any source) as PMX 2.0, or 2.1 when it uses 2.1 features.
    Index sizes and text encoding of a PMX source are kept when the counts still fit."""
    ex = model.source_extras if model.source_format == "pmx" else {}
    V, M, B, N, R = model.num_vertices, model.num_materials, model.num_bones, model.num_morphs, model.num_rigid_bodies
    T = len(model.texture_path)
    counts = {"vertex": V, "texture": T, "material": M, "bone": B, "morph": N, "rigid": R}
    sizes = {k: _min_size(counts[k], k == "vertex") for k in _KIND_ORDER}
    for k, s in (ex.get("index_sizes") or {}).items():
        if k in sizes and s >= sizes[k]:
            sizes[k] = s
    version = ex.get("version") or (2.1 if _needs_21(model) else 2.0)
    if model.soft_bodies:
        version = 2.1
    enc = ex.get("encoding", "utf-16-le")
    utf8 = enc == "utf-8"
    A = model.vertex_additional_uv.shape[1] if model.vertex_additional_uv is not None else 0

    def text(s: str) -> bytes:
        b = s.encode("utf-8", errors="surrogatepass") if utf8 else s.encode("utf-16-le", errors="surrogatepass")
        return I32.pack(len(b)) + b

    ist = {k: _IDX_STRUCT[(sizes[k], k == "vertex")] for k in _KIND_ORDER}
    w = BinaryWriter()
    glob = bytearray(ex.get("globals", b"\0" * 8))
    glob[0] = 1 if utf8 else 0
    glob[1] = A
    for i, k in enumerate(_KIND_ORDER):
        glob[2 + i] = sizes[k]
    w.raw(ex.get("magic", b"PMX "))
    w.f32(2.1 if version >= 2.1 else 2.0)
    w.u8(len(glob))
    w.raw(bytes(glob))
    for s in (model.name, model.name_en, model.comment, model.comment_en):
        w.raw(text(s))

    # vertices (vectorised: one structured record array per deform type, scattered by offset)
    w.i32(V)
    bsz = sizes["bone"]
    idt = _idx_dtype(bsz)
    bi = np.array(model.vertex_bone_index, np.int64)
    patch = ex.get("vertex_bone_index_patch")
    if patch is not None and bi.size == V * 4:
        pos, val = patch
        if len(pos) and pos.max() < bi.size:
            still = bi.ravel()[pos] == 0  # only slots the build zeroed and nobody changed since
            bi.ravel()[pos[still]] = val[still]
    deform = model.vertex_deform
    head = np.dtype([("p", "<f4", 3), ("n", "<f4", 3), ("uv", "<f4", 2), ("auv", "<f4", (A, 4)), ("d", "u1")])
    wdts = {0: [("i", idt, 1)], 1: [("i", idt, 2), ("w", "<f4")], 2: [("i", idt, 4), ("w", "<f4", 4)],
            3: [("i", idt, 2), ("w", "<f4"), ("c", "<f4", 3), ("r0", "<f4", 3), ("r1", "<f4", 3)],
            4: [("i", idt, 4), ("w", "<f4", 4)]}
    rec_size = np.array([head.itemsize + np.dtype(wdts[t]).itemsize + 4 for t in range(5)], np.int64)
    sz = rec_size[deform] if V else np.zeros(0, np.int64)
    offs = np.zeros(V + 1, np.int64)
    np.cumsum(sz, out=offs[1:])
    out = np.zeros(int(offs[-1]), np.uint8)
    for t in np.unique(deform):
        t = int(t)
        sel = np.nonzero(deform == t)[0]
        dt = np.dtype([("h", head)] + wdts[t] + [("e", "<f4")])
        rec = np.zeros(len(sel), dt)
        rec["h"]["p"] = model.vertex_position[sel]
        rec["h"]["n"] = model.vertex_normal[sel]
        rec["h"]["uv"] = model.vertex_uv[sel]
        if A:
            rec["h"]["auv"] = model.vertex_additional_uv[sel]
        rec["h"]["d"] = t
        k = 1 if t == 0 else 2 if t in (1, 3) else 4
        rec["i"] = bi[sel, :k].reshape(rec["i"].shape)
        if t in (1, 3):
            rec["w"] = model.vertex_bone_weight[sel, 0]
        elif t in (2, 4):
            rec["w"] = model.vertex_bone_weight[sel]
        if t == 3:
            rec["c"] = model.vertex_sdef_c[sel]
            rec["r0"] = model.vertex_sdef_r0[sel]
            rec["r1"] = model.vertex_sdef_r1[sel]
        rec["e"] = model.vertex_edge_scale[sel]
        out[offs[sel][:, None] + np.arange(dt.itemsize)] = rec.view(np.uint8).reshape(len(sel), dt.itemsize)
    w.raw(out.tobytes())

    # faces
    fv = model.face_vertex_index
    w.i32(fv.size)
    w.array(fv.astype(_idx_dtype(sizes["vertex"], True)))
    # textures
    w.i32(T)
    for s in model.texture_path:
        w.raw(text(s))
    # materials
    w.i32(M)
    mat_st = struct.Struct("<4f3ff3fB4ff")
    fs = model.material_face_start
    for m in range(M):
        w.raw(text(model.material_name[m]))
        w.raw(text(model.material_name_en[m]))
        w.pack(mat_st, *model.material_diffuse[m], *model.material_specular[m], model.material_specular_power[m],
               *model.material_ambient[m], int(model.material_flags[m]), *model.material_edge_color[m],
               model.material_edge_size[m])
        w.pack(ist["texture"], int(model.material_texture_index[m]))
        w.pack(ist["texture"], int(model.material_sphere_index[m]))
        w.u8(int(model.material_sphere_mode[m]))
        shared = bool(model.material_toon_shared[m])
        w.u8(1 if shared else 0)
        if shared:
            w.u8(int(model.material_toon_index[m]) & 0xFF)
        else:
            w.pack(ist["texture"], int(model.material_toon_index[m]))
        w.raw(text(model.material_memo[m]))
        w.i32(int(fs[m + 1] - fs[m]) * 3)
    # bones
    w.i32(B)
    bst = ist["bone"]
    raw_lim = ex.get("ik_link_has_limit_raw")
    if raw_lim is None or len(raw_lim) != len(model.ik_link_bone) or not np.array_equal(raw_lim != 0, model.ik_link_has_limit):
        raw_lim = model.ik_link_has_limit.astype(np.uint8)
    for b in range(B):
        w.raw(text(model.bone_name[b]))
        w.raw(text(model.bone_name_en[b]))
        w.pack(F32x3, *model.bone_position[b])
        w.pack(bst, int(model.bone_parent[b]))
        fl = int(model.bone_flags[b])
        w.i32(int(model.bone_layer[b]))
        w.u16(fl)
        if fl & 0x0001:
            w.pack(bst, int(model.bone_tail_index[b]))
        else:
            w.pack(F32x3, *model.bone_tail_offset[b])
        if fl & 0x0300:
            w.pack(bst, int(model.bone_append_parent[b]))
            w.f32(float(model.bone_append_ratio[b]))
        if fl & 0x0400:
            w.pack(F32x3, *model.bone_fixed_axis[b])
        if fl & 0x0800:
            w.pack(F32x3, *model.bone_local_axis_x[b])
            w.pack(F32x3, *model.bone_local_axis_z[b])
        if fl & 0x2000:
            w.i32(int(model.bone_external_key[b]))
        if fl & 0x0020:
            k = int(model.bone_ik[b])
            if k < 0:
                raise FormatError(f"bone {model.bone_name[b]!r} has the IK flag but no IK solver", section="bones")
            w.pack(bst, int(model.ik_target[k]))
            w.i32(int(model.ik_loop_count[k]))
            w.f32(float(model.ik_limit_angle[k]))
            s0, s1 = int(model.ik_link_start[k]), int(model.ik_link_start[k + 1])
            w.i32(s1 - s0)
            for i in range(s0, s1):
                w.pack(bst, int(model.ik_link_bone[i]))
                w.u8(int(raw_lim[i]))
                if raw_lim[i]:
                    w.pack(F32x3, *model.ik_link_lower[i])
                    w.pack(F32x3, *model.ik_link_upper[i])
    _write_morphs(w, model, sizes, text)
    # display frames
    w.i32(len(model.display_frames))
    for name, name_en, special, items in model.display_frames:
        w.raw(text(name))
        w.raw(text(name_en))
        w.u8(int(special))
        w.i32(len(items))
        for is_morph, idx in items:
            w.u8(1 if is_morph else 0)
            w.pack(ist["morph" if is_morph else "bone"], int(idx))
    # rigid bodies
    w.i32(R)
    rb_st = struct.Struct("<BHB3f3f3f5fB")
    for i in range(R):
        w.raw(text(model.rigid_body_name[i]))
        w.raw(text(model.rigid_body_name_en[i]))
        w.pack(bst, int(model.rigid_body_bone[i]))
        w.pack(rb_st, int(model.rigid_body_group[i]), int(model.rigid_body_collide_mask[i]),
               int(model.rigid_body_shape[i]), *model.rigid_body_size[i], *model.rigid_body_position[i],
               *model.rigid_body_rotation[i], model.rigid_body_mass[i], model.rigid_body_linear_damping[i],
               model.rigid_body_angular_damping[i], model.rigid_body_restitution[i], model.rigid_body_friction[i],
               int(model.rigid_body_mode[i]))
    # joints
    J = model.num_joints
    w.i32(J)
    for j in range(J):
        w.raw(text(model.joint_name[j]))
        w.raw(text(model.joint_name_en[j]))
        w.u8(int(model.joint_type[j]))
        w.pack(ist["rigid"], int(model.joint_body_a[j]))
        w.pack(ist["rigid"], int(model.joint_body_b[j]))
        for a in (model.joint_position, model.joint_rotation, model.joint_translation_lower,
                  model.joint_translation_upper, model.joint_rotation_lower, model.joint_rotation_upper,
                  model.joint_spring_translation, model.joint_spring_rotation):
            w.pack(F32x3, *a[j])
    if version >= 2.1:
        sb_st = struct.Struct("<BHBiiffi12f6f4i3f")
        w.i32(len(model.soft_bodies))
        for sb in model.soft_bodies:
            w.raw(text(sb.name))
            w.raw(text(sb.name_en))
            w.u8(sb.shape)
            w.pack(ist["material"], sb.material)
            w.pack(sb_st, sb.group, sb.collide_mask, sb.flags, sb.b_link_distance, sb.cluster_count,
                   sb.total_mass, sb.collision_margin, sb.aero_model, *sb.config, *sb.cluster, *sb.iteration,
                   *sb.material_coef)
            w.i32(len(sb.anchors))
            for rb, vx, near in sb.anchors:
                w.pack(ist["rigid"], rb)
                w.pack(ist["vertex"], vx)
                w.u8(near)
            w.i32(len(sb.pins))
            for vx in sb.pins:
                w.pack(ist["vertex"], vx)
    if ex.get("trailing"):
        w.raw(ex["trailing"])
    return w.getvalue()


def _write_morphs(w: BinaryWriter, model, sizes: dict, text) -> None:
    vi = _idx_dtype(sizes["vertex"], True)
    bi = _idx_dtype(sizes["bone"])
    mi = _idx_dtype(sizes["morph"])
    ti = _idx_dtype(sizes["material"])
    ri = _idx_dtype(sizes["rigid"])
    N = model.num_morphs
    w.i32(N)
    for i in range(N):
        w.raw(text(model.morph_name[i]))
        w.raw(text(model.morph_name_en[i]))
        k = int(model.morph_kind[i])
        w.u8(int(model.morph_panel[i]))
        w.u8(k)
        if k in (0, 9):
            s = slice(model.group_morph_start[i], model.group_morph_start[i + 1])
            a = np.zeros(s.stop - s.start, [("t", mi), ("w", "<f4")])
            a["t"], a["w"] = model.group_morph_target[s], model.group_morph_weight[s]
        elif k == 1:
            s = slice(model.vertex_morph_start[i], model.vertex_morph_start[i + 1])
            a = np.zeros(s.stop - s.start, [("v", vi), ("o", "<f4", 3)])
            a["v"], a["o"] = model.vertex_morph_vertex[s], model.vertex_morph_offset[s]
        elif k == 2:
            s = slice(model.bone_morph_start[i], model.bone_morph_start[i + 1])
            a = np.zeros(s.stop - s.start, [("b", bi), ("t", "<f4", 3), ("q", "<f4", 4)])
            a["b"], a["t"], a["q"] = model.bone_morph_bone[s], model.bone_morph_translation[s], model.bone_morph_rotation[s]
        elif 3 <= k <= 7:
            s = slice(model.uv_morph_start[i], model.uv_morph_start[i + 1])
            a = np.zeros(s.stop - s.start, [("v", vi), ("o", "<f4", 4)])
            a["v"], a["o"] = model.uv_morph_vertex[s], model.uv_morph_offset[s]
        elif k == 8:
            s = slice(model.material_morph_start[i], model.material_morph_start[i + 1])
            a = np.zeros(s.stop - s.start, [("m", ti)] + _MAT_MORPH)
            a["m"], a["op"] = model.material_morph_material[s], model.material_morph_op[s]
            a["diffuse"], a["specular"] = model.material_morph_diffuse[s], model.material_morph_specular[s]
            a["power"], a["ambient"] = model.material_morph_specular_power[s], model.material_morph_ambient[s]
            a["edge_color"], a["edge_size"] = model.material_morph_edge_color[s], model.material_morph_edge_size[s]
            a["tex"], a["sphere"] = model.material_morph_texture_tint[s], model.material_morph_sphere_tint[s]
            a["toon"] = model.material_morph_toon_tint[s]
        else:
            s = slice(model.impulse_morph_start[i], model.impulse_morph_start[i + 1])
            a = np.zeros(s.stop - s.start, [("r", ri), ("local", "u1"), ("vel", "<f4", 3), ("torque", "<f4", 3)])
            a["r"], a["local"] = model.impulse_morph_rigid_body[s], model.impulse_morph_local[s]
            a["vel"], a["torque"] = model.impulse_morph_velocity[s], model.impulse_morph_torque[s]
        w.i32(len(a))
        w.array(a)
