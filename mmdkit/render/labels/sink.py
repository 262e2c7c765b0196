"""``AnnotateSink``: the frame loop's annotated render — every view of every frame drawn from one pose
(physics stepped once), with depth, character masks, body parts, COCO keypoints and calibrated
cameras (``dataset``'s files, docs/dataset.md).

In: a LoadedTake's characters as the driver poses them; the views: ``views`` a count (cameras on a
ring around what the motion sweeps: ``cameras.ring_views`` with ``view_height``/``view_radius``
metres and ``view_fov`` degrees) or a cameras.json path, plus the take's camera motion as one more
view; neither: the render's automatic camera. ``shards``: also WebDataset tars (``shards``);
``preview``: also a contact sheet of the middle frame (``preview``); ``normals``: also camera-space
normals per pixel; ``correspondence``: also per pixel the nearest vertex, the triangle and the UV
of the surface drawn there (another target of the same label pass). Out: the folder ``output`` and a summary (frames,
views, seconds, fps, output, warnings).
Threads as ``RenderSink``: the GL thread draws frame n (per view: the picture, then the label pass
from the same skinned vertices; characters are uploaded and skinned once a frame; views go into
``TARGETS`` pictures in turn, each read back after the next ones are drawn) while the driver
poses frame n+1, and a writer thread writes frame n−1's files. Each frame's inputs and outputs live
in one of two sets of buffers made at ``open``.
"""

from __future__ import annotations

import os
import time

import numpy as np

from mmdkit.errors import OptionError, check_flag
from mmdkit.render.framing import motion_box
from mmdkit.render.gl import Renderer
from mmdkit.render.glsink import GLSink
from mmdkit.render.labels import cameras as cams
from mmdkit.render.labels.dataset import MAX_CORRESPONDENCE_ID, DatasetWriter, labels_json
from mmdkit.render.labels.gpass import ALPHA_CUT, LabelPass
from mmdkit.render.labels.keypoints import KEYPOINT_NAMES, keypoint_rig
from mmdkit.render.labels.parts import vertex_parts
from mmdkit.render.labels.shards import MAX_SHARDS
from mmdkit.runtime.crowd import crowd_offsets, crowd_spacing, rest_box

ANNOTATE_OPTIONS = ("annotate", "views", "view_height", "view_radius", "view_fov", "shards", "preview", "normals",
                     "correspondence")
"""Options of an annotated render (besides the picture options size, msaa, shadows, floor)."""


