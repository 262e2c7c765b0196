"""Importers: rigged characters from other formats → the one MMD ``Model`` + clip ``Motion``s.

``import_scene(scene)`` turns a GltfAsset-like scene (glTF, or Assimp's through
``importers.assimp``) into (Model, Clips); ``load_gltf_model(path)`` / ``load_gltf_scene(path)``
read .gltf/.glb files, which ``mmdkit.load`` also reads (``mmdkit`` registers this package's
readers with ``mmdkit.formats``). ``clips_of(model)`` gives the clips an imported model carries:
{name: Motion}, frame f = time f/30 s of the clip.
"""

from mmdkit.importers.clips import Clips, clip_motion
from mmdkit.importers.gltf import load_gltf_model, load_gltf_scene, read_gltf_model, read_gltf_scene
from mmdkit.importers.scene import clips_of, import_scene
from mmdkit.model.space import MMD_UNITS_PER_METRE

__all__ = ["import_scene", "clips_of", "Clips", "clip_motion", "load_gltf_model", "load_gltf_scene",
           "read_gltf_model", "read_gltf_scene", "MMD_UNITS_PER_METRE"]
