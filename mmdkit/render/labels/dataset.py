"""The files of an annotated render, written into a temporary folder and moved into place at the end.

In: per frame and view the RGB picture (H,W,3) uint8 and the label pass's (H,W,2) float32 (depth in
MMD units, character id × 256 + part id), the keypoints of every character (N,J,3) float64 MMD model
space; the ``Views``, the frames and the ``KeypointRig``. Out (docs/dataset.md):
OUT/view_XX/{rgb,depth,mask,parts}/NNNNNN.png (NNNNNN: the output frame index), cameras.json,
labels.json, keypoints.json (COCO; its images and annotations streamed to the folder as lines while
rendering, so memory stays flat), joints3d.npz, with ``normals`` view_XX/normal/, with
``correspondence`` view_XX/{vertex,face,uv_u,uv_v}/ (``correspondence_pictures``), with ``shards``
WebDataset tars (``shards``), with ``preview`` preview.png, the middle frame's contact sheet
(``preview``).
Visibility of a keypoint in a view: 0 outside the picture (or behind the camera), 2 when a pixel
within one of its own (3×3) shows its character's own surface there — a depth test against the label
pass's depth: either one of the body parts meeting at the keypoint (``KeypointRig.keypoint_parts``:
clothes on a limb are that limb) at most ``PART_DEPTH`` in front of the keypoint, or any surface of
its character no nearer than the keypoint's own surface point (its camera z − its radius −
``VISIBILITY_TOLERANCE``); else 1.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np

from mmdkit.errors import RenderError
from mmdkit.fileutil import atomic_path
from mmdkit.model.space import MMD_UNITS_PER_METRE
from mmdkit.render.labels import cameras as cams
from mmdkit.render.labels.keypoints import DERIVED, KEYPOINT_NAMES, SKELETON
from mmdkit.render.labels.parts import PART_NAMES
from mmdkit.render.labels.preview import contact_sheet
from mmdkit.render.labels.shards import ShardWriter

MM_PER_UNIT = 1000.0 / MMD_UNITS_PER_METRE
VISIBILITY_TOLERANCE = 0.125
"""MMD units (1 cm) a surface may lie nearer than a keypoint's own and the keypoint still count as seen."""
PART_DEPTH = 1.5
"""MMD units (12 cm): how far in front of a keypoint the surface of its own body parts may be (a
puffy sleeve over a shoulder) and the keypoint still count as seen through it."""
KINDS = ("rgb", "depth", "mask", "parts")
CORRESPONDENCE_KINDS = ("vertex", "face", "uv_u", "uv_v")
MAX_CORRESPONDENCE_ID = 1 << 24
"""Vertex and triangle numbers (+ 1) must stay below this: exact in the label pass's float32 and
in the id pictures' 24 bits."""


def decode(label: np.ndarray, crowd: int = 1):
    """(H,W,2) float32 label picture of ``crowd`` characters → depth (H,W) float32 MMD units,
    character id (H,W) uint8 (uint16 for crowds of 256 and more), part id (H,W) uint8."""
    small = crowd < 256
    code = label[..., 1].astype(np.uint16 if small else np.uint32)
    return label[..., 0], (code >> 8).astype(np.uint8 if small else np.uint16), (code & 255).astype(np.uint8)


def depth_mm(depth: np.ndarray, character: np.ndarray) -> np.ndarray:
    """(H,W) uint16 millimetres along the camera's z (0: no character; at most 65535)."""
    mm = depth * np.float32(MM_PER_UNIT)
    np.rint(mm, out=mm)
    np.minimum(mm, 65535.0, out=mm)
    mm[character == 0] = 0.0
    return mm.astype(np.uint16)


