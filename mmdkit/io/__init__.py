"""The front door: a Take's outputs become sinks, and ``run(take)`` makes them in one pass.

In: a ``Take`` (``mmdkit.runtime.take``) whose ``outputs`` are ``Output(path, options)``. The path
picks the sink: .npz/.bvh/.vmd/.glb/.gltf → ``export.ExportSink``; a video (.mp4 .mov .mkv .webm
.avi .gif), one .png or a folder → ``render.pipeline.RenderSink``. ``options`` hold that sink's own
settings (``RENDER_OPTIONS``, ``EXPORT_OPTIONS``). Out: ``run`` → one summary dict per output, in
order; the take is validated and every output's options checked before anything is loaded, the
inputs are loaded once, and the frames posed and simulated once for all outputs
(``runtime.driver.run``). The CLI (``render``, ``export``), batch jobs and ``mmdkit.run`` all come
in here.
"""

from __future__ import annotations

import os

from mmdkit.errors import OptionError
from mmdkit.export import WRITERS, ExportSink
from mmdkit.render.pipeline import RenderSink
from mmdkit.render.video import SUPPORTED, output_kind
from mmdkit.runtime.driver import run as run_frames
from mmdkit.runtime.take import Output, Take

RENDER_OPTIONS = ("size", "msaa", "palette_size", "ground_shadow", "self_shadow", "floor", "audio")
"""Options a picture or video output takes (``RenderSink``'s keywords)."""
EXPORT_OPTIONS = ("joints", "scale", "vertices", "reduce", "reduce_physics")
"""Options the export formats take between them (each writer's ``OPTIONS`` says which are its own)."""

__all__ = ["run", "sinks_for", "sink_for", "is_export", "RENDER_OPTIONS", "EXPORT_OPTIONS", "Output", "Take"]


def is_export(path) -> bool:
    """True when ``path`` names an export file (by extension), False for a picture, video or folder."""
    return os.path.splitext(os.fspath(path))[1].lower() in WRITERS


def sink_for(output: Output, *, warn=print, option: str = "-o", flag_prefix: str = "", names=None):
    """The sink writing ``output``: an ExportSink or a RenderSink with its options; an option the
    output does not take is an OptionError naming it (``flag_prefix`` + its name; ``names`` maps an
    option to how the caller shows it)."""
    opts = {k: v for k, v in dict(output.options).items() if v is not None}
    if is_export(output.path):
        return ExportSink(output.path, opts, warn=warn, option=option, flag_prefix=flag_prefix)
    path = os.fspath(output.path)
    ext = os.path.splitext(path.rstrip("/\\"))[1].lower()
    if output_kind(path) == "folder" and ext and not (os.path.isdir(path) or path.endswith(("/", os.sep))):
        raise OptionError(option, f"{path}: cannot write '{ext}'; use one of {', '.join(WRITERS)}, "
                                  f"{SUPPORTED} (a new folder: end it with '/')")
    unknown = [k for k, v in opts.items() if k not in RENDER_OPTIONS and v is not False]
    if unknown:
        shown = (names or {}).get(unknown[0], flag_prefix + unknown[0].replace("_", "-") if flag_prefix
                                  else unknown[0])
        raise OptionError(shown, f"does not apply to {output.path} (a picture or video takes "
                                 f"{', '.join(RENDER_OPTIONS)})")
    return RenderSink(os.fspath(output.path), warn=warn, **{k: v for k, v in opts.items() if k in RENDER_OPTIONS})


def sinks_for(take: Take, *, warn=print, flag_prefix: str = "", names=None) -> list:
    """One sink per output of ``take``, in order (options checked now, nothing loaded)."""
    if not take.outputs:
        raise OptionError(take.names["output"], "give at least one output")
    return [sink_for(o, warn=warn, option=take.names["output"], flag_prefix=flag_prefix, names=names)
            for o in take.outputs]


def run(take: Take, *, warn=print, progress: bool = False, flag_prefix: str = "", names=None,
        shown: int = 10) -> list[dict]:
    """Validate ``take``, make its sinks, load its inputs (warnings to ``warn``, at most ``shown`` a
    file) and pose its frames once for every output; returns their summaries in order."""
    take.validate()
    sinks = sinks_for(take, warn=warn, flag_prefix=flag_prefix, names=names)
    loaded = take.load(warn, shown=shown)
    desc = "rendering" if any(isinstance(s, RenderSink) for s in sinks) else "baking"
    return run_frames(loaded, sinks, progress=progress, desc=desc)
