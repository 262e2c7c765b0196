"""A small on-disk cache of the GLBs the viewer serves, so that viewing a model again skips its export.

In: the model file's path. Out: ``glb_cache_key(path)`` → a hex key, or None when the model has
no file; ``cached_glb(key)`` → bytes or None; ``store_glb(key, glb)`` (atomic; keeps the
``KEEP`` newest). The key covers what the GLB depends on: the model file and every file beside
it (textures; name, size, modification time, up to ``MAX_FILES``) and mmdkit's own sources (a
changed exporter or reader never serves an old GLB). Folder: $MMDKIT_CACHE or
$XDG_CACHE_HOME/mmdkit/viewer (~/.cache/mmdkit/viewer); unwritable → no caching, no error.
"""

from __future__ import annotations

import hashlib
import os

from mmdkit.fileutil import atomic_path

KEEP = 8
"""GLBs kept in the cache folder (the most recently used)."""
MAX_FILES = 2000
"""Most files beside the model that go into the key; a folder with more is not cached."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_folder() -> str:
    base = os.environ.get("MMDKIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "mmdkit")
    return os.path.join(base, "viewer")


def _stats(root: str, suffix: str = "", limit: int | None = None) -> list | None:
    """[(relative path, size, mtime_ns)] of the files under ``root`` ending in ``suffix``, sorted;
    None when there are more than ``limit``."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
        for name in files:
            if name.endswith(suffix):
                st = os.stat(os.path.join(folder, name))
                out.append((os.path.relpath(os.path.join(folder, name), root), st.st_size, st.st_mtime_ns))
                if limit is not None and len(out) > limit:
                    return None
    return sorted(out)


def glb_cache_key(model_path) -> str | None:
    """The key of the GLB of the model read from ``model_path`` (None: do not cache)."""
    if not model_path or not os.path.isfile(model_path):
        return None
    path = os.path.abspath(os.fspath(model_path))
    beside = _stats(os.path.dirname(path), limit=MAX_FILES)
    if beside is None:
        return None
    text = repr((path, beside, _stats(_PACKAGE, ".py")))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def cached_glb(key: str | None) -> bytes | None:
    if key is None:
        return None
    path = os.path.join(cache_folder(), key + ".glb")
    try:
        with open(path, "rb") as f:
            data = f.read()
        os.utime(path)  # most recently used
        return data
    except OSError:
        return None


def store_glb(key: str | None, glb: bytes) -> None:
    if key is None:
        return
    folder = cache_folder()
    try:
        os.makedirs(folder, exist_ok=True)
        with atomic_path(os.path.join(folder, key + ".glb")) as tmp, open(tmp, "wb") as f:
            f.write(glb)
        entries = sorted((e for e in os.scandir(folder) if e.name.endswith(".glb")),
                         key=lambda e: e.stat().st_mtime_ns, reverse=True)
        for e in entries[KEEP:]:
            os.remove(e.path)
    except OSError:
        pass  # a cache that cannot be written is no cache
