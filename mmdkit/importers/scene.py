"""A skinned scene (``GltfAsset`` or alike) → MMD ``Model`` carrying its lazily baked clip ``Motion``s.

In: a scene with the ``GltfAsset`` fields (node hierarchy, meshes, skins, materials, images,
animations — see docs/import.md "Input contract"), in its own right-handed space. Out:
``import_scene(scene)`` → (``Model``, ``Clips``): MMD space (left-handed: z negated; ×
``unit_scale`` MMD units per scene unit, 12.5 for metres: ``mmdkit.model.space.Space``), whose
rest pose is the bind mesh (bones: ``skeleton``, meshes and materials: ``mesh``, clips:
``clips``). The Model carries its ``Clips`` in ``source_extras['clip_source']`` (copies made
with ``Model.replace`` share it); ``clips_of(model)`` reads it back.
"""

from __future__ import annotations

import numpy as np

from mmdkit.importers.clips import Clips
from mmdkit.importers.mesh import add_materials, add_meshes, texture_names
from mmdkit.importers.skeleton import Skeleton, build_skeleton, vrm_humanoid
from mmdkit.importers.vrm import add_expressions, mtoon_toons, vrm_extras
from mmdkit.model.build import build_model
from mmdkit.model.builder import ModelBuilder
from mmdkit.model.model import Model
from mmdkit.model.space import MMD_UNITS_PER_METRE, Space


def _add_bones(mb: ModelBuilder, sk: Skeleton, space: Space) -> None:
    """One rotatable, translatable MMD bone per skeleton bone, tail at its first child bone."""
    pos = space.points(sk.bone_position)
    first_child = np.full(len(sk.bone_node), -1, np.int32)
    for b in range(len(sk.bone_node) - 1, -1, -1):
        if sk.bone_parent[b] >= 0:
            first_child[sk.bone_parent[b]] = b
    for b, name in enumerate(sk.bone_name):
        mb.add_bone(name, pos[b], int(sk.bone_parent[b]), tail_bone=int(first_child[b]), translatable=True)


def import_scene(scene, *, unit_scale: float = MMD_UNITS_PER_METRE, flip_z: bool = True, name: str = "",
                 source_format: str = "gltf") -> tuple[Model, Clips]:
    """``scene`` (GltfAsset-like) → (Model in MMD space, ``Clips``: {clip name: Motion}, baked on
    first access). ``unit_scale``: MMD units per scene unit; ``flip_z``: the scene is right-handed;
    ``source_format``: the Model's (what ``mmdkit info`` shows, e.g. 'gltf', 'fbx')."""
    space = Space(float(unit_scale), bool(flip_z))
    warnings = list(getattr(scene, "warnings", ()))
    sk = build_skeleton(scene)
    mb = ModelBuilder(name or (scene.path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if scene.path else ""))
    _add_bones(mb, sk, space)
    toons, ramps = mtoon_toons(scene)  # VRM MToon materials: their own toon ramp images
    textures = add_materials(mb, scene, toons)
    textures.update(ramps)
    morph_names: list[str] = []
    losses = add_meshes(mb, scene, sk, space, warnings, morph_names)
    expressions = add_expressions(mb, scene, morph_names)
    f = mb.fields()
    clips = Clips(scene, sk, space, f["morph_name"])
    joints = {int(j) for s in scene.skins for j in s.joint_node}
    extras = {"embedded_textures": textures, "clips": clips.names, "clip_source": clips,
              "skin_joints": sum(int(n) in joints for n in sk.bone_node), "import_losses": losses}
    version, humanoid = vrm_humanoid(scene)
    if version:  # {humanoid bone as the file names it: model bone}, for mmdkit.retarget
        extras["vrm_humanoid"] = {"version": version, "bones": {k: int(sk.node_bone[n]) for k, n in humanoid.items()}}
        extras.update(vrm_expressions=expressions, **vrm_extras(scene, sk, space, texture_names(scene), warnings))
        if "vrm_springs" in extras:  # mmdkit simulates them; a PMX/PMD file has rigid bodies instead
            sp = extras["vrm_springs"]
            losses.append(f"VRM spring bones ({sp.num_joints} joints, {len(sp.collider_bone)} colliders) are not "
                          "written (MMD files simulate rigid bodies); mmdkit simulates them on the .vrm")
    f.update(source_format=source_format, source_path=scene.path, warnings=tuple(warnings), source_extras=extras)
    return build_model(f), clips


def clips_of(model: Model) -> Clips:
    """The ``Clips`` an imported model carries (``import_scene`` put them there; a copy made with
    ``Model.replace`` shares them); other models have none (an empty ``Clips``)."""
    clips = (model.source_extras or {}).get("clip_source")
    return clips if isinstance(clips, Clips) else Clips.empty()
