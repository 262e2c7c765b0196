"""Batch manifests → jobs: JSON Lines, CSV, or a model × motion cross product from glob patterns.

In: a manifest file (one job a line: the keys of ``JOB_KEYS`` — every option ``mmdkit render`` and
``export`` take — and a table of options per output) or glob patterns, plus default options
(``npz.joints=humanoid``). Out: ``Job`` objects with absolute paths and a unique folder name; a job
runs as ``Job.takes()``: one ``mmdkit.runtime.take.Take`` per set of outputs sharing frames, fps and
physics. Every job is validated at read as its Takes (``Take.validate``, the sinks' option checks):
a bad value raises ``FormatError`` naming the manifest line with the CLI's detail (``jobs.jsonl line
3: fps: must be …, got 0`` ↔ ``--fps: must be …, got 0``); a missing input file does not (its job
fails when it runs, the others go on).
"""

from __future__ import annotations

import csv
import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from mmdkit.animation.frames import MOTION_FPS, split_frames
from mmdkit.errors import FormatError, OptionError
from mmdkit.runtime.loading import split_vpd_spec
from mmdkit.runtime.take import MANIFEST_NAMES, Output, Take

EXPORT_OUTPUTS = ("npz", "glb", "gltf", "bvh", "vmd", "vrma")
RENDER_OUTPUTS = ("mp4", "png", "annotate")
OUTPUTS = EXPORT_OUTPUTS + RENDER_OUTPUTS
COMMON_OPTIONS = ("frames", "fps", "physics")
"""Options every output takes; given in an output's table they override the job's own."""
RENDER_OPTIONS = ("size", "msaa", "palette_size", "ground_shadow", "self_shadow")
"""A picture's or video's own options (as ``mmdkit render`` --size, --msaa, --palette, --ground-shadow,
--self-shadow); an export's are its writer's (npz: joints, scale, vertices; bvh: joints, scale;
glb/gltf: scale, reduce; vmd: reduce, reduce_physics). ``annotate`` (an annotated render, the folder
``<name>.annotate/`` as ``mmdkit render --annotate -o <name>.annotate/`` writes it, docs/dataset.md)
takes size, msaa, ground_shadow, self_shadow, floor and ``ANNOTATE_OPTIONS`` less annotate."""
JOB_KEYS = ("name", "model", "motion", "source", "clip", "vpd", "camera", "audio", "frames", "fps", "physics",
            "crowd", "outputs")
"""Keys of a job line besides one option table per output."""
_KEYS = frozenset(JOB_KEYS + OUTPUTS)


@dataclass(eq=False)
class Job:
    """One model × motion → outputs. Paths are absolute; ``frames`` is a frames spec as the CLI's
    ``--frames`` takes it (``A:B[:STEP]``, ``A+N``, ``N``) or None (the whole motion); ``options``
    maps an output to its option table; ``where`` names the manifest line; ``key`` (set by ``plan``)
    is the content hash of inputs and options. ``clip`` picks a clip the model carries (name, or
    index as text) when there is no motion; ``vpd`` holds 'FILE.vpd@FRAME[:WEIGHT]' poses (absolute
    FILE) loaded onto the motion, as ``--vpd`` does; ``crowd`` characters (exports write the first);
    ``source`` the model the motion was made for, as ``--source`` (retargeted when it does not bind)."""

    name: str
    model: str
    motion: str | None
    outputs: tuple
    where: str
    frames: str | None = None
    camera: str | None = None
    audio: str | None = None
    physics: bool = True
    fps: float = MOTION_FPS
    options: dict = field(default_factory=dict)
    clip: str | None = None
    vpd: tuple = ()
    crowd: int = 1
    key: str = ""
    source: str | None = None

    def inputs(self) -> dict:
        """Role → absolute path of each input file the job reads (``vpd0``, ``vpd1``, ... for its poses)."""
        files = (("model", self.model), ("motion", self.motion), ("source", self.source), ("camera", self.camera),
                 ("audio", self.audio))
        return {k: v for k, v in files if v} | {f"vpd{i}": s.rpartition("@")[0] for i, s in enumerate(self.vpd)}

    def output_settings(self, output: str) -> dict:
        """frames, fps, physics and the output's own options, the output's table overriding the job."""
        own = dict(self.options.get(output, {}))
        base = {"frames": self.frames, "fps": self.fps, "physics": self.physics}
        return base | own

    def takes(self, model=None, folder: str = "", source=None) -> list:
        """The job as Takes (not validated): outputs with the same frames, fps and physics share one
        Take (one pass writes them all), each written to ``folder``/``<name>.<output>`` with its own
        options; ``png`` is one picture, the first of its frames; ``annotate`` the folder
        ``<name>.annotate/`` of an annotated render. ``model``/``source``: the Models
        already loaded (default: the job's paths)."""
        groups = {}
        for out in self.outputs:
            settings = self.output_settings(out)
            frames = settings.pop("frames")
            if out == "png":
                frames = _first_frame(frames)
            fps, physics = settings.pop("fps"), settings.pop("physics")
            if out == "mp4" and self.audio:
                settings["audio"] = self.audio
            path = os.path.join(folder, f"{self.name or 'job'}.{out}")
            if out == "annotate":
                path, settings["annotate"] = os.path.join(path, ""), True
            groups.setdefault((frames, fps, physics), []).append(Output(path, settings))
        source = self.source if source is None else source
        return [Take(self.model if model is None else model, self.motion, source=source, clip=self.clip,
                     vpd=self.vpd, camera=self.camera, frames=frames, fps=fps, physics=physics, crowd=self.crowd,
                     outputs=tuple(outs), names=MANIFEST_NAMES) for (frames, fps, physics), outs in groups.items()]