def visibility(uv, z, rig, character, part, depth, ids) -> np.ndarray:
    """(N,J) uint8 COCO visibility of keypoints at pixels uv (N,J,2), camera depth z (N,J) MMD units,
    of ``rig`` (a KeypointRig: radius, parts), against one view's character/part/depth pictures;
    ``ids`` (N,) the characters' ids (the module docstring)."""
    radius, parts = rig.keypoint_radius, rig.keypoint_parts
    H, W = character.shape
    N, J = z.shape
    v = np.zeros((N, J), np.uint8)
    inside = np.isfinite(uv).all(-1) & (z > 0) & (uv[..., 0] >= -0.5) & (uv[..., 0] < W - 0.5) \
        & (uv[..., 1] >= -0.5) & (uv[..., 1] < H - 0.5)
    v[inside] = 1
    for n, j in zip(*np.nonzero(inside)):
        x, y = int(np.rint(uv[n, j, 0])), int(np.rint(uv[n, j, 1]))
        ys, xs = slice(max(y - 1, 0), y + 2), slice(max(x - 1, 0), x + 2)
        own = character[ys, xs] == ids[n]
        d = depth[ys, xs]
        joint = ((part[ys, xs] == parts[j, 0]) | (part[ys, xs] == parts[j, 1])) & (d >= z[n, j] - PART_DEPTH)
        if (own & (joint | (d >= z[n, j] - radius[j] - VISIBILITY_TOLERANCE))).any():
            v[n, j] = 2
    return v


def normal_rgb(normal: np.ndarray, character: np.ndarray) -> np.ndarray:
    """(H,W,3) uint8 of unit normals (H,W,3): round((n + 1) · 127.5) per axis, 0 where no character."""
    rgb = np.rint((np.clip(normal, -1.0, 1.0) + 1.0) * 127.5).astype(np.uint8)
    rgb[character == 0] = 0
    return rgb


def id_rgb(ids: np.ndarray) -> np.ndarray:
    """(H,W,3) uint8 of non-negative ids (H,W) below 2**24: id = R + 256·G + 65536·B (COCO panoptic's rule)."""
    out = np.empty(ids.shape + (3,), np.uint8)
    for k in range(3):
        out[..., k] = (ids >> (8 * k)) & 255
    return out


def correspondence_pictures(corr: np.ndarray, character: np.ndarray) -> dict:
    """The label pass's correspondence target (H,W,4) float32 (nearest vertex + 1, triangle + 1, u,
    v) → {vertex, face: (H,W,3) uint8 ids + 1 as ``id_rgb``; uv_u, uv_v: (H,W) uint16 =
    round(clip(uv, 0, 1) · 65535)}, all 0 where ``character`` (H,W) is 0."""
    fg = character > 0
    ids = np.where(fg[..., None], np.rint(corr[..., :2]), 0).astype(np.uint32)
    uv = np.rint(np.clip(corr[..., 2:], 0.0, 1.0) * 65535.0).astype(np.uint16)
    uv[~fg] = 0
    return {"vertex": id_rgb(ids[..., 0]), "face": id_rgb(ids[..., 1]), "uv_u": uv[..., 0], "uv_v": uv[..., 1]}


def runs(mask: np.ndarray) -> list:
    """COCO's uncompressed RLE of a (H,W) bool mask: run lengths down the columns (column-major),
    starting with a run of zeros."""
    flat = mask.T.ravel()
    edges = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate([[0], edges, [flat.size]])
    lengths = np.diff(bounds).tolist()
    return ([0] + lengths) if flat.size and flat[0] else lengths


PNG_LEVEL = 2
"""zlib level of the PNGs (fixed: the same picture gives the same bytes)."""
_PNG_COLOUR = {1: 0, 3: 2}  # channels → PNG colour type (grey, RGB)


def _png_bytes(array: np.ndarray) -> bytes:
    """A PNG of ``array`` (H,W) or (H,W,3), uint8 or uint16: every row with PNG's 'up' filter (the
    difference to the row above, one numpy subtraction for the whole picture) and zlib level
    ``PNG_LEVEL`` — about three times quicker than Pillow's per-row filter choice, files as small."""
    import struct
    import zlib

    H, W = array.shape[:2]
    channels = 1 if array.ndim == 2 else array.shape[2]
    if array.dtype not in (np.uint8, np.uint16) or channels not in _PNG_COLOUR:
        raise ValueError(f"no PNG for a {array.dtype} picture of shape {array.shape}")
    bits = 8 * array.dtype.itemsize
    rows = np.ascontiguousarray(array, dtype=">u2" if bits == 16 else np.uint8).view(np.uint8).reshape(H, -1)
    data = np.empty((H, rows.shape[1] + 1), np.uint8)
    data[:, 0] = 2  # filter type 'up'
    data[:1, 1:] = rows[:1]
    np.subtract(rows[1:], rows[:-1], out=data[1:, 1:])

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", W, H, bits, _PNG_COLOUR[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(data, PNG_LEVEL))
            + chunk(b"IEND", b""))


