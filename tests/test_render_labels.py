"""Annotated renders (#25): one pass of Gene (physics on, a crowd of two) seen by a ring of four
cameras and an MMD camera, with the npz export of the same pass (skinned vertices, every bone) as
the reference the labels are checked against: depth against the vertices' camera z, masks and
parts, COCO keypoints read by pycocotools, visibility against occlusion, joints3d against the
export and against triangulation of the keypoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from pycocotools.coco import COCO

import mmdkit
from mmdkit.animation.builder import MotionBuilder
from mmdkit.model.space import MMD_UNITS_PER_METRE
from mmdkit.render.labels.keypoints import KEYPOINT_NAMES, SKELETON
from mmdkit.render.labels.parts import PART, PART_NAMES
from mmdkit.runtime.crowd import crowd_offsets, crowd_spacing, rest_box
from mmdkit.runtime.take import Output, Take

W, H = 320, 240
FRAMES = "0:20:10"  # 3 frames
FLIP = np.array([1.0, 1.0, -1.0])


@pytest.fixture(scope="module")
def run(assets, tmp_path_factory):
    """The annotated folder, the npz of the same pass and the loaded files."""
    tmp = tmp_path_factory.mktemp("labels")
    cam = MotionBuilder()
    cam.add_camera_key(0, -45.0, (0.0, 11.0, 0.0), (0.15, 0.4, 0.0), fov=35)
    cam.add_camera_key(20, -35.0, (-3.0, 10.0, 0.0), (0.05, -0.3, 0.0), fov=25)
    take = Take(assets / "gene" / "Gene_light.pmx", assets / "gene" / "motion" / "01_happy.vmd", camera=cam.build(),
                frames=FRAMES, crowd=2,
                outputs=(Output(str(tmp / "out") + "/",
                                {"annotate": True, "views": 4, "size": (W, H), "normals": True}),
                         Output(str(tmp / "ref.npz"), {"vertices": True})))
    info = mmdkit.run(take, warn=lambda *a: None)
    out = tmp / "out"
    model = mmdkit.load(assets / "gene" / "Gene_light.pmx")
    offset = crowd_offsets(2, crowd_spacing(*rest_box(model)))[0].astype(np.float64)  # character 1's place
    return dict(out=out, info=info, offset=offset, model=model, ref=np.load(tmp / "ref.npz"),
                cameras=json.loads((out / "cameras.json").read_text()),
                labels=json.loads((out / "labels.json").read_text()), joints=np.load(out / "joints3d.npz"),
                coco=COCO(str(out / "keypoints.json")))


def _png(run, kind, view, i):
    return np.array(Image.open(run["out"] / f"view_{view:02d}" / kind / f"{i:06d}.png"))


def _krt(run, view, i):
    v = run["cameras"]["views"][view]
    fr = v["frames"][i]
    return np.array(fr.get("K", v["K"])), np.array(fr["R"]), np.array(fr["t"])


def _project(points_mmd, K, R, t):
    """(N,3) MMD points → (N,2) pixels, (N,) camera z metres."""
    cam = (points_mmd * FLIP / MMD_UNITS_PER_METRE) @ R.T + t
    uvw = cam @ K.T
    return uvw[:, :2] / uvw[:, 2:], cam[:, 2]


def test_files_and_views(run):
    names = [v["name"] for v in run["cameras"]["views"]]
    assert names == ["ring_00", "ring_01", "ring_02", "ring_03", "mmd_camera"]
    assert run["info"][0]["views"] == 5 and run["info"][0]["frames"] == 3
    assert run["labels"]["parts"] == {str(i): n for i, n in enumerate(PART_NAMES)}
    assert set(run["labels"]["keypoints"]["derived"]) == {"nose", "left_ear", "right_ear"}
    for v in run["cameras"]["views"]:
        assert (v["width"], v["height"]) == (W, H) and len(v["frames"]) == 3
        for fr in v["frames"]:  # R is a rotation
            R = np.array(fr["R"])
            assert np.allclose(R @ R.T, np.eye(3), atol=1e-6) and np.isclose(np.linalg.det(R), 1.0)
    mmd = run["cameras"]["views"][4]["frames"]
    assert abs(mmd[0]["K"][1][1] - (H / 2) / np.tan(np.radians(35) / 2)) < 1e-3  # fov 35° at frame 0


def test_pngs_hold_the_written_values(run):
    seen_ids = set()
    for view in range(5):
        for i in range(3):
            depth, mask, parts = (_png(run, k, view, i) for k in ("depth", "mask", "parts"))
            assert depth.dtype == np.uint16 and mask.dtype == np.uint8 and parts.dtype == np.uint8
            assert _png(run, "rgb", view, i).shape == (H, W, 3)
            fg = mask > 0
            assert ((depth > 0) == fg).all() and ((parts > 0) == fg).all()  # parts cover every mask pixel
            assert set(np.unique(mask)) <= {0, 1, 2} and parts.max() < len(PART_NAMES)
            seen_ids |= set(np.unique(mask[fg]).tolist())
    assert seen_ids == {1, 2}  # a crowd of two: two instance ids
    front = _png(run, "parts", 0, 0)
    assert {PART["head"], PART["hair"], PART["torso"], PART["left_hand"], PART["right_lower_leg"]} <= set(
        np.unique(front).tolist())


def _ray_hits(tri, rays):
    """Depths (rays, triangles) along each ray (direction with z = 1, from the camera) where it
    crosses each triangle (tri (T,3,3) camera space), NaN where it misses (Möller–Trumbore)."""
    a, e1, e2 = tri[:, 0], tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    p = np.cross(rays[:, None, :], e2[None])
    det = np.einsum("tk,rtk->rt", e1, p)
    inv = 1.0 / np.where(np.abs(det) < 1e-15, np.nan, det)
    s = -a[None]
    u = np.einsum("rtk,rtk->rt", s, p) * inv
    q = np.cross(s, e1[None])
    v = np.einsum("rk,rtk->rt", rays, q) * inv
    t = np.einsum("tk,rtk->rt", e2, q) * inv
    return np.where((u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0), t, np.nan)


@pytest.mark.parametrize("view", [0, 1, 2, 4])
def test_depth_is_the_mesh_along_each_pixel_ray(run, assets, view):
    """At sampled pixels the mask gives to character 1, the ray through the pixel centre (K, R, t of
    cameras.json) crosses character 1's mesh (the export's skinned vertices of the same pass) at
    the depth the PNG holds, within 1 mm + 0.1 % (+ the PNG's 0.5 mm rounding), on ≥ 99.5 % of
    them; and that crossing is the nearest on ≥ 98 % (the others lie behind see-through texels)."""
    faces = np.asarray(run["model"].face_vertex_index, np.int64)
    verts = np.asarray(run["ref"]["vertex_position"], np.float64)[0] + run["offset"]
    K, R, t = _krt(run, view, 0)
    cam = (verts * FLIP / MMD_UNITS_PER_METRE) @ R.T + t
    depth = _png(run, "depth", view, 0).astype(np.float64)
    ys, xs = np.nonzero(_png(run, "mask", view, 0) == 1)
    pick = np.random.default_rng(view).choice(len(xs), size=min(200, len(xs)), replace=False)
    xs, ys = xs[pick], ys[pick]
    rays = np.stack([xs, ys, np.ones_like(xs)], 1).astype(np.float64) @ np.linalg.inv(K).T
    hits = _ray_hits(cam[faces], rays) * 1000  # mm along z
    d = depth[ys, xs][:, None]
    tol = 1.5 + 0.001 * d
    some = (np.abs(hits - d) <= tol).any(1)
    first = np.min(np.where(np.isnan(hits), np.inf, hits), 1)
    nearest = np.abs(first - d[:, 0]) <= tol[:, 0]
    assert some.mean() >= 0.995 and nearest.mean() >= 0.98, (some.mean(), nearest.mean())


def test_coco_keypoints(run):
    coco = run["coco"]
    cat = coco.loadCats(1)[0]
    assert cat["keypoints"] == list(KEYPOINT_NAMES) and [tuple(s) for s in cat["skeleton"]] == list(SKELETON)
    assert len(coco.getImgIds()) == 15
    anns = coco.loadAnns(coco.getAnnIds())
    assert len(anns) >= 15
    for a in anns:
        img = coco.loadImgs(a["image_id"])[0]
        kp = np.array(a["keypoints"]).reshape(-1, 3)
        assert kp.shape == (len(KEYPOINT_NAMES), 3) and a["iscrowd"] == 0
        assert a["num_keypoints"] == int((kp[:, 2] > 0).sum())
        mask = _png(run, "mask", img["view_index"], img["frame_index"]) == a["character"]
        assert (coco.annToMask(a) == mask).all() and a["area"] == mask.sum()
        x, y, w, h = a["bbox"]
        ys, xs = np.nonzero(mask)
        assert (x, y, x + w - 1, y + h - 1) == (xs.min(), ys.min(), xs.max(), ys.max())
        for u, v in kp[kp[:, 2] == 2, :2]:  # seen keypoints lie in their character's mask (1 pixel)
            px, py = int(round(u)), int(round(v))
            assert mask[max(py - 1, 0):py + 2, max(px - 1, 0):px + 2].any()


def test_joints3d_is_the_pose(run):
    """World joints are the exported bones' positions (glTF metres); camera joints are R·x + t; the
    seen keypoints of every view triangulate back to joints3d within 2 mm."""
    j = run["joints"]
    bones = np.asarray(run["ref"]["joint_position"], np.float64)  # (F,B,3) MMD units, every bone
    names = list(run["ref"]["joint_names"])
    for k, bone in ((KEYPOINT_NAMES.index("left_elbow"), "左ひじ"), (KEYPOINT_NAMES.index("humanoid_head"), "頭")):
        np.testing.assert_allclose(j["world"][:, k], (bones[:, names.index(bone)] + run["offset"]) * FLIP
                                   / MMD_UNITS_PER_METRE, atol=1e-6)
    assert j["crowd_world"].shape == (3, 2, len(KEYPOINT_NAMES), 3) and j["camera"].shape == (3, 5, 39, 3)
    K, R, t = _krt(run, 1, 2)
    np.testing.assert_allclose(j["camera"][2, 1], j["world"][2] @ R.T + t, atol=1e-9)
    coco = run["coco"]
    for i in range(3):
        rows = {}
        for a in coco.loadAnns(coco.getAnnIds()):
            img = coco.loadImgs(a["image_id"])[0]
            if img["frame_index"] == i and a["character"] == 1:
                rows[img["view_index"]] = np.array(a["keypoints"]).reshape(-1, 3)
        for k in range(len(KEYPOINT_NAMES)):
            eqs = []
            for view, kp in rows.items():
                if kp[k, 2] == 2:
                    Kv, Rv, tv = _krt(run, view, i)
                    P = Kv @ np.hstack([Rv, tv[:, None]])
                    eqs += [kp[k, 0] * P[2] - P[0], kp[k, 1] * P[2] - P[1]]
            if len(eqs) >= 4:
                X = np.linalg.svd(np.array(eqs))[2][-1]
                assert np.linalg.norm(X[:3] / X[3] - j["world"][i, k]) < 0.002


def test_occluded_keypoints(run):
    """Seen from the side (ring_01, from +x), the character farther away stands behind the nearer:
    its neck and head are hidden (v = 1) where the nearer one's are seen (v = 2); and the nearer
    one's far hip is hidden behind its near hip; from the front (ring_00) both see both eyes."""
    coco, j = run["coco"], run["joints"]
    near = int(np.argmin(j["crowd_camera"][0, 1, :, KEYPOINT_NAMES.index("humanoid_center"), 2])) + 1
    img = [im for im in coco.loadImgs(coco.getImgIds()) if im["view_index"] == 1 and im["frame_index"] == 0][0]
    kps = {a["character"]: np.array(a["keypoints"]).reshape(-1, 3)[:, 2]
           for a in coco.loadAnns(coco.getAnnIds(imgIds=[img["id"]]))}
    torso = [KEYPOINT_NAMES.index(n) for n in ("humanoid_neck", "humanoid_head")]
    assert (kps[near][torso] == 2).all()
    far = 3 - near
    if far in kps:
        assert (kps[far][torso] == 1).all()
    hips = [KEYPOINT_NAMES.index(n) for n in ("left_hip", "right_hip")]
    z = j["crowd_camera"][0, 1, near - 1, hips, 2]
    assert kps[near][hips[int(np.argmin(z))]] == 2 and kps[near][hips[int(np.argmax(z))]] == 1
    front = [im for im in coco.loadImgs(coco.getImgIds()) if im["view_index"] == 0 and im["frame_index"] == 0][0]
    eyes = [KEYPOINT_NAMES.index(n) for n in ("left_eye", "right_eye", "nose")]
    anns = coco.loadAnns(coco.getAnnIds(imgIds=[front["id"]]))
    assert len(anns) == 2 and all((np.array(a["keypoints"]).reshape(-1, 3)[eyes, 2] == 2).all() for a in anns)


@pytest.mark.parametrize("view", [0, 4])
def test_normals_face_the_camera_and_follow_the_depth(run, view):
    """Camera-space normals: unit length (to the PNG's 8 bits), facing the camera, and within 20° (median)
    of the normals the depth PNG gives (back-projected pixels, crossed neighbours) on smooth skin."""
    mask = _png(run, "mask", view, 0) > 0
    n = _png(run, "normal", view, 0).astype(np.float64) / 127.5 - 1.0
    assert (_png(run, "normal", view, 0)[~mask] == 0).all()
    length = np.linalg.norm(n[mask], axis=1)
    assert np.abs(length - 1).max() < 0.02 and (n[mask][:, 2] < 0).mean() > 0.97
    K = _krt(run, view, 0)[0]
    z = _png(run, "depth", view, 0).astype(np.float64) / 1000
    ys, xs = np.mgrid[0:H, 0:W]
    p = np.stack([xs, ys, np.ones_like(xs)], -1) @ np.linalg.inv(K).T * z[..., None]  # camera points
    dx, dy = p[1:-1, 2:] - p[1:-1, :-2], p[2:, 1:-1] - p[:-2, 1:-1]
    g = -np.cross(dx, dy)  # x right × y down points away from the camera
    g /= np.linalg.norm(g, axis=-1, keepdims=True) + 1e-12
    inner = mask[1:-1, 1:-1] & mask[1:-1, 2:] & mask[1:-1, :-2] & mask[2:, 1:-1] & mask[:-2, 1:-1]
    step = np.maximum(np.abs(z[1:-1, 2:] - z[1:-1, :-2]), np.abs(z[2:, 1:-1] - z[:-2, 1:-1]))
    smooth = inner & (step < 0.03)
    cos = np.einsum("ijk,ijk->ij", g, n[1:-1, 1:-1])[smooth]
    assert smooth.sum() > 1000 and np.degrees(np.arccos(np.median(np.clip(cos, -1, 1)))) < 20
