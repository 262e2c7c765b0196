"""The front door: a Take's outputs become sinks, and ``run(take)`` makes them in one pass.

In: a ``Take`` (``mmdkit.runtime.take``) whose ``outputs`` are ``Output(path, options)``. The path
picks the sink: .npz/.bvh/.vmd/.glb/.gltf → ``export.ExportSink``; a video (.mp4 .mov .mkv .webm
.avi .gif), one .png or a folder → ``render.pipeline.RenderSink``; a folder with ``annotate`` → the
annotated render ``render.labels.AnnotateSink`` (docs/dataset.md). ``options`` hold that sink's own
settings (``RENDER_OPTIONS``, ``ANNOTATE_OPTIONS``, ``EXPORT_OPTIONS``). Out: ``run`` → one summary dict per output, in
order; the take is validated and every output's options checked before anything is loaded, the
inputs are loaded once, and the frames posed and simulated once for all outputs
(``runtime.driver.run``). The CLI (``render``, ``export``), batch jobs and ``mmdkit.run`` all come
in here.
"""

from __future__ import annotations

import os

from mmdkit.errors import OptionError
from mmdkit.export import WRITERS, ExportSink, writer_for
from mmdkit.render.labels import ANNOTATE_OPTIONS, AnnotateSink
from mmdkit.render.pipeline import RenderSink
from mmdkit.render.video import SUPPORTED, output_kind
from mmdkit.runtime.driver import run as run_frames
from mmdkit.runtime.take import Output, Take

RENDER_OPTIONS = ("size", "msaa", "palette_size", "ground_shadow", "self_shadow", "floor", "audio")
"""Options a picture or video output takes (``RenderSink``'s keywords)."""
EXPORT_OPTIONS = ("joints", "scale", "vertices", "reduce", "reduce_physics")
"""Options the export formats take between them (each writer's ``OPTIONS`` says which are its own)."""

MAX_PALETTE = 256
"""Largest ``palette_size``: 16 KB, the smallest uniform block OpenGL guarantees, holds 256 matrices."""

__all__ = ["run", "sinks_for", "sink_for", "is_export", "parse_size", "writer_for", "RENDER_OPTIONS", "ANNOTATE_OPTIONS",
           "EXPORT_OPTIONS", "Output", "Take"]


def parse_size(value, option: str = "size") -> tuple[int, int]:
    """'WIDTHxHEIGHT' → (w, h) within 16..8192, or OptionError(option)."""
    try:
        w, h = (int(x) for x in str(value).lower().split("x"))
        if w < 16 or h < 16 or w > 8192 or h > 8192:
            raise ValueError
        return w, h
    except ValueError:
        raise OptionError(option, f"'{value}' is not WIDTHxHEIGHT (16..8192)") from None


def check_palette(value, option: str = "palette_size") -> None:
    """OptionError(option) unless ``value`` (bones per palette batch) is None or 1..MAX_PALETTE."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PALETTE):
        raise OptionError(option, f"must be from 1 to {MAX_PALETTE} bones (leave it out to skin through the bone "
                                  f"texture), got {value}")


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
    def shown(k):
        return (names or {}).get(k, flag_prefix + k.replace("_", "-") if flag_prefix else k)

    if opts.get("annotate"):
        return _annotate_sink(path, opts, shown, option, warn)
    unknown = [k for k, v in opts.items() if k not in RENDER_OPTIONS and v is not False]
    if unknown and unknown[0] in ANNOTATE_OPTIONS:
        raise OptionError(shown(unknown[0]), f"needs {shown('annotate')} (an annotated render)")
    if unknown:
        raise OptionError(shown(unknown[0]), f"does not apply to picture/video output (it takes "
                                             f"{', '.join(RENDER_OPTIONS)})")
    if isinstance(opts.get("size"), str):  # as typed: 'WIDTHxHEIGHT'
        opts["size"] = parse_size(opts["size"], shown("size"))
    check_palette(opts.get("palette_size"), shown("palette_size"))
    return RenderSink(os.fspath(output.path), warn=warn, **{k: v for k, v in opts.items() if k in RENDER_OPTIONS})


def _annotate_sink(path: str, opts: dict, shown, option: str, warn) -> AnnotateSink:
    """An annotated render into the folder ``path`` (docs/dataset.md)."""
    if output_kind(path) != "folder" or (os.path.exists(path) and not os.path.isdir(path)):
        raise OptionError(option, f"{path}: an annotated render writes a folder (end it with '/')")
    takes = ("size", "msaa", "ground_shadow", "self_shadow", "floor") + ANNOTATE_OPTIONS
    unknown = [k for k, v in opts.items() if k not in takes and v is not False]
    if unknown:
        raise OptionError(shown(unknown[0]), f"does not apply to an annotated render (it takes "
                                             f"{', '.join(takes)})")
    if isinstance(opts.get("size"), str):
        opts["size"] = parse_size(opts["size"], shown("size"))
    kw = {k: v for k, v in opts.items() if k in takes and k != "annotate"}
    return AnnotateSink(path, warn=warn, names={k: shown(k) for k in ANNOTATE_OPTIONS}, **kw)


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
    desc = "rendering" if any(isinstance(s, (RenderSink, AnnotateSink)) for s in sinks) else "baking"
    return run_frames(loaded, sinks, progress=progress, desc=desc)