def _first_frame(spec) -> str:
    """The first frame a frames spec selects, as a spec of that one frame (a picture shows one)."""
    if spec is None:
        return "0"
    start = split_frames(str(spec), option=MANIFEST_NAMES["frames"])[0]
    return f"{start:.17g}"


def _frames(value, what: str, where: str) -> str | None:
    """A frames spec as typed (a number, e.g. from a CSV cell, as its text); checked with the Take."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FormatError(f"'{what}' must be a frames spec (A:B[:STEP], A+N or N), not {value!r}", path=where)
    return str(value)


def _check_options(table, output: str, where: str) -> dict:
    """An output's option table (a dict; its values are checked with the job's Takes)."""
    if not isinstance(table, dict):
        raise FormatError(f"'{output}' must be a table of options, not {table!r}", path=where)
    if "audio" in table:
        raise FormatError(f"'{output}': 'audio' is a key of the job, not of an output", path=where)
    table = dict(table)
    if "frames" in table:
        table["frames"] = _frames(table["frames"], f"{output}.frames", where)
    return table


def validate(job: Job) -> Job:
    """``job`` when its Takes are valid (``Take.validate`` without looking at the input files, and the
    sinks' checks of each output's options), else FormatError naming its line with the CLI's detail."""
    from mmdkit.io import sinks_for  # the sinks: only when a manifest is read (render's modules are large)

    try:
        for take in job.takes():
            sinks_for(take.validate(files=False), warn=_ignore)
    except OptionError as e:
        raise FormatError(str(e), path=job.where) from None
    return job


def _ignore(message: str) -> None:
    pass


def _path(value, base: str, what: str, where: str) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise FormatError(f"'{what}' must be a path, not {value!r}", path=where)
    return _absolute(base, value)


@lru_cache(maxsize=4096)
def _absolute(base: str, value: str) -> str:
    return os.path.abspath(os.path.join(base, os.path.expanduser(value)))


