"""Export a posed motion: the frame loop's export sink, and ``export()`` for one file from Python.

In: a ``LoadedTake``'s frames as the driver poses them (``ExportSink``), or ``Model``, ``Motion``
(or VPD ``Pose`` / None) and an output path ending in .npz, .bvh, .vmd, .glb, .gltf or .vrma with options
(``export``). Out: the file (written atomically, never over an input) and a summary dict.
``bake.Bake`` collects the ``BakedMotion`` every writer reads; each writer module exposes
``OPTIONS`` (the keyword options it takes) and ``write(baked, path, *, motion, warn, **options) ->
dict``, optionally ``check(model, frames, **options)`` (run before the first frame) and a
``Stream`` class (npz), fed each frame as it is posed.
"""

from __future__ import annotations

import os

from mmdkit.animation.frames import MOTION_FPS, check_fps
from mmdkit.errors import OptionError
from mmdkit.export import bvh, gltf, npz, vmd, vrma
from mmdkit.export.bake import Bake, BakedMotion, bake, output_frames
from mmdkit.fileutil import same_file
from mmdkit.runtime.driver import run
from mmdkit.runtime.take import LoadedTake

WRITERS = {".npz": npz, ".bvh": bvh, ".vmd": vmd, ".glb": gltf, ".gltf": gltf, ".vrma": vrma}
"""Output extension → writer module."""

__all__ = ["export", "ExportSink", "bake", "Bake", "BakedMotion", "output_frames", "check_fps", "check_options",
           "WRITERS", "writer_for"]


def writer_for(path, option: str = "path"):
    """The writer module for ``path``'s extension, or OptionError(option) naming the known ones."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in WRITERS:
        raise OptionError(option, f"{os.fspath(path)}: cannot export to '{ext or '(no extension)'}'; "
                                  f"use one of {', '.join(WRITERS)}")
    return WRITERS[ext]


def check_not_input(path, *objects, option: str = "path") -> None:
    """OptionError(option) when ``path`` is the file one of ``objects`` (Model/Motion/paths) came from."""
    for obj in objects:
        src = obj if isinstance(obj, (str, os.PathLike)) else getattr(obj, "source_path", "")
        if src and same_file(path, src):
            raise OptionError(option, f"{os.fspath(path)} is the input file {os.fspath(src)}; choose another output")


def check_options(path, option: str = "path", *, flag_prefix: str = "", **options):
    """The writer module for ``path``, or OptionError naming the first given option (not None or
    False) that this format does not take (``flag_prefix`` + its name, e.g. '--' in the CLI);
    checked before any work."""
    writer = writer_for(path, option)
    unknown = sorted(k for k, v in options.items() if v is not None and v is not False and k not in writer.OPTIONS)
    if unknown:
        ext = os.path.splitext(os.fspath(path))[1]
        takes = ", ".join(writer.OPTIONS) or "none"
        name = unknown[0].replace("_", "-") if flag_prefix else unknown[0]  # reduce_physics → --reduce-physics
        raise OptionError(flag_prefix + name, f"does not apply to {ext} output (it takes {takes})")
    return writer


class ExportSink(Bake):
    """One export file of a take, by its extension: the frames are baked (``Bake``) as the driver
    poses them, then written at ``close``. ``options``: the writer's own (``OPTIONS``: joints,
    scale, vertices, reduce, reduce_physics; a glTF writer also takes the take's camera); options
    a format does not take are refused at construction, before anything is loaded."""

    def __init__(self, path, options: dict | None = None, *, warn=print, option: str = "path", flag_prefix: str = ""):
        options = {k: v for k, v in (options or {}).items() if v is not None and v is not False}
        self.writer = check_options(path, option, flag_prefix=flag_prefix, **options)
        self.path, self.option, self.warn = path, option, warn
        self.kw = dict(options)
        self.stream = None
        # npz with vertices: fed frame by frame, each frame's skinned vertices streamed into the file
        self.streams = hasattr(self.writer, "Stream") and bool(options.get("vertices"))
        super().__init__((self._stream_frame,) if self.streams else ())

    def _stream_frame(self, i: int, character) -> None:
        self.stream.on_frame(i, character)

    def open(self, loaded) -> None:
        check_not_input(self.path, loaded.model, loaded.motion, loaded.camera, option=self.option)
        if "camera" in self.writer.OPTIONS and loaded.camera is not None:
            self.kw["camera"] = loaded.camera
        if hasattr(self.writer, "check"):  # the writer's own option checks, before the (long) bake
            self.writer.check(loaded.model, loaded.frames, **self.kw)
        self.motion = loaded.motion
        super().open(loaded)
        if self.streams:
            self.stream = self.writer.Stream(self.path, loaded.model, len(loaded.frames), **self.kw)
            self.stream.__enter__()

    def close(self) -> dict:
        super().close()
        if self.stream is not None:
            stream, self.stream = self.stream, None
            try:
                info = stream.finish(self.baked)
            except BaseException as e:
                stream.__exit__(type(e), e, e.__traceback__)
                raise
            stream.__exit__(None, None, None)
            return info
        return self.writer.write(self.baked, self.path, motion=self.motion, warn=self.warn, **self.kw)

    def abort(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            err = RuntimeError("aborted")
            stream.__exit__(RuntimeError, err, None)


def export(model, motion, path, *, frames=None, fps: float = MOTION_FPS, physics: bool = True, camera=None,
           joints=None, scale=None, warn=print, progress: bool = False, **options) -> dict:
    """Bake ``motion`` on ``model`` at ``frames`` (motion frames; None: the whole motion at ``fps``)
    and write ``path`` in the format its extension names. ``physics``: simulate the model's bodies;
    ``camera``: a camera Motion (glTF); ``joints``: None/'all' or 'humanoid' (npz, bvh); ``scale``:
    units per MMD unit (default per format); other ``options`` go to the writer (npz: vertices;
    vmd, gltf: reduce; vmd: reduce_physics). Returns the writer's summary dict (path, frames, sizes)."""
    sink = ExportSink(path, dict(options, camera=camera, joints=joints, scale=scale), warn=warn)
    fps = check_fps(fps)
    if frames is None:
        frames = output_frames(motion, fps)
    loaded = LoadedTake.of(model, motion, frames, fps=fps, physics=bool(physics), camera=camera)
    return run(loaded, [sink], progress=progress, desc="baking")[0]