class DatasetWriter:
    """Writes one annotated render (the module docstring) into a temporary folder beside ``output``,
    moved in by ``close`` (an earlier annotated render's files there are replaced)."""

    def __init__(self, output: str, views: "cams.Views", frames, rig, crowd: int, shards: int | None = None,
                 preview: bool = False, normals: bool = False, correspondence: bool = False):
        self.output = os.path.abspath(output)
        parent = os.path.dirname(self.output.rstrip(os.sep))
        if os.path.exists(self.output) and not os.path.isdir(self.output):
            raise RenderError(f"cannot write an annotated render into '{output}': it is a file")
        if not os.path.isdir(parent):
            raise RenderError(f"cannot write '{output}': folder {parent} does not exist")
        try:
            self.tmp = tempfile.mkdtemp(prefix=".annotate-", dir=parent)
        except OSError as e:
            raise RenderError(f"cannot write '{output}': {e.strerror or e}") from None
        self.views, self.frames, self.rig, self.crowd = views, np.asarray(frames, np.float64), rig, crowd
        C, F, J = len(views), len(self.frames), len(KEYPOINT_NAMES)
        self.kinds = KINDS + (("normal",) if normals else ()) + (CORRESPONDENCE_KINDS if correspondence else ())
        for c in range(C):
            for kind in self.kinds:
                os.makedirs(os.path.join(self.tmp, f"view_{c:02d}", kind))
        self.K, self.R, self.t = views.K, views.R, views.t
        self.world = np.full((F, crowd, J, 3), np.nan)
        self.camera = np.full((F, C, crowd, J, 3), np.nan)
        self.visible = np.zeros((F, C, crowd, J), np.uint8)
        self._images = open(os.path.join(self.tmp, ".images.jsonl"), "w", encoding="utf-8")
        self._anns = open(os.path.join(self.tmp, ".annotations.jsonl"), "w", encoding="utf-8")
        self._next_ann = 1
        self.shards = ShardWriter(self.tmp, shards, F * C) if shards else None
        self.preview_index = F // 2 if preview else -1
        self._preview = []

    def write(self, i: int, rgb, labels, keypoints, shown, normals=None, corr=None) -> None:
        """Output frame i: rgb (C,H,W,3) uint8, labels (C,H,W,2) float32, keypoints (N,J,3) float64 MMD
        model space, shown (N,) bool (a character a property key hides has no keypoints), normals
        (C,H,W,3) float32 camera space or None, corr (C,H,W,4) float32 (``correspondence_pictures``)
        or None."""
        world = keypoints * (cams.S_AXIS.diagonal() / MMD_UNITS_PER_METRE)  # glTF metres
        world[~shown] = np.nan
        self.world[i] = world
        name = f"{i:06d}.png"
        for c in range(len(self.views)):
            folder = os.path.join(self.tmp, f"view_{c:02d}")
            depth, character, part = decode(labels[c], self.crowd)
            pictures = {"rgb": rgb[c], "depth": depth_mm(depth, character), "mask": character, "parts": part}
            if normals is not None:
                pictures["normal"] = normal_rgb(normals[c], character)
            if corr is not None:
                pictures.update(correspondence_pictures(corr[c], character))
            encoded = {k: _png_bytes(a) for k, a in pictures.items()}
            for kind, data in encoded.items():
                with open(os.path.join(folder, kind, name), "wb") as f:
                    f.write(data)
            cam = np.einsum("ij,nkj->nki", self.R[c, i], world) + self.t[c, i]
            self.camera[i, c] = cam
            with np.errstate(invalid="ignore", divide="ignore"):
                uvw = np.einsum("ij,nkj->nki", self.K[c, i], cam)
                uv = uvw[..., :2] / uvw[..., 2:]
            ids = np.arange(1, self.crowd + 1)
            vis = visibility(uv, cam[..., 2] * MMD_UNITS_PER_METRE, self.rig, character, part, depth, ids)
            self.visible[i, c] = vis
            image, anns = self._coco(i, c, uv, vis, character)
            if i == self.preview_index:
                self._preview.append(tuple(pictures[k].copy() for k in ("rgb", "parts", "mask", "depth")) + (uv, vis))
            if self.shards is not None:
                meta = {"image": image, "annotations": anns, "K": self.K[c, i].round(6).tolist(),
                        "R": self.R[c, i].round(9).tolist(), "t": self.t[c, i].round(9).tolist()}
                self.shards.add(f"{i:06d}_view_{c:02d}", {f"{k}.png": v for k, v in encoded.items()}
                                | {"json": json.dumps(meta).encode()})

    def _coco(self, i: int, c: int, uv, vis, character):
        """This view's COCO image and annotations, streamed to the lines files; returns them."""
        image_id = i * len(self.views) + c + 1
        H, W = character.shape
        image = {"id": image_id, "file_name": f"view_{c:02d}/rgb/{i:06d}.png", "width": W, "height": H,
                 "view": self.views.names[c], "view_index": c, "frame_index": i, "frame": float(self.frames[i])}
        self._images.write(json.dumps(image) + "\n")
        anns = []
        for n in range(self.crowd):
            m = character == n + 1
            area = int(m.sum())
            if not area:
                continue
            ys, xs = np.nonzero(m)
            x0, y0 = int(xs.min()), int(ys.min())
            kp = np.zeros((len(KEYPOINT_NAMES), 3))
            seen = vis[n] > 0
            kp[seen, :2] = uv[n, seen].round(3)
            kp[:, 2] = vis[n]
            ann = {"id": self._next_ann, "image_id": image_id, "category_id": 1, "iscrowd": 0, "area": area,
                   "bbox": [x0, y0, int(xs.max()) - x0 + 1, int(ys.max()) - y0 + 1],
                   "keypoints": [float(x) if k % 3 < 2 else int(x) for k, x in enumerate(kp.ravel())],
                   "num_keypoints": int(seen.sum()), "character": n + 1,
                   "segmentation": {"size": [H, W], "counts": runs(m)}}
            self._anns.write(json.dumps(ann) + "\n")
            self._next_ann += 1
            anns.append(ann)
        return image, anns

    def close(self, labels_doc: dict) -> dict:
        """Write the whole-run files and move the folder into place; returns the file names."""
        self._images.close()
        self._anns.close()
        if self.shards is not None:
            self.shards.close()
        tmp = self.tmp
        if self._preview:
            with open(os.path.join(tmp, "preview.png"), "wb") as f:
                f.write(_png_bytes(contact_sheet(self._preview, SKELETON)))
        _json(os.path.join(tmp, "cameras.json"), cams.cameras_json(self.views, self.frames))
        _json(os.path.join(tmp, "labels.json"), labels_doc)
        self._keypoints_json(os.path.join(tmp, "keypoints.json"))
        os.unlink(os.path.join(tmp, ".images.jsonl"))
        os.unlink(os.path.join(tmp, ".annotations.jsonl"))
        _npz(os.path.join(tmp, "joints3d.npz"), world=self.world[:, 0], camera=self.camera[:, :, 0],
             crowd_world=self.world, crowd_camera=self.camera, visibility=self.visible, frames=self.frames,
             names=np.array(KEYPOINT_NAMES), views=np.array(self.views.names))
        self._move_in()
        return {"files": sorted(os.listdir(self.output))}

    def _keypoints_json(self, path: str) -> None:
        category = {"id": 1, "name": "person", "supercategory": "person", "keypoints": list(KEYPOINT_NAMES),
                    "skeleton": [list(s) for s in SKELETON]}
        with atomic_path(path) as p, open(p, "w", encoding="utf-8") as f:
            f.write('{"info": {"description": "mmdkit annotated render (docs/dataset.md)"}, "licenses": [], ')
            f.write(f'"categories": [{json.dumps(category)}], "images": [')
            _lines(f, os.path.join(self.tmp, ".images.jsonl"))
            f.write('], "annotations": [')
            _lines(f, os.path.join(self.tmp, ".annotations.jsonl"))
            f.write("]}\n")

    def _move_in(self) -> None:
        """The temporary folder becomes the output (entries of an earlier annotated render there are
        replaced; other files stay)."""
        out = self.output
        if not os.path.isdir(out):
            os.replace(self.tmp, out)
            return
        for name in sorted(os.listdir(self.tmp)):
            target = os.path.join(out, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(os.path.join(self.tmp, name), target)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self) -> None:
        for f in (self._images, self._anns):
            f.close()
        if self.shards is not None:
            self.shards.abort()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _lines(f, path: str) -> None:
    """The JSON objects of a lines file, comma separated, into ``f``."""
    with open(path, encoding="utf-8") as src:
        for k, line in enumerate(src):
            if k:
                f.write(", ")
            f.write(line.rstrip("\n"))


