"""Running one batch job inside a worker process (a local pool's or a Ray worker's).

In: a planned ``Job`` and the ``Store``. Out: a results row (status ok or failed, seconds, frames,
output paths and sizes, warnings, the one-line error). Outputs are written atomically, the job
record last. The worker keeps one model loaded (keyed by path, size and mtime) and drops it when a
job needs another, so memory stays flat however many jobs a worker runs.
"""

from __future__ import annotations

import gc
import os
import time

from mmdkit.animation.frames import MOTION_FPS
from mmdkit.animation.motion import Motion
from mmdkit.batch.manifest import RENDER_OUTPUTS, parse_range
from mmdkit.batch.plan import job_row
from mmdkit.batch.store import naming
from mmdkit.errors import MmdkitError, OptionError
from mmdkit.formats.io import load_as
from mmdkit.model.model import Model
from mmdkit.runtime import loading
from mmdkit.threads import set_threads

SHOWN_WARNINGS = 5
"""Load warnings of one file kept in a results row; the rest are counted."""

_model_cache = {"sig": None, "model": None}


def init_worker(threads: int) -> None:
    """Worker initializer: numba uses ``threads`` threads (workers × threads ≤ cores)."""
    set_threads(threads)


def cached_model(path: str):
    """The Model at ``path``, loaded once while consecutive jobs use it; the previous one is dropped."""
    st = os.stat(path)
    sig = (path, st.st_size, st.st_mtime_ns)
    if _model_cache["sig"] != sig:
        _model_cache.update(sig=None, model=None)
        gc.collect()
        _model_cache["model"] = load_as(path, Model, loading.MODEL_KINDS, loading.MANIFEST_NAMES["model"])
        _model_cache["sig"] = sig
    return _model_cache["model"]


def job_inputs(job, warn) -> tuple:
    """(model, motion or pose or None, camera or None) of ``job``, loaded as ``mmdkit pose``/``render``
    load theirs (``mmdkit.runtime.loading``): no motion → the model's ``clip`` (default its first) where
    it carries clips, else the rest pose; ``vpd`` poses applied. Load warnings go to ``warn``."""
    names, shown = loading.MANIFEST_NAMES, SHOWN_WARNINGS
    model = cached_model(job.model)
    loading.report_warnings(job.model, model.warnings, warn, shown)
    motion, _ = loading.load_motion_for(model, job.model, job.motion, job.clip, names=names, warn=warn,
                                        shown=shown, rest_pose=True)
    motion = loading.apply_vpd_specs(model, motion, job.vpd, option=names["vpd"], warn=warn, shown=shown)
    camera = (loading.load_as(job.camera, Motion, "camera motion (.vmd)", names["camera"], warn=warn, shown=shown)
              if job.camera else None)
    return model, motion, camera


def output_frames_for(motion, camera, settings: dict):
    """(F,) motion frames and the output fps for an output's ``frames``/``fps`` settings."""
    from mmdkit.export.bake import output_frames

    fps = float(settings["fps"])
    spec = settings.get("frames")
    start, end, step = parse_range(spec, "frames") if spec else (0.0, None, None)
    if end is None:
        end = max(getattr(motion, "last_frame", 0) or 0, getattr(camera, "last_frame", 0) or 0)
    if step is not None:
        fps = MOTION_FPS / step
    return output_frames(motion, fps, start, end), fps


def _size(value) -> tuple:
    try:
        w, h = (int(v) for v in str(value).lower().split("x"))
    except ValueError:
        raise OptionError("size", f"'{value}' is not WIDTHxHEIGHT") from None
    return w, h


def _produce(job, output: str, folder: str, model, motion, camera, warn) -> dict:
    """Write one output of ``job`` into ``folder``; returns {filename, size, frames}."""
    settings = job.output_settings(output)
    frames, fps = output_frames_for(motion, camera, settings)
    filename = f"{job.name}.{output}"
    target = os.path.join(folder, filename)  # export and render write atomically (temporary file + rename)
    if output in RENDER_OUTPUTS:
        from mmdkit.render.pipeline import render_motion

        with naming(target):
            render_motion(model, motion, target, frames=frames[:1] if output == "png" else frames, camera=camera,
                          size=_size(settings.get("size", "1280x720")), fps=fps, msaa=int(settings.get("msaa", 4)),
                          physics=bool(settings["physics"]), audio=job.audio if output == "mp4" else None,
                          progress=False, warn=warn)
    else:
        from mmdkit.export import export

        opts = {k: v for k, v in settings.items() if k not in ("frames", "fps", "physics")}
        with naming(target):
            export(model, motion, target, frames=frames, fps=fps, physics=bool(settings["physics"]),
                   camera=camera if output in ("glb", "gltf") else None, warn=warn, **opts)
    return {"filename": filename, "size": os.path.getsize(target), "frames": 1 if output == "png" else len(frames)}


def _test_exit_hook(job) -> None:
    """Test hook (``test_exit_once``): the first attempt creates the marker file and dies abruptly."""
    if job.test_exit_once and not os.path.exists(job.test_exit_once):
        with open(job.test_exit_once, "w") as f:
            f.write(str(os.getpid()))
        os._exit(17)


def one_line(e: BaseException) -> str:
    """An exception as the one line a results row reports."""
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    text = " ".join(str(e).split())
    return text if isinstance(e, MmdkitError) else f"{type(e).__name__}: {text}"


def _run(job, store, warnings: list) -> tuple[list, int]:
    warn = lambda msg: warnings.append(" ".join(str(msg).split()))  # noqa: E731
    model, motion, camera = job_inputs(job, warn)
    done, frames = [], 0
    with store.job_folder(job.name) as folder:
        for output in job.outputs:
            done.append(_produce(job, output, folder, model, motion, camera, warn))
            frames = max(frames, done[-1]["frames"])
            _test_exit_hook(job)
        store.publish(job.name, folder, [d["filename"] for d in done])
    return done, frames


def rss_mb() -> float:
    """This process's resident memory in MiB now (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def run_job(job, store) -> dict:
    """Run ``job``; never raises for a job's own problem (a failed row names it on one line)."""
    t0, c0 = time.perf_counter(), time.process_time()
    warnings = []
    try:
        done, frames = _run(job, store, warnings)
        seconds = time.perf_counter() - t0
        record = {"key": job.key, "name": job.name, "frames": frames, "seconds": round(seconds, 3),
                  "outputs": [{"filename": d["filename"], "size": d["size"]} for d in done]}
        store.write_record(job.name, record)
    except Exception as e:  # a job's failure (MemoryError included) is its row, never the batch's end
        return job_row(job, "failed", seconds=round(time.perf_counter() - t0, 3), warnings=warnings,
                       error=f"{one_line(e)}", pid=os.getpid(), rss_mb=round(rss_mb(), 1),
                       cpu_seconds=round(time.process_time() - c0, 3))
    return job_row(job, "ok", seconds=round(seconds, 3), frames=frames, warnings=warnings, pid=os.getpid(),
                   rss_mb=round(rss_mb(), 1), cpu_seconds=round(time.process_time() - c0, 3),
                   outputs=[{"path": store.location(job.name, d["filename"]), "size": d["size"]} for d in done])
