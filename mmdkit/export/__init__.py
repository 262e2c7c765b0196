"""Export a posed motion: bake it through the full MMD pipeline, then write it by extension.

In: ``Model``, ``Motion`` (or VPD ``Pose`` / None), an output path ending in .npz, .bvh, .vmd,
.glb or .gltf, options. Out: the file (written atomically, never over an input) and a summary
dict. ``bake`` (``mmdkit.export.bake``) gives the ``BakedMotion`` every writer reads; each writer
module exposes ``OPTIONS`` (the keyword options it takes) and ``write(baked, path, *, motion, warn,
**options) -> dict``, optionally ``check(model, frames, **options)`` (run before baking); a writer
with a ``Stream`` class (npz) is fed each frame while baking.
"""

from __future__ import annotations

import importlib
import os

from mmdkit.animation.frames import MOTION_FPS, check_fps
from mmdkit.errors import OptionError
from mmdkit.export.bake import BakedMotion, bake, output_frames
from mmdkit.fileutil import same_file

WRITERS = {".npz": "mmdkit.export.npz", ".bvh": "mmdkit.export.bvh", ".vmd": "mmdkit.export.vmd",
           ".glb": "mmdkit.export.gltf", ".gltf": "mmdkit.export.gltf"}
"""Output extension → writer module (imported on first use)."""

__all__ = ["export", "bake", "BakedMotion", "output_frames", "check_fps", "check_options", "WRITERS", "writer_for"]


def writer_for(path, option: str = "path"):
    """The writer module for ``path``'s extension, or OptionError(option) naming the known ones."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in WRITERS:
        raise OptionError(option, f"{os.fspath(path)}: cannot export to '{ext or '(no extension)'}'; "
                                  f"use one of {', '.join(WRITERS)}")
    return importlib.import_module(WRITERS[ext])


def check_not_input(path, *objects) -> None:
    """OptionError('path') when ``path`` is the file one of ``objects`` (Model/Motion/paths) came from."""
    for obj in objects:
        src = obj if isinstance(obj, (str, os.PathLike)) else getattr(obj, "source_path", "")
        if src and same_file(path, src):
            raise OptionError("path", f"{os.fspath(path)} is the input file {os.fspath(src)}; choose another output")


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


def export(model, motion, path, *, frames=None, fps: float = MOTION_FPS, physics=True, camera=None, joints=None,
           scale=None, warn=print, progress: bool = False, **options) -> dict:
    """Bake ``motion`` on ``model`` at ``frames`` (motion frames; None: the whole motion at ``fps``)
    and write ``path`` in the format its extension names. ``physics``: True/False or a world;
    ``camera``: a camera Motion (glTF); ``joints``: None/'all' or 'humanoid' (npz, bvh); ``scale``:
    units per MMD unit (default per format); other ``options`` go to the writer (npz: vertices;
    vmd, gltf: reduce; vmd: reduce_physics). Returns the writer's summary dict (path, frames, sizes)."""
    writer = check_options(path, camera=camera, joints=joints, scale=scale, **options)
    check_not_input(path, model, motion, camera)
    kw = {k: v for k, v in dict(options, camera=camera, joints=joints, scale=scale).items() if k in writer.OPTIONS}
    if frames is None:
        frames = output_frames(motion, fps)
    if hasattr(writer, "check"):  # the writer's own option checks, before the (long) bake
        writer.check(model, frames, **kw)
    if hasattr(writer, "Stream"):  # npz: vertices go into the file frame by frame while baking
        with writer.Stream(path, model, len(frames), **kw) as out:
            baked = bake(model, motion, frames, fps=fps, physics=physics, progress=progress, on_frame=out.on_frame)
            return out.finish(baked)
    baked = bake(model, motion, frames, fps=fps, physics=physics, progress=progress)
    return writer.write(baked, path, motion=motion, warn=warn, **kw)
