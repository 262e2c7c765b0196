"""Dataset arrays (.npz): joint world positions/rotations, local rotations, root trajectory, morphs.

In: a ``BakedMotion`` (or, through ``Stream``, the frames as they are posed), a joint set ('all' or
'humanoid'), a scale. Out: a deflated .npz (zip of .npy, zlib level ``COMPRESS_LEVEL``, written
atomically); the keys, shapes and spaces are listed in docs/export.md and in ``Stream.finish``.
With ``vertices`` the skinned vertices of each frame are deflated into ``vertex_position.npy``
inside the zip as the frame is posed, so memory holds one frame of vertices, never all of them.
"""

from __future__ import annotations

import contextlib
import zipfile

import numpy as np

from mmdkit.errors import OptionError, check_number
from mmdkit.export.humanoid import joint_pose, joint_set
from mmdkit.fileutil import atomic_path

OPTIONS = ("joints", "scale", "vertices")
COMPRESS_LEVEL = 1
"""zlib level: float arrays barely deflate further at higher levels (Gene + wavefile_v2, humanoid:
2.10 MB at 1, 2.04 MB at 6) and level 6 takes twice as long (0.08 s vs 0.15 s)."""
ROOT_BONES = ("センター", "全ての親")
"""The root trajectory follows the first of these the model has (else its first root bone)."""


def check_scale(scale) -> float:
    """``scale`` (None = 1) as a float, or OptionError('scale') unless finite and > 0."""
    return check_number(scale, "scale", default=1.0)


def root_bone(model) -> int:
    """Index of the bone whose world pose is the root trajectory (see ROOT_BONES)."""
    names = list(model.bone_name)
    for n in ROOT_BONES:
        if n in names:
            return names.index(n)
    roots = np.nonzero(np.asarray(model.bone_parent) < 0)[0]
    return int(roots[0]) if len(roots) else 0


def _put(zf: zipfile.ZipFile, name: str, array) -> None:
    with zf.open(name + ".npy", "w", force_zip64=True) as f:
        np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)


class Stream:
    """An .npz being written: ``on_frame(i, character)`` adds frame i's skinned vertices (with
    ``vertices``), ``finish(baked)`` adds every other array and renames the file into place.
    Use as a context manager (the temp file is removed if the block fails)."""

    def __init__(self, path, model, num_frames: int, *, joints=None, scale=None, vertices: bool = False):
        self.path, self.model, self.num_frames = path, model, int(num_frames)
        self.joints = joint_set(model, joints)  # checked before any work
        self.scale = check_scale(scale)
        self.vertices = bool(vertices)
        self._stack = contextlib.ExitStack()
        self._vert_file = None

    def __enter__(self):
        tmp = self._stack.enter_context(atomic_path(self.path, ".npz.part"))
        self.zip = self._stack.enter_context(zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, allowZip64=True,
                                                             compresslevel=COMPRESS_LEVEL))
        if self.vertices:
            V = self.model.num_vertices
            self._position = np.empty((V, 3), np.float32)
            self._normal = np.empty((V, 3), np.float32)
            self._vert_file = self.zip.open("vertex_position.npy", "w", force_zip64=True)
            header = {"descr": "<f4", "fortran_order": False, "shape": (self.num_frames, V, 3)}
            np.lib.format.write_array_header_2_0(self._vert_file, header)
        return self

    def on_frame(self, i: int, character) -> None:
        if self._vert_file is not None:
            character.skin(self._position, self._normal)
            if self.scale != 1.0:
                self._position *= self.scale
            self._vert_file.write(self._position.tobytes())

    def __exit__(self, *exc):
        if self._vert_file is not None:
            self._vert_file.close()
        return self._stack.__exit__(*exc)

    def finish(self, baked, **_) -> dict:
        """Write the arrays of ``baked`` (a ``BakedMotion``); returns a summary dict."""
        if self._vert_file is not None:
            self._vert_file.close()
            self._vert_file = None
        js, s, model = self.joints, self.scale, baked.model
        jp = joint_pose(baked, js)
        local = jp.local_rotation.astype(np.float32)
        r = root_bone(model)
        arrays = dict(
            frames=baked.frames, fps=np.float64(baked.fps), scale=np.float64(s), joint_set=np.str_(js.kind),
            joint_names=np.array(js.joint_name), joint_bone=js.joint_bone, joint_parent=js.joint_parent,
            joint_fallback=js.joint_fallback, joint_rest_position=(jp.rest_position * s).astype(np.float32),
            joint_position=(jp.position * s).astype(np.float32), joint_rotation=jp.rotation.astype(np.float32),
            joint_local_rotation=local, root_name=np.str_(model.bone_name[r]),
            root_position=(baked.bone_world_position[:, r] * s).astype(np.float32),
            root_rotation=baked.bone_world_rotation[:, r].astype(np.float32),
            bone_names=np.array(model.bone_name), bone_parent=np.asarray(model.bone_parent, np.int32),
            morph_names=np.array(model.morph_name), morph_weight=baked.morph_weight)
        for name, a in arrays.items():
            _put(self.zip, name, a)
        return {"path": str(self.path), "format": "npz", "frames": baked.num_frames, "joints": len(js.joint_name),
                "vertices": self.model.num_vertices if self.vertices else 0, "physics": baked.physics}


def write(baked, path, *, motion=None, warn=print, joints=None, scale=None, vertices: bool = False) -> dict:
    """``baked`` → ``path`` (.npz). ``vertices`` needs the frames as they are posed: use
    ``mmdkit.export.export`` (it streams them through ``Stream``)."""
    if vertices:
        raise OptionError("vertices", "skinned vertices are streamed while baking: use mmdkit.export.export")
    with Stream(path, baked.model, baked.num_frames, joints=joints, scale=scale) as out:
        return out.finish(baked)
