"""glTF 2.0 / GLB files → MMD ``Model`` and clip ``Motion``s (the registry's .gltf/.glb reader).

In: a path (or the file's bytes and path). Out: ``load_gltf_model(path)`` → Model;
``load_gltf_scene(path)`` → (Model, Clips); ``read_gltf_model(data, path)`` is what
``mmdkit.load`` calls. Reading is ``mmdkit.formats.gltf``; conversion is ``import_scene``.
"""

from __future__ import annotations

from mmdkit.formats.gltf import read_gltf
from mmdkit.formats.io import read_bytes
from mmdkit.importers.clips import Clips
from mmdkit.importers.scene import import_scene
from mmdkit.model.model import Model


def read_gltf_scene(data: bytes, path: str = "") -> tuple[Model, Clips]:
    """Bytes of a .gltf/.glb (external files looked up beside ``path``) → (Model, Clips)."""
    return import_scene(read_gltf(data, path))


def read_gltf_model(data: bytes, path: str = "") -> Model:
    """Bytes of a .gltf/.glb → Model (its clips: ``read_gltf_scene`` / ``load_clips``)."""
    return read_gltf_scene(data, path)[0]


def load_gltf_scene(path) -> tuple[Model, Clips]:
    """A .gltf/.glb file → (Model, Clips: {clip name: Motion}, baked on first access)."""
    return read_gltf_scene(read_bytes(path), str(path))


def load_gltf_model(path) -> Model:
    """A .gltf/.glb file → Model (MMD space: left-handed, 12.5 units per metre)."""
    return load_gltf_scene(path)[0]