def _clip(value, where: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise FormatError(f"'clip' must be a clip's name or index, not {value!r}", path=where)
    return str(value)


def _vpd(value, base: str, where: str) -> tuple:
    """'FILE.vpd@FRAME[:WEIGHT]' specs (a list, or one string with ';' between specs), FILE made absolute."""
    if value in (None, ""):
        return ()
    specs = [v for v in value.split(";") if v.strip()] if isinstance(value, str) else value
    if not isinstance(specs, (list, tuple)) or not all(isinstance(v, str) for v in specs):
        raise FormatError(f"'vpd' must list FILE.vpd@FRAME[:WEIGHT] poses, not {value!r}", path=where)
    out = []
    for spec in specs:
        try:
            path, frame, weight = split_vpd_spec(spec.strip(), "vpd")
        except OptionError as e:
            raise FormatError(str(e), path=where) from None
        out.append(f"{_absolute(base, path)}@{frame}:{weight:g}")
    return tuple(out)


def _outputs(value, where: str) -> tuple:
    if isinstance(value, str):
        value = [v for v in re.split(r"[;,|\s]+", value) if v]
    if not isinstance(value, (list, tuple)) or not value:
        raise FormatError("'outputs' must list at least one of " + ", ".join(OUTPUTS), path=where)
    for out in value:
        if out not in OUTPUTS:
            raise FormatError(f"unknown output '{out}' (use {', '.join(OUTPUTS)})", path=where)
    return tuple(dict.fromkeys(value))


def make_job(entry: dict, base: str, where: str, defaults: dict | None = None) -> Job:
    """A ``Job`` from one manifest entry (paths relative to ``base``) with ``defaults`` (output →
    options) under its own option tables, validated (``validate``); FormatError naming ``where``
    when the entry is malformed."""
    unknown = [k for k in entry if k not in _KEYS]
    if unknown:
        raise FormatError(f"unknown key '{unknown[0]}' (a job takes {', '.join(JOB_KEYS)} and one "
                          f"option table per output)", path=where)
    if not entry.get("model"):
        raise FormatError("no 'model'", path=where)
    outputs = _outputs(entry.get("outputs"), where)
    options = {}
    for out in outputs:
        table = (defaults or {}).get(out, {}) | _check_options(entry.get(out, {}), out, where)
        if table:
            options[out] = _check_options(table, out, where)
        views = options.get(out, {}).get("views") if out == "annotate" else None
        if isinstance(views, str) and not views.strip().isdigit():  # a cameras.json beside the manifest
            options[out]["views"] = _absolute(base, views)
    name = entry.get("name")
    if name is not None and (not isinstance(name, str) or not _slug(name) == name):
        raise FormatError(f"name {name!r} must be letters, digits, '.', '_' or '-'", path=where)
    job = validate(Job(name=name or "", model=_path(entry["model"], base, "model", where),
                       motion=_path(entry.get("motion"), base, "motion", where), outputs=outputs, where=where,
                       frames=_frames(entry.get("frames"), "frames", where),
                       camera=_path(entry.get("camera"), base, "camera", where),
                       audio=_path(entry.get("audio"), base, "audio", where), physics=entry.get("physics", True),
                       fps=entry.get("fps", MOTION_FPS), options=options, clip=_clip(entry.get("clip"), where),
                       vpd=_vpd(entry.get("vpd"), base, where), crowd=entry.get("crowd", 1),
                       source=_path(entry.get("source"), base, "source", where)))
    job.fps = float(job.fps)  # valid: the same number however it was written (part of the job's key)
    return job


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("._-")[:80]


def _auto_name(job: Job) -> str:
    stem = lambda p: os.path.splitext(os.path.basename(p))[0] if p else "pose"  # noqa: E731
    return _slug(f"{stem(job.model)}__{stem(job.motion) if job.motion else job.clip or 'pose'}") or "job"


def name_jobs(jobs: list) -> list:
    """Jobs with unique folder names: a given name is kept (a repeat is a FormatError naming both
    lines); an automatic one is model__motion, with a short hash of the job's inputs and frames
    appended where two jobs would share it, so names stay the same from run to run."""
    given = {}
    for j in jobs:
        if j.name:
            if j.name in given:
                raise FormatError(f"name '{j.name}' is already used on {given[j.name]}", path=j.where)
            given[j.name] = j.where
    autos = [None if j.name else _auto_name(j) for j in jobs]
    count = {}
    for j, a in zip(jobs, autos):
        if not j.name:
            count[a] = count.get(a, 0) + 1
    named, seen = [], dict(given)
    for j, a in zip(jobs, autos):
        if not j.name:
            if count[a] > 1 or a in given:
                spec = json.dumps([j.model, j.motion, j.camera, j.frames, j.outputs, j.options]
                                  + ([j.clip, j.vpd] if j.clip or j.vpd else [])
                                  + ([j.crowd] if j.crowd != 1 else []) + ([j.source] if j.source else []),
                                  sort_keys=True)
                a = f"{a}-{hashlib.sha1(spec.encode()).hexdigest()[:8]}"
            if a in seen:
                raise FormatError(f"the same job as {seen[a]} (give it a 'name' to run it twice)", path=j.where)
            seen[a] = j.where
            j = replace(j, name=a)
        named.append(j)
    return named


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_option(spec: str) -> tuple[str, str, object]:
    """'OUTPUT.KEY=VALUE' (VALUE read as JSON when it parses, else text) → (output, key, value)."""
    left, eq, value = spec.partition("=")
    output, dot, key = left.partition(".")
    if not (eq and dot and output in OUTPUTS and key):
        raise OptionError("--option", f"'{spec}' is not OUTPUT.KEY=VALUE with OUTPUT one of {', '.join(OUTPUTS)}")
    return output, key, _value(value)


def option_table(specs) -> dict:
    """'OUTPUT.KEY=VALUE' strings → {output: {key: value}}."""
    table = {}
    for spec in specs or ():
        output, key, value = parse_option(spec)
        table.setdefault(output, {})[key] = value
    return table


def _read_jsonl(path: str):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = f"{path} line {n}"
            try:
                entry = json.loads(line)
            except ValueError as e:
                raise FormatError(f"not JSON ({e.msg} at column {e.colno})", path=where) from None
            if not isinstance(entry, dict):
                raise FormatError("a job line must be a JSON object", path=where)
            yield entry, where


def _read_csv(path: str):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            where = f"{path} line {reader.line_num}"
            entry = {}
            for col, text in row.items():
                if col is None or text is None or not text.strip():
                    continue
                col, text = col.strip(), text.strip()
                output, dot, key = col.partition(".")
                if dot:
                    entry.setdefault(output, {})[key] = _value(text)
                elif col in ("physics", "fps", "crowd"):
                    entry[col] = _value(text)
                else:
                    entry[col] = text
            if entry:
                yield entry, where


def read_manifest(path: str, defaults: dict | None = None) -> list:
    """The jobs of a .jsonl/.json/.ndjson or .csv manifest (paths relative to its folder), named."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".jsonl", ".ndjson", ".json", ".csv"):
        raise OptionError("MANIFEST", f"{path}: use a .jsonl (JSON Lines) or .csv manifest")
    base = os.path.dirname(os.path.abspath(path))
    entries = _read_csv(path) if ext == ".csv" else _read_jsonl(path)
    return name_jobs([make_job(e, base, where, defaults) for e, where in entries])


def cross_product(models, motions, outputs, *, frames=None, camera=None, audio=None, physics=True,
                  fps=MOTION_FPS, defaults=None) -> list:
    """One job per (model, motion) of the files the glob patterns match, sorted, named."""
    def expand(patterns, opt):
        files = sorted({os.path.abspath(p) for pat in patterns for p in glob.glob(os.path.expanduser(pat))
                        if os.path.isfile(p)})
        if not files:
            raise OptionError(opt, f"{' '.join(patterns)} matches no file")
        return files

    model_files = expand(models, "--models")
    motion_files = expand(motions, "--motions") if motions else [None]
    entry = {"outputs": list(outputs), "frames": frames, "camera": camera, "audio": audio,
             "physics": physics, "fps": fps}
    jobs = [make_job(dict(entry, model=m, motion=v), os.getcwd(), "--models/--motions", defaults)
            for m in model_files for v in motion_files]
    return name_jobs(jobs)


def shard(jobs: list, spec: str | None) -> list:
    """The jobs of shard 'I/N' (0 <= I < N): the I-th of N contiguous runs of the jobs ordered by
    model (so a shard loads few models); None: all jobs."""
    if not spec:
        return jobs
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise OptionError("--shard", f"'{spec}' is not I/N with 0 <= I < N")
    i, n = int(m.group(1)), int(m.group(2))
    ordered = sorted(jobs, key=lambda j: j.model)
    return ordered[len(ordered) * i // n: len(ordered) * (i + 1) // n]