def _npz(path: str, **arrays) -> None:
    """An .npz numpy reads (``np.load``), byte-identical for the same arrays (fixed zip times)."""
    import zipfile

    with atomic_path(path) as p, zipfile.ZipFile(p, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, a in arrays.items():
            with z.open(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)


def _json(path: str, doc: dict) -> None:
    with atomic_path(path) as p, open(p, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)


def labels_json(views, crowd: int, rig, alpha_cut: float) -> dict:
    """labels.json: ids, names, keypoints and the unit and convention of every file."""
    return {
        "parts": {str(i): n for i, n in enumerate(PART_NAMES)},
        "instances": {"0": "background", **{str(k): f"character {k}" for k in range(1, crowd + 1)}},
        "keypoints": {"names": list(KEYPOINT_NAMES), "skeleton": [list(s) for s in SKELETON],
                      "derived": [n for n in KEYPOINT_NAMES if n in DERIVED],
                      "radius_m": (rig.keypoint_radius / MMD_UNITS_PER_METRE).round(5).tolist(),
                      "missing": [n for n, b in zip(KEYPOINT_NAMES, rig.keypoint_bone) if b < 0]},
        "views": list(views.names),
        "files": {
            "view_XX/rgb/NNNNNN.png": "RGB 8-bit, the render (NNNNNN: output frame index; cameras.json's frames)",
            "view_XX/depth/NNNNNN.png": "uint16 millimetres along the camera z axis; 0 = no character",
            "view_XX/mask/NNNNNN.png": "character id per pixel (labels.instances); 0 = background",
            "view_XX/parts/NNNNNN.png": "body-part id per pixel (labels.parts), from the vertex's strongest bone",
            "cameras.json": "K (3x3), per frame R (3x3) and t (3): x_cam = R x_world + t, metres, OpenCV camera",
            "keypoints.json": "COCO keypoints; [x, y, v] pixels (pixel centres at integers), v: 0 outside the "
                              "picture, 1 hidden, 2 seen (depth test); one annotation per character in view",
            "joints3d.npz": "world (F,J,3) and camera (F,C,J,3) metres of character 1; crowd_world (F,N,J,3), "
                            "crowd_camera (F,C,N,J,3), visibility (F,C,N,J), frames (F,), names (J,), views (C,)",
            "view_XX/normal/NNNNNN.png": "with normals: RGB = round((n + 1) * 127.5) of the unit surface normal "
                                         "in camera axes (x right, y down, z forward), facing the camera; 0 = "
                                         "no character",
            "view_XX/vertex/NNNNNN.png": "with correspondence: RGB 8-bit, id = R + 256*G + 65536*B: 0 = no "
                                         "character, else 1 + the index of the model vertex nearest the surface "
                                         "point drawn there (a corner of the triangle drawn there)",
            "view_XX/face/NNNNNN.png": "with correspondence: RGB 8-bit, id = R + 256*G + 65536*B: 0 = no character, "
                                       "else 1 + the index of the triangle drawn there in the model's face list",
            "view_XX/uv_u/NNNNNN.png": "with correspondence: uint16, u = value / 65535 of the surface point's "
                                       "texture coordinate (the model's UV, UV morphs applied, clamped to 0..1); 0 "
                                       "also where there is no character (see mask)",
            "view_XX/uv_v/NNNNNN.png": "with correspondence: uint16, v = value / 65535 (as uv_u; v = 0 is the top "
                                       "row of the texture image, the model's own convention)",
            "preview.png": "with preview: the middle frame's views (columns): picture with COCO-17 keypoints "
                           "(green seen, red hidden), parts, characters, depth (rows)",
            "shards/shard-NNNNNN.tar": "with shards: WebDataset samples KEY = FFFFFF_view_XX (frame index, view) "
                                       "holding rgb.png, depth.png, mask.png, parts.png (with normals normal.png, "
                                       "with correspondence vertex.png, face.png, uv_u.png, uv_v.png) and json "
                                       "(COCO image, annotations, K, R, t)"},
        "conventions": {"world": "glTF: right-handed, +y up, metres; an MMD point p is 0.08*(p.x, p.y, -p.z)",
                        "camera": "OpenCV: x right, y down, z forward",
                        "visibility_tolerance_m": VISIBILITY_TOLERANCE / MMD_UNITS_PER_METRE,
                        "visibility_part_depth_m": PART_DEPTH / MMD_UNITS_PER_METRE,
                        "label_alpha_cut": alpha_cut},
    }
