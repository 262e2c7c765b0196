"""Annotated renders (#25) against the posed mesh: the skinned vertices ``mmdkit pose --vertices``
writes for the same frames, projected with the annotated render's cameras.json, land where the
render drew them — for the front-most vertices the depth PNG holds their camera z (within 1 mm +
0.1 %, + the PNG's 0.5 mm rounding) and the mask their character's id, on ≥ 99.5 % of them.

Real models with physics (Gene, Mei), a crowd of three (character k plays k × 7 frames ahead: its
vertices are ``mmdkit pose --frames`` shifted by 7k, placed at ``crowd_offsets``), three ring views.
Which vertices are front-most is decided here, without the render: a ray from the camera to the
vertex that no drawn surface (of any character; drawn: material alpha × the texture's alpha at the
crossing (nearest texel, repeating) ≥ 0.5, and facing the camera unless the material is
double-sided) crosses in front of it; the vertex is on a drawn triangle and its own texel is drawn. A
vertex lies up to half a pixel from the pixel centres the rasteriser samples, so it is compared
where its surface covers them: the rays through the 4 pixel centres around it first hit (same ray
cast) its own character within one triangle of it. There the mask holds its id at all four, and the
depth PNG at the nearest of them equals the vertex's z carried to that pixel along one of its own
triangles (at most 0.71 pixel: a first-order step, exact on a flat surface). ``--correspondence``
is checked at the same pixels against the same ray cast.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import mmdkit
from mmdkit.model.materials import material_table
from mmdkit.model.textures import model_folder, read_texture, texture_source
from mmdkit.model.space import MMD_UNITS_PER_METRE
from mmdkit.runtime.crowd import CROWD_FRAME_OFFSET, crowd_offsets, crowd_spacing, rest_box

W, H, CROWD, VIEWS = 480, 360, 3, 3
FRAMES = (0, 20, 10)  # 0:20:10, three frames
FLIP = np.array([1.0, 1.0, -1.0])
CORRESPONDENCE = ("vertex", "face", "uv_u", "uv_v")
UV_TOLERANCE = 1e-3
"""UV: the PNG's 1/65535 steps, float32 interpolation and the vertex positions of the CLI's pose."""
MODELS = {"gene": ("gene/Gene_light.pmx", "gene/motion/01_happy.vmd"),
          "mei": ("mei/Model/mei/mei.pmd", "mei/Motion/mei_bye/mei_bye.vmd")}


def _mmdkit(*args):
    r = subprocess.run([sys.executable, "-m", "mmdkit", *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module", params=sorted(MODELS))
def scene(request, assets, tmp_path_factory):
    """The annotated folder and, per character, the CLI's skinned vertices (F,V,3) MMD units."""
    model_path, motion_path = (assets / p for p in MODELS[request.param])
    tmp = tmp_path_factory.mktemp(request.param)
    a, b, step = FRAMES
    _mmdkit("render", model_path, motion_path, "--frames", f"{a}:{b}:{step}", "--crowd", CROWD, "--annotate",
            "--views", VIEWS, "--correspondence", "--size", f"{W}x{H}", "-q", "-o", f"{tmp / 'out'}/")
    verts = []
    for k in range(CROWD):
        lag = int(k * CROWD_FRAME_OFFSET)
        _mmdkit("pose", model_path, motion_path, "--frames", f"{a + lag}:{b + lag}:{step}", "--vertices",
                "--no-compress", "-q", "-o", tmp / f"c{k}.npz")
        verts.append(np.load(tmp / f"c{k}.npz")["vertex_position"].astype(np.float64))
    model = mmdkit.load(model_path)
    offsets = crowd_offsets(CROWD, crowd_spacing(*rest_box(model))).astype(np.float64)
    return dict(out=tmp / "out", model=model, verts=[v + o for v, o in zip(verts, offsets)],
                cameras=json.loads((tmp / "out" / "cameras.json").read_text()))


