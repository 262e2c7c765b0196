"""Native glTF 2.0 / GLB reader: bytes → frozen ``GltfAsset`` (glTF space, not yet MMD).

In: a ``.gltf`` (JSON + data: URIs or external files beside it) or ``.glb`` file.
Out: ``GltfAsset`` — node hierarchy with rest TRS and matrices, triangulated mesh primitives with
skin weights and morph targets, skins (joints, inverse bind matrices), materials (base colour,
texture image bytes, alpha mode, double-sided), and animation clips with a vectorised sampler.

Entry points::

    from mmdkit.formats.gltf import read_gltf, load_gltf, sample_channel, clip_node_trs
    asset = load_gltf("Fox.glb")                      # or read_gltf(data, path, base_dir=None)
    t, r, s = clip_node_trs(asset, "Run", times)      # (T, N, 3), (T, N, 4), (T, N, 3)
    world = world_matrices(asset.node_parent, asset.node_order, clip_node_local(asset, "Run", times))

Why our own parsing instead of pygltflib: pygltflib turns every JSON element into a Python object
and still leaves accessor decoding (strides, normalisation, sparse, matrix padding) to the caller.
Parsing the JSON with ``json`` and decoding accessors directly into numpy views over the file's
bytes is a few hundred lines, validates every index and length with the JSON path in the message,
and loads RobotExpressive.glb / Fox.glb well within the 50 ms warm target.
Registration of .gltf/.glb in the format registry and conversion into ``Model``/``Motion`` live
elsewhere (the importer); this package only reads.
"""

from mmdkit.formats.gltf.animation import clip_node_local, clip_node_trs, clip_target_weights, sample_channel
from mmdkit.formats.gltf.asset import (GltfAnimation, GltfAsset, GltfChannel, GltfImage, GltfMaterial,
                                       GltfMesh, GltfPrimitive, GltfSkin)
from mmdkit.formats.gltf.reader import load_gltf, read_gltf
from mmdkit.formats.gltf.scene import trs_matrices, world_matrices

__all__ = ["read_gltf", "load_gltf", "sample_channel", "clip_node_trs", "clip_node_local",
           "clip_target_weights", "trs_matrices", "world_matrices",
           "GltfAsset", "GltfMesh", "GltfPrimitive", "GltfSkin", "GltfMaterial", "GltfImage",
           "GltfAnimation", "GltfChannel"]
