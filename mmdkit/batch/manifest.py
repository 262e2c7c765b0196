"""Batch manifests → jobs: JSON Lines, CSV, or a model × motion cross product from glob patterns.

In: a manifest file (one job a line: model, motion, frames, outputs, optional camera, audio, name,
physics, fps and a table of options per output) or glob patterns, plus default options
(``npz.joints=humanoid``). Out: ``Job`` objects with absolute paths, checked outputs and options and
a unique folder name. A malformed line raises ``FormatError`` naming the manifest line; a missing
input file does not (its job fails when it runs, the others go on).
"""

from __future__ import annotations

import csv
import glob
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from mmdkit.animation.frames import MOTION_FPS, split_frames
from mmdkit.errors import FormatError, OptionError

EXPORT_OUTPUTS = ("npz", "glb", "gltf", "bvh", "vmd")
RENDER_OUTPUTS = ("mp4", "png")
OUTPUTS = EXPORT_OUTPUTS + RENDER_OUTPUTS
COMMON_OPTIONS = ("frames", "fps", "physics")
"""Options every output takes; given in an output's table they override the job's own."""
RENDER_OPTIONS = ("size", "msaa")
JOB_KEYS = ("name", "model", "motion", "clip", "vpd", "frames", "outputs", "camera", "audio", "physics", "fps",
            "test_exit_once")
"""Keys of a job line besides one option table per output. ``test_exit_once`` is a test hook: the
worker exits abruptly (os._exit) after its first output on the attempt that creates that marker file."""
_KEYS = frozenset(JOB_KEYS + OUTPUTS)


@dataclass(eq=False)
class Job:
    """One model × motion → outputs. Paths are absolute; ``frames`` is 'A:B[:STEP]' or None (the
    whole motion); ``options`` maps an output to its option table; ``where`` names the manifest line;
    ``key`` (set by ``plan``) is the content hash of inputs and options. ``clip`` picks a clip the model
    carries (name, or index as text) when there is no motion; ``vpd`` holds 'FILE.vpd@FRAME[:WEIGHT]'
    poses (absolute FILE) loaded onto the motion, as ``mmdkit pose --vpd`` does."""

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
    test_exit_once: str | None = None
    key: str = ""

    def inputs(self) -> dict:
        """Role → absolute path of each input file the job reads (``vpd0``, ``vpd1``, ... for its poses)."""
        files = (("model", self.model), ("motion", self.motion), ("camera", self.camera), ("audio", self.audio))
        return {k: v for k, v in files if v} | {f"vpd{i}": s.rpartition("@")[0] for i, s in enumerate(self.vpd)}

    def output_settings(self, output: str) -> dict:
        """frames, fps, physics and the output's own options, the output's table overriding the job."""
        own = dict(self.options.get(output, {}))
        base = {"frames": self.frames, "fps": self.fps, "physics": self.physics}
        return base | own


def parse_range(spec, where: str) -> tuple[float, float | None, float | None]:
    """'A:B[:STEP]' (B inclusive; empty A = 0, empty B = the motion's end) or 'A' → (start, end, step),
    checked by ``mmdkit.animation.frames.split_frames``; FormatError naming ``where`` otherwise."""
    text = str(spec).strip()
    try:
        start, end, step, count = split_frames(text, option="frames")
    except OptionError as e:
        raise FormatError(f"frames {e.detail}", path=where) from None
    if count is not None or not text:
        raise FormatError(f"frames '{spec}' is not A:B[:STEP]", path=where)
    if end is not None and end < start:
        raise FormatError(f"frames '{spec}': the end is before the start", path=where)
    return start, end, step


@lru_cache(maxsize=None)
def _output_options(output: str) -> tuple:
    if output in RENDER_OUTPUTS:
        return COMMON_OPTIONS + RENDER_OPTIONS
    from mmdkit.export import writer_for

    return COMMON_OPTIONS + tuple(o for o in writer_for("x." + output).OPTIONS if o != "camera")


def _check_options(table, output: str, where: str) -> dict:
    if not isinstance(table, dict):
        raise FormatError(f"'{output}' must be a table of options, not {table!r}", path=where)
    allowed = _output_options(output)
    for k, v in table.items():
        if k not in allowed:
            raise FormatError(f"'{output}' takes no option '{k}' (it takes {', '.join(allowed)})", path=where)
        if k == "frames" and v is not None:
            parse_range(v, where)
    return dict(table)


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
    from mmdkit.runtime.loading import split_vpd_spec  # numba comes with runtime: only for manifests with poses

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
    options) under its own option tables; FormatError naming ``where`` when the entry is malformed."""
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
    frames = entry.get("frames")
    if frames not in (None, ""):
        parse_range(frames, where)
    try:
        fps = float(entry.get("fps", MOTION_FPS))
    except (TypeError, ValueError):
        raise FormatError(f"fps {entry.get('fps')!r} is not a number", path=where) from None
    if not (math.isfinite(fps) and fps > 0):
        raise FormatError(f"fps must be > 0, not {fps:g}", path=where)
    physics = entry.get("physics", True)
    if not isinstance(physics, bool):
        raise FormatError(f"physics must be true or false, not {physics!r}", path=where)
    name = entry.get("name")
    if name is not None and (not isinstance(name, str) or not _slug(name) == name):
        raise FormatError(f"name {name!r} must be letters, digits, '.', '_' or '-'", path=where)
    return Job(name=name or "", model=_path(entry["model"], base, "model", where),
               motion=_path(entry.get("motion"), base, "motion", where), outputs=outputs, where=where,
               frames=str(frames) if frames not in (None, "") else None,
               camera=_path(entry.get("camera"), base, "camera", where),
               audio=_path(entry.get("audio"), base, "audio", where), physics=physics, fps=fps, options=options,
               clip=_clip(entry.get("clip"), where), vpd=_vpd(entry.get("vpd"), base, where),
               test_exit_once=_path(entry.get("test_exit_once"), base, "test_exit_once", where))


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
                                  + ([j.clip, j.vpd] if j.clip or j.vpd else []), sort_keys=True)
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
                elif col in ("physics", "fps"):
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