def first_hits(ends, tri, drawn, skip, K, cell=8.0):
    """Nearest crossing of rays from the camera (origin) towards ``ends`` (R,3) camera space, with
    the triangles tri (T,3,3) camera space that are ``drawn`` (T,) bool, leaving out for ray r the
    triangle ids skip[r] (R,S) (−1: none): (R,) camera z of the crossing (inf: none), the id of
    the triangle crossed (−1) and (R,3) the crossing's barycentric weights of its corners. Triangles
    are binned by their pixel bounding box (``cell`` pixels)."""
    z = tri[..., 2]
    ids = np.flatnonzero(drawn & (z > 0.01).all(1))
    uvw = tri[ids] @ K.T
    pix = uvw[..., :2] / uvw[..., 2:]
    lo, hi = np.floor(pix.min(1) / cell).astype(np.int64), np.floor(pix.max(1) / cell).astype(np.int64)
    nx, ny = hi[:, 0] - lo[:, 0] + 1, hi[:, 1] - lo[:, 1] + 1
    small = nx * ny <= 1024  # a triangle across the whole picture is a plane too near to matter here
    ids, lo, nx, ny = ids[small], lo[small], nx[small], ny[small]
    count = nx * ny
    rep = np.repeat(np.arange(len(ids)), count)
    k = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    key = (lo[rep, 0] + k % nx[rep]) * 1_000_003 + lo[rep, 1] + k // nx[rep]
    order = np.argsort(key, kind="stable")
    key, tid = key[order], ids[rep[order]]
    e = ends @ K.T
    e = np.floor(e[:, :2] / e[:, 2:] / cell).astype(np.int64)
    start, stop = np.searchsorted(key, e[:, 0] * 1_000_003 + e[:, 1]), np.searchsorted(key, e[:, 0] * 1_000_003
                                                                                        + e[:, 1], "right")
    n = stop - start
    ray = np.repeat(np.arange(len(ends)), n)
    t_id = tid[start[ray] + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)]
    keep = ~(skip[ray] == t_id[:, None]).any(1)
    ray, t_id = ray[keep], t_id[keep]
    d, T = ends[ray], tri[t_id]  # Möller–Trumbore, the ray's end at t = 1
    e1, e2 = T[:, 1] - T[:, 0], T[:, 2] - T[:, 0]
    p = np.cross(d, e2)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.einsum("ik,ik->i", e1, p)
        s = -T[:, 0]
        u = np.einsum("ik,ik->i", s, p) * inv
        q = np.cross(s, e1)
        v = np.einsum("ik,ik->i", d, q) * inv
        t = np.einsum("ik,ik->i", e2, q) * inv
    hit_z = np.where((u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0), t * d[:, 2], np.inf)
    best = np.full(len(ends), np.inf)
    np.minimum.at(best, ray, hit_z)
    which = np.full(len(ends), -1)
    won = np.isfinite(hit_z) & (hit_z == best[ray])
    which[ray[won]] = t_id[won]
    weights = np.zeros((len(ends), 3))
    weights[ray[won]] = np.stack([1 - u[won] - v[won], u[won], v[won]], 1)
    return best, which, weights


def first_drawn_hits(ends, tri, drawn, skip, K, see_through, rounds=8):
    """``first_hits`` that looks on through the texels a crossing finds see-through:
    ``see_through(triangle ids (n,), barycentric weights (n,3))`` → (n,) bool; such a triangle is
    left out of that ray and the ray cast again (at most ``rounds`` times)."""
    best, which, weights = first_hits(ends, tri, drawn, skip, K)
    rays = np.arange(len(ends))
    for _ in range(rounds):
        hit = which[rays] >= 0
        clear = np.zeros(len(rays), bool)
        clear[hit] = see_through(which[rays[hit]], weights[rays[hit]])
        rays = rays[clear]
        if not len(rays):
            break
        skip = np.concatenate([skip, np.full((len(skip), 1), -1)], 1)
        skip[rays, -1] = which[rays]
        best[rays], which[rays], weights[rays] = first_hits(ends[rays], tri, drawn, skip[rays], K)
    return best, which, weights