def check_views(views, view_height=None, view_radius=None, view_fov=None, names=None, shards=None) -> None:
    """OptionError (named as ``names`` shows each option) unless the view and shard options make sense."""
    def shown(k):
        return (names or {}).get(k, k)

    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, (int, np.integer))
                               or not 1 <= shards <= MAX_SHARDS):
        raise OptionError(shown("shards"), f"must be a number of tar files from 1 to {MAX_SHARDS:,}, got {shards!r}")
    if views is not None and cams.is_cameras_file(views) and not os.path.isfile(views):
        raise OptionError(shown("views"), f"no cameras file {os.fspath(views)!r} (give a number of cameras or a "
                                          f"cameras.json)")
    if views is not None and not cams.is_cameras_file(views):
        n = int(views) if not isinstance(views, bool) and str(views).strip().isdigit() else -1
        if not 1 <= n <= cams.MAX_VIEWS:
            raise OptionError(shown("views"), f"must be 1 to {cams.MAX_VIEWS} cameras or a cameras.json, got {views!r}")
    ring = views is not None and not cams.is_cameras_file(views)
    for key, value in (("view_height", view_height), ("view_radius", view_radius), ("view_fov", view_fov)):
        if value is not None and not ring:
            raise OptionError(shown(key), f"places the cameras of {shown('views')} N (a ring); give "
                                          f"{shown('views')} a number of cameras")
    for key, value, lo, hi in (("view_height", view_height, -1000.0, 1000.0),
                               ("view_radius", view_radius, 1e-3, 1000.0), ("view_fov", view_fov, 1.0, 170.0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not lo <= float(value) <= hi):
            raise OptionError(shown(key), f"must be a number from {lo:g} to {hi:g}, got {value!r}")


TARGETS = 4
"""Pictures (MSAA picture and label targets) the views of a frame are drawn into in turn: each view is
read back only after the next three are drawn, so drawing overlaps llvmpipe's rasterizing (4 views of
Gene at 512x512: ~11 % more frames/s than reading each view at once; two pictures gained nothing)."""
TARGET_PIXELS = 4 * 1920 * 1080
"""At most this many pixels in those pictures together (fewer pictures for large sizes)."""


class AnnotateSink(GLSink):
    """See the module docstring."""

    geometry = True

    def __init__(self, output: str, *, size=(1280, 720), msaa: int = 4, views=None, view_height=None,
                 view_radius=None, view_fov=None, shards: int | None = None, preview: bool = False,
                 normals: bool = False, correspondence: bool = False,
                 ground_shadow: bool = True, self_shadow: bool = False, floor: bool = False, warn=print, names=None):
        check_views(views, view_height, view_radius, view_fov, names, shards)
        preview, normals, correspondence = (check_flag(v, (names or {}).get(k, k), none_ok=True) for k, v in
                                            (("preview", preview), ("normals", normals),
                                             ("correspondence", correspondence)))
        self.shards, self.preview, self.normals, self.correspondence = shards, preview, normals, correspondence
        self.output, self.size, self.msaa, self.warn = output, tuple(size), msaa, warn
        self.view_spec = dict(views=views, height=view_height, radius=view_radius,
                              fov=cams.DEFAULT_FOV if view_fov is None else float(view_fov))
        self.options = dict(ground_shadow=ground_shadow, self_shadow=self_shadow, floor=floor)
        self.views_option = (names or {}).get("views", "views")
        self.names = names

    def _views(self, loaded, box) -> cams.Views:
        spec, F = self.view_spec, len(loaded.frames)
        parts = []
        v = spec["views"]
        if v is not None and cams.is_cameras_file(v):
            given, size = cams.read_cameras(str(v), F, self.views_option)
            self.size = size
            parts.append(given)
        elif v is not None:
            parts.append(cams.ring_views(box, int(v), self.size, F, height=spec["height"], radius=spec["radius"],
                                         fov=spec["fov"]))
        if loaded.camera is not None and loaded.camera.has_camera:
            parts.append(cams.mmd_camera_view(loaded.camera, loaded.frames, self.size))
        return cams.joined(parts) if parts else cams.auto_view(box, self.size, F)

    def open(self, loaded) -> None:
        model, crowd = loaded.model, loaded.crowd
        offsets = crowd_offsets(crowd, crowd_spacing(*rest_box(model)))
        box = motion_box(model, loaded.motion, loaded.frames, offsets)
        self.views = self._views(loaded, box)
        self.rig = keypoint_rig(model)
        self.offsets = np.asarray(offsets, np.float64)
        self.eye_distance = _eye_distances(self.views.view, (box[0] + box[1]) / 2)
        self.targets = max(1, min(len(self.views), TARGETS, TARGET_PIXELS // (self.size[0] * self.size[1])))
        if self.correspondence and max(model.num_vertices, len(model.face_vertex_index)) >= MAX_CORRESPONDENCE_ID:
            raise OptionError((self.names or {}).get("correspondence", "correspondence"),
                              f"numbers vertices and triangles below {MAX_CORRESPONDENCE_ID:,}; this model has "
                              f"{model.num_vertices:,} vertices and {len(model.face_vertex_index):,} triangles")
        self.writer = DatasetWriter(self.output, self.views, loaded.frames, self.rig, crowd, self.shards, self.preview,
                                    self.normals, self.correspondence)
        self.start(model, crowd, "mmdkit-annotate")
        self.ren, self.labels = self._gl.submit(self._build, model, crowd, offsets, box).result()
        for w in self.ren.warnings:
            self.warn(w)
        C, (W, H), J = len(self.views), self.size, len(KEYPOINT_NAMES)
        self._keypoints = [(np.empty((crowd, J, 3)), np.empty(crowd, bool)) for _ in range(2)]
        self._pictures = [(np.empty((C, H, W, 3), np.uint8), np.empty((C, H, W, 2), np.float32),
                           np.empty((C, H, W, 3), np.float32) if self.normals else None,
                           np.empty((C, H, W, 4), np.float32) if self.correspondence else None) for _ in range(2)]
        self.num_frames = len(loaded.frames)
        self._t0 = time.perf_counter()

    def _build(self, model, crowd: int, offsets, box):
        """On the GL thread: the renderer (its floor around the motion's box) and the label pass."""
        ren = Renderer(model, self.size, self.msaa, instances=crowd, **self.options)
        try:
            ren.set_instance_offsets(offsets)
            lo, hi = box
            ren.place_floor((lo + hi) / 2, 8.0 * float(np.linalg.norm(hi - lo)) + 50.0)
            labels = LabelPass(ren, vertex_parts(model), self.normals, self.correspondence)
            ren.targets(self.targets)
            labels.targets(self.targets)
            return ren, labels
        except BaseException:
            ren.release()
            raise

    def frame(self, i: int, characters) -> None:
        inputs = self.fill(i, characters)  # waits for frame i-2's draw: its keypoint buffers are free too
        kp, shown = self._keypoints[i & 1]
        for k, ch in enumerate(characters):
            shown[k] = ch.visible
            self.rig.positions(ch.bone_skin, self.offsets[k], kp[k])
        self.submit_draw(i, self._draw, i, i & 1, *inputs)

    def _draw(self, i: int, turn: int, skins, voff, uvoff, materials) -> None:
        """On the GL thread: every view of frame i, then its files to the writer thread."""
        kp, shown = self._keypoints[turn]
        rgb, labels, normals, corr = self._pictures[turn]
        v, ren, T = self.views, self.ren, self.targets
        read_lag = T - 1  # view c is read back once views c+1 .. c+T−1 are drawn, resolved one view earlier
        resolve_lag = read_lag - 1 if T > 2 else read_lag
        for c in range(len(v) + read_lag):
            if c < len(v):
                view, proj = v.view[c, i], v.proj[c, i]
                ren.render(skins, view, proj, vertex_offset=voff, uv_offset=uvoff, materials=materials,
                           eye_distance=self.eye_distance[c, i], skinned=c > 0, target=c % T, read=False)
                self.labels.draw(view, proj, materials, None, target=c % T)
            if 0 <= c - resolve_lag < len(v):
                ren.resolve((c - resolve_lag) % T)
            r = c - read_lag
            if 0 <= r < len(v):
                ren.read(r % T, rgb[r])
                self.labels.read(r % T, labels[r], None if normals is None else normals[r],
                                 None if corr is None else corr[r])
        self.hand_over(self.writer.write, i, rgb, labels, kp.copy(), shown.copy(), normals, corr)

    def close(self) -> dict:
        try:
            self.drain()
            self.writer.close(labels_json(self.views, len(self.offsets), self.rig, ALPHA_CUT))
            seconds = time.perf_counter() - self._t0
            warnings = list(self.ren.warnings)
        finally:
            self.release()
        n = self.num_frames
        return {"frames": n, "views": len(self.views), "seconds": seconds, "fps": n / seconds if seconds else 0.0,
                "warnings": warnings, "output": self.output}


def _eye_distances(view, centre) -> np.ndarray:
    """(C,F) float64: each camera's distance to ``centre`` (3,) MMD units, the edge width's scale
    (MMD's edges widen with the camera's distance) for views (C,F,4,4)."""
    eye = -np.einsum("...ji,...j->...i", view[..., :3, :3], view[..., :3, 3])  # eye in MMD space (rigid view)
    return np.linalg.norm(eye - centre, axis=-1)
