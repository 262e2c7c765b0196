"""File formats: bytes ⇄ Model / Motion / Pose, one reader and one writer per extension.

Importing this package registers MMD's own formats (.pmx .pmd .vmd .vpd, ``formats/registry.py``).
Each is registered as a small function that imports the format's module the first time a file of
its type is read or written (the PMX reader's numba kernels cost ~0.2 s to import). Formats from
higher layers plug into the same registry by calling ``register_reader`` with their own function:
``mmdkit`` (the package's front door) registers the importers' .glb/.gltf/.vrm and the extensions
read through Assimp (``ASSIMP_EXTENSIONS``), so this package never reaches up to them.
"""

from mmdkit.animation.motion import Motion, Pose
from mmdkit.formats.registry import register_reader, register_writer
from mmdkit.model.model import Model

ASSIMP_EXTENSIONS = (".fbx", ".x", ".dae", ".bvh", ".obj", ".3ds", ".ms3d", ".b3d", ".smd", ".md5mesh", ".iqm",
                     ".ply", ".stl", ".off", ".lwo", ".ase", ".ac", ".md2", ".md3", ".mdl", ".ogex", ".3mf")
"""Extensions ``mmdkit.load`` reads through the system Assimp (``mmdkit.importers.assimp``)."""


def _read_pmx(data: bytes, path: str = "") -> Model:
    from mmdkit.formats.pmx import load_pmx

    return load_pmx(data, path)


def _read_pmd(data: bytes, path: str = "") -> Model:
    from mmdkit.formats.pmd import load_pmd

    return load_pmd(data, path)


def _read_vmd(data: bytes, path: str = "") -> Motion:
    from mmdkit.formats.vmd import read_vmd

    return read_vmd(data, path)


def _read_vpd(data: bytes, path: str = "") -> Pose:
    from mmdkit.formats.vpd import read_vpd

    return read_vpd(data, path)


def _write_pmx(model: Model) -> bytes:
    from mmdkit.formats.pmx import write_pmx

    return write_pmx(model)


def _write_pmd(model: Model) -> bytes:
    from mmdkit.formats.pmd import write_pmd

    return write_pmd(model)


def _write_vmd(motion: Motion) -> bytes:
    from mmdkit.formats.vmd import write_vmd

    return write_vmd(motion)


def _write_vpd(pose: Pose) -> bytes:
    from mmdkit.formats.vpd import write_vpd

    return write_vpd(pose)


register_reader(".pmx", _read_pmx, "model")
register_reader(".pmd", _read_pmd, "model")
register_reader(".vmd", _read_vmd, "motion")
register_reader(".vpd", _read_vpd, "pose")
register_writer(".pmx", Model, _write_pmx)
register_writer(".pmd", Model, _write_pmd)
register_writer(".vmd", Motion, _write_vmd)
register_writer(".vpd", Pose, _write_vpd)
