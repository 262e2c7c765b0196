"""File formats: bytes ⇄ Model / Motion / Pose, one reader and one writer per extension.

Importing this package registers the built-in formats (lazily: a format's module is imported
the first time a file of its type is read or written). Another reader or writer plugs in with
one call, e.g. ``register_reader(".glb", "mmdkit.formats.gltf:read_gltf", "model")``.
"""

from mmdkit.animation.motion import Motion, Pose
from mmdkit.formats.registry import register_reader, register_writer
from mmdkit.model.model import Model

register_reader(".pmx", "mmdkit.formats.pmx:load_pmx", "model")
register_reader(".pmd", "mmdkit.formats.pmd:load_pmd", "model")
register_reader(".vmd", "mmdkit.formats.vmd:read_vmd", "motion")
register_reader(".vpd", "mmdkit.formats.vpd:read_vpd", "pose")
# imported characters (layer 3 beside formats; named by string, so formats never imports importers)
register_reader(".glb", "mmdkit.importers.gltf:read_gltf_model", "model")
register_reader(".gltf", "mmdkit.importers.gltf:read_gltf_model", "model")
register_reader(".vrm", "mmdkit.importers.gltf:read_gltf_model", "model")  # VRM 0.x/1.0: GLB + humanoid
# through the system Assimp (the C++ bridge of mmdkit.importers.assimp)
ASSIMP_EXTENSIONS = (".fbx", ".x", ".dae", ".bvh", ".obj", ".3ds", ".ms3d", ".b3d", ".smd", ".md5mesh", ".iqm",
                     ".ply", ".stl", ".off", ".lwo", ".ase", ".ac", ".md2", ".md3", ".mdl", ".ogex", ".3mf")
for _ext in ASSIMP_EXTENSIONS:
    register_reader(_ext, "mmdkit.importers.assimp:read_assimp_model", "model")
register_writer(".pmx", Model, "mmdkit.formats.pmx:write_pmx")
register_writer(".pmd", Model, "mmdkit.formats.pmd:write_pmd")
register_writer(".vmd", Motion, "mmdkit.formats.vmd:write_vmd")
register_writer(".vpd", Pose, "mmdkit.formats.vpd:write_vpd")