def _alpha_lookup(model, faces, table, material, alpha, ring):
    """``see_through(triangle ids, weights)`` of the label pass's cut for the model's triangles
    (crowd ids: id mod the model's triangles): material alpha × texture alpha < 0.5 at the UV the
    weights give (the model's UV, DirectX's v down; the nearest texel, repeating); and per vertex
    whether its own texel is see-through (V,) bool (on the first of its faces, ``ring[:, 0]``)."""
    folder, embedded = model_folder(model), model.source_extras.get("embedded_textures")
    images = []
    for im in table.images:
        src = texture_source(im.texture, folder, embedded) if im.texture else None
        picture = None
        if src is not None:
            with read_texture(src, im.texture)[0] as img:
                picture = np.asarray(img.convert("RGBA"))[..., 3].astype(np.float64) / 255.0
        images.append(picture)
    uv = np.asarray(model.vertex_uv, np.float64)
    F = len(faces)

    def see_through(ids, weights):
        f = ids % F
        at = np.einsum("nk,nkj->nj", weights, uv[faces[f]])
        out = alpha[material[f]] < 0.5
        for m in np.unique(material[f]):
            if images[m] is not None:
                sel = material[f] == m
                h, w = images[m].shape
                col = np.floor(at[sel, 0] * w).astype(np.int64) % w
                row = np.floor(at[sel, 1] * h).astype(np.int64) % h
                out[sel] |= alpha[m] * images[m][row, col] < 0.5
        return out

    vertex_clear = np.zeros(model.num_vertices, bool)
    v = np.flatnonzero(ring[:, 0] >= 0)
    own = ring[v, 0]
    vertex_clear[v] = see_through(own, (faces[own] == v[:, None]).astype(np.float64))  # weight 1 on the vertex
    return see_through, vertex_clear


def _ids(picture):
    """docs/dataset.md's decode rule of the vertex/face pictures: R + 256·G + 65536·B."""
    p = picture.astype(np.int64)
    return p[..., 0] + 256 * p[..., 1] + 65536 * p[..., 2]


def _mesh_tables(model):
    """Per face its material's (opaque, culls), per vertex its faces (V, S) padded with −1, and
    ``_alpha_lookup``'s see-through test and see-through vertices."""
    faces = np.asarray(model.face_vertex_index, np.int64)
    table = material_table(model)
    material = np.repeat(np.arange(table.num_materials), np.diff(table.face_start))
    alpha = np.asarray(model.material_diffuse, np.float64)[:, 3]
    opaque = alpha[material] >= 0.5  # the label pass's cut (gpass.ALPHA_CUT) of the material's alpha
    culls = np.array([table.culls(m, alpha[m]) for m in range(table.num_materials)], bool)[material]
    order = np.argsort(faces.ravel(), kind="stable")
    vertex = faces.ravel()[order]
    start = np.searchsorted(vertex, np.arange(model.num_vertices))
    slot = np.arange(len(vertex)) - start[vertex]
    ring = np.full((model.num_vertices, int(slot.max()) + 1), -1, np.int64)
    ring[vertex, slot] = order // 3
    return (faces, opaque, culls, ring) + _alpha_lookup(model, faces, table, material, alpha, ring)


