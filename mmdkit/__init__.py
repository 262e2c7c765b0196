"""mmdkit: load, animate, simulate, skin and render MikuMikuDance data, headless.

Entry points: ``load(path)`` → Model | Motion | Pose; ``save(obj, path)``; ``view(model, motion)``
(an interactive viewer in the browser or inline in Jupyter). Importing the package registers the
importers' readers (.glb/.gltf/.vrm, Assimp's formats) with ``mmdkit.formats``, beside MMD's own
formats, so every ``load`` — this one or ``mmdkit.formats.io.load`` — reads them; each importer
module is imported the first time a file of its kind is read.
"""

from __future__ import annotations

import mmdkit.threads  # noqa: F401  (numba's threads set up before any kernel runs)
from mmdkit.animation.motion import Motion, Pose
from mmdkit.errors import (BuildError, FormatError, MmdkitError, OptionError, PhysicsError, RenderError,
                           UnavailableError)
from mmdkit.formats import ASSIMP_EXTENSIONS, register_reader
from mmdkit.model.model import Model

__version__ = "0.1.0"
__all__ = ["Model", "Motion", "Pose", "FormatError", "BuildError", "MmdkitError", "OptionError", "UnavailableError",
           "PhysicsError", "RenderError", "load", "save", "view", "run", "Take", "Output"]


def _read_gltf(data: bytes, path: str = "") -> Model:
    """A .glb/.gltf/.vrm file's bytes → Model (``mmdkit.importers.gltf``)."""
    from mmdkit.importers.gltf import read_gltf_model

    return read_gltf_model(data, path)


def _read_assimp(data: bytes, path: str = "") -> Model:
    """A file Assimp reads (.fbx, .x, .dae, …) → Model (``mmdkit.importers.assimp``)."""
    from mmdkit.importers.assimp import read_assimp_model

    return read_assimp_model(data, path)


for _ext in (".glb", ".gltf", ".vrm"):  # VRM 0.x/1.0: a GLB with a humanoid
    register_reader(_ext, _read_gltf, "model")
for _ext in ASSIMP_EXTENSIONS:
    register_reader(_ext, _read_assimp, "model")


def load(path):
    """Read a PMX/PMD (→ Model), VMD (→ Motion) or VPD (→ Pose) file, chosen by extension."""
    from mmdkit.formats.io import load as _load

    return _load(path)


def save(obj, path):
    """Write a Model (.pmx/.pmd), Motion (.vmd) or Pose (.vpd) atomically (temp file + rename)."""
    from mmdkit.formats.io import save as _save

    return _save(obj, path)


def view(model, motion=None, *, camera=None, audio=None, physics: bool = True, host: str = "127.0.0.1",
         port: int = 0, open_browser: bool = False, viewer=None, notes: dict | None = None, cache: bool = False,
         crowd: int = 1):
    """Serve an interactive viewer of ``model`` (a Model or a path) playing ``motion`` (Motion, Pose,
    path or None) with its physics: timeline, orbit camera or ``camera`` (camera VMD), physics /
    bones / rigid bodies / hit-box toggles, ``audio`` (a song) in sync. Returns a ``Viewer`` (its
    ``url``, ``stop()``); as a notebook cell's value it shows the page inline. ``port`` 0: a free
    one; ``viewer``: one already started (``mmdkit.viewer.start``) to show this model. The page
    loads the model as a GLB from mmdkit's exporter and streams the pose per frame; ``cache``:
    keep that GLB on disk for the next time (``mmdkit.viewer.cache``; only for a model as read
    from its file, unchanged); ``crowd``: that many characters, laid out as ``mmdkit render
    --crowd`` lays them out."""
    import os
    import tempfile
    import time
    import webbrowser

    from mmdkit.export.gltf import write_gltf
    from mmdkit.export.gltf.animation import camera_pose
    from mmdkit.model.space import MMD_UNITS_PER_METRE, Space
    from mmdkit.viewer import num_frames, start
    from mmdkit.viewer.cache import cached_glb, glb_cache_key, store_glb

    viewer = start(host, port) if viewer is None else viewer
    if open_browser:
        webbrowser.open(viewer.url)  # the browser starts while the model loads; the page waits for it
    try:
        t0 = time.perf_counter()
        model, motion, camera = (load(x) if isinstance(x, (str, os.PathLike)) else x for x in (model, motion, camera))
        notes = dict(notes or {})
        timings = notes.setdefault("timings", {})
        timings.setdefault("load", 1e3 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        key = glb_cache_key(model.source_path) if cache else None
        glb, scale = cached_glb(key), 1.0 / MMD_UNITS_PER_METRE  # the exporter's default scale
        label = "GLB (cached)" if glb is not None else "GLB export"
        if glb is None:
            with tempfile.TemporaryDirectory(prefix="mmdkit-view-") as tmp:
                path = os.path.join(tmp, "model.glb")
                write_gltf(model, None, path, scale=scale, warn=lambda message: None)
                with open(path, "rb") as f:
                    glb = f.read()
            store_glb(key, glb)
        timings[label] = 1e3 * (time.perf_counter() - t0)
        frames = num_frames(motion, camera)
        track = None
        if camera is not None:
            import numpy as np

            eye, rotation, fov = camera_pose(camera, np.arange(frames, dtype=np.float64), Space(scale=scale))
            track = np.concatenate([eye, rotation, fov[:, None]], 1).astype(np.float32)
        return viewer.show(model, motion, glb, scale=scale, physics=physics, camera_track=track, audio_path=audio,
                           frames=frames, notes=notes, crowd=crowd)
    except BaseException:
        viewer.stop()
        raise


def run(take, *, warn=print, progress: bool = False) -> list:
    """Write every output of ``take`` (a ``Take``) from one pass: validated before anything is
    loaded, inputs loaded once, frames posed and simulated once (``mmdkit.io.run``). Returns one
    summary dict per output.

    >>> mmdkit.run(mmdkit.Take("Gene.pmx", "dance.vmd", frames="0:300",
    ...                        outputs=[mmdkit.Output("dance.mp4", {"size": (640, 360)}),
    ...                                 mmdkit.Output("dance.glb"), mmdkit.Output("dance.npz")]))
    """
    from mmdkit.io import run as _run

    return _run(take, warn=warn, progress=progress)


def __getattr__(name):
    # Take / Output come with the runtime (numba): imported on first use, so ``import mmdkit`` stays light
    if name in ("Take", "Output"):
        from mmdkit.runtime import take

        return getattr(take, name)
    raise AttributeError(f"module 'mmdkit' has no attribute {name!r}")