@pytest.fixture(scope="module")
def counts(scene):
    """Every view and frame: sampled vertices of each character projected and compared with the
    label pictures (the module docstring); returns how many passed each check."""
    model, cameras = scene["model"], scene["cameras"]
    faces, opaque, culls, ring, see_through, vertex_clear = _mesh_tables(model)
    F, V = len(faces), model.num_vertices
    uv_table = np.asarray(model.vertex_uv, np.float64)
    rng = np.random.default_rng(7)
    n = dict.fromkeys(("seen", "seen_in_mask", "checked", "depth", "mask", "face", "vertex", "uv", "names_it",
                       "names_it_around", "background_not_0", "foreground_0"), 0)
    for c, view in enumerate(cameras["views"]):
        K = np.array(view["K"])
        Kinv = np.linalg.inv(K)
        for i, fr in enumerate(view["frames"]):
            R, t = np.array(fr["R"]), np.array(fr["t"])
            world = [v[i] for v in scene["verts"]]  # MMD units
            cam = np.concatenate([(p * FLIP / MMD_UNITS_PER_METRE) @ R.T + t for p in world])  # (N·V,3) metres
            eye = (-R.T @ t) * MMD_UNITS_PER_METRE * FLIP  # the camera in MMD space
            corners = np.concatenate([p[faces] for p in world])
            facing = np.einsum("ij,ij->i", np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]),
                               eye - corners[:, 0]) > 0
            drawn = np.tile(opaque, CROWD) & (facing | ~np.tile(culls, CROWD))
            tri = np.concatenate([cam[k * V:(k + 1) * V][faces] for k in range(CROWD)])
            folder = scene["out"] / f"view_{c:02d}"
            depth = np.array(Image.open(folder / "depth" / f"{i:06d}.png")).astype(np.float64)
            mask = np.array(Image.open(folder / "mask" / f"{i:06d}.png"))
            corr = {kind: np.array(Image.open(folder / kind / f"{i:06d}.png")) for kind in CORRESPONDENCE}
            background = mask == 0
            n["background_not_0"] += sum(int((p[background] != 0).sum()) for p in corr.values())
            n["foreground_0"] += sum(int((_ids(corr[k])[~background] == 0).sum()) for k in ("vertex", "face"))
            # sampled vertices of every character: character ch, vertex pick, their faces (crowd ids)
            ch = np.repeat(np.arange(CROWD), 1500)
            pick = np.concatenate([rng.choice(V, 1500, replace=False) for _ in range(CROWD)])
            own = np.where(ring[pick] >= 0, ring[pick] + ch[:, None] * F, -1)
            P = cam[ch * V + pick]
            uvw = P @ K.T
            uv = uvw[:, :2] / uvw[:, 2:]
            inside = (P[:, 2] > 0) & (uv >= 0).all(1) & (uv[:, 0] <= W - 1) & (uv[:, 1] <= H - 1)
            on_drawn = ((own >= 0) & drawn[np.maximum(own, 0)]).any(1) & ~vertex_clear[pick]
            front, _, _ = first_drawn_hits(P, tri, drawn, own, K, see_through)
            visible = inside & on_drawn & (front >= P[:, 2] - 0.0005)
            ch, pick, own, P, uv = ch[visible], pick[visible], own[visible], P[visible], uv[visible]
            # the 4 pixel centres around each vertex, and what their rays hit first
            x0 = np.minimum(np.floor(uv[:, 0]).astype(int), W - 2)
            y0 = np.minimum(np.floor(uv[:, 1]).astype(int), H - 2)
            px, py = x0[:, None] + [0, 1, 0, 1], y0[:, None] + [0, 0, 1, 1]
            rays = np.stack([px, py, np.ones_like(px)], -1) @ Kinv.T  # (n,4,3), z = 1
            _, hit, bary = first_drawn_hits(rays.reshape(-1, 3) * 100.0, tri, drawn,
                                            np.full((rays.size // 3, 1), -1), K, see_through)
            hit, bary = hit.reshape(-1, 4), bary.reshape(-1, 4, 3)
            near_ids = np.where(np.repeat(own >= 0, 3, 1), faces[np.maximum(own, 0) % F].reshape(len(own), -1), -2)
            hit_v = np.where(hit[..., None] >= 0, faces[np.maximum(hit, 0) % F], -3)
            around = ((hit >= 0) & (hit // F == ch[:, None])
                      & (hit_v[..., None] == near_ids[:, None, None, :]).any((-1, -2))).all(1)
            id_around = mask[py, px] == ch[:, None] + 1
            n["seen"] += len(pick)
            n["seen_in_mask"] += int(id_around.any(1).sum())
            # the depth along the nearest pixel's ray of the planes of the vertex's own triangles
            near = np.argmin((px - uv[:, :1]) ** 2 + (py - uv[:, 1:]) ** 2, 1)
            r = np.arange(len(near))
            T = tri[np.maximum(own, 0)]
            normal = np.cross(T[..., 1, :] - T[..., 0, :], T[..., 2, :] - T[..., 0, :])
            with np.errstate(divide="ignore", invalid="ignore"):
                plane = np.einsum("nsk,nsk->ns", normal, T[..., 0, :]) / np.einsum("nsk,nk->ns", normal,
                                                                                 rays[r, near]) * 1000
            plane = np.where((own >= 0) & np.isfinite(plane), plane, np.inf)
            z_mm = P[:, 2] * 1000
            png = depth[py[r, near], px[r, near]]
            good = (np.abs(png[:, None] - plane) <= 1.0 + 0.001 * z_mm[:, None] + 0.5).any(1)
            n["checked"] += int(around.sum())
            n["depth"] += int((around & good).sum())
            n["mask"] += int((around & id_around.all(1)).sum())
            # the correspondence there: the triangle the ray cast crosses at that pixel, its corner
            # nearest the crossing, the model's UV interpolated at the crossing
            y, x, f = py[r, near], px[r, near], hit[r, near]
            vertex, face = (_ids(corr[kind])[y, x] - 1 for kind in ("vertex", "face"))
            corners = faces[np.maximum(f, 0) % F]  # (n,3) vertex ids
            w, crossed = bary[r, near], tri[np.maximum(f, 0)]
            point = np.einsum("nk,nkj->nj", w, crossed)
            nearest = corners[r, np.argmin(np.linalg.norm(crossed - point[:, None], axis=2), 1)]
            uv_model = np.clip(np.einsum("nk,nkj->nj", w, uv_table[corners]), 0.0, 1.0)
            uv_png = np.stack([corr["uv_u"][y, x], corr["uv_v"][y, x]], 1) / 65535.0
            n["face"] += int((around & (face == f % F)).sum())
            n["vertex"] += int((around & (vertex == nearest)).sum())
            n["uv"] += int((around & (np.abs(uv_png - uv_model) <= UV_TOLERANCE).all(1)).sum())
            # the vertex named, or a triangle containing it: at the nearest pixel, at one of the four
            v4, f4 = (_ids(corr[kind])[py, px] - 1 for kind in ("vertex", "face"))
            names = (v4 == pick[:, None]) | (faces[np.maximum(f4, 0)] == pick[:, None, None]).any(-1)
            n["names_it"] += int((around & names[r, near]).sum())
            n["names_it_around"] += int((around & names.any(1)).sum())
    return n


def test_projected_vertices_land_on_depth_and_mask(counts):
    n = counts
    assert n["checked"] >= 1000, n  # enough front-most vertices with their surface around them
    assert n["depth"] >= 0.995 * n["checked"] and n["mask"] >= 0.995 * n["checked"], n
    # every front-most vertex (also at silhouettes): its character at one of the 4 pixels around it
    assert n["seen_in_mask"] >= 0.985 * n["seen"], n


def test_correspondence_names_the_vertex_its_triangle_and_uv(counts):
    """--correspondence: 0 on the background, ids on every character pixel; at the pixel nearest a
    front-most vertex the face picture names the triangle the ray cast crosses there (≥ 99 %: a pixel
    centre on a shared edge may go to either triangle), the vertex picture that triangle's corner
    nearest the crossing and the UV pictures the model's UV there within ``UV_TOLERANCE`` (≥ 99.5 %);
    one of the four pixels around the vertex names it or a triangle containing it (≥ 98 %: the
    triangles of a vertex can be smaller than a pixel and cover none of their centres)."""
    n = counts
    assert n["background_not_0"] == 0 and n["foreground_0"] == 0, n
    assert n["face"] >= 0.99 * n["checked"], n
    assert n["vertex"] >= 0.995 * n["checked"] and n["uv"] >= 0.995 * n["checked"], n
    assert n["names_it_around"] >= 0.98 * n["checked"], n
