"""PMX file → dict of Model fields: the header, then each section's reader in file order.

In: the bytes of a .pmx file. Out: ``dict`` keyed by ``Model`` field names plus
``source_extras`` (version, encoding, index sizes, section offsets, raw details for
write-back) and ``warnings``; ``load_pmx`` builds it into a ``Model``.
"""

from __future__ import annotations

from mmdkit.errors import FormatError
from mmdkit.formats.pmx import bones, materials, morphs, physics, vertices
from mmdkit.formats.pmx.common import PmxReader
from mmdkit.formats.pmx.header import MAGICS, read_header


def load_pmx(data: bytes, path: str = ""):
    """Bytes of a .pmx file → validated ``Model``."""
    from mmdkit.model.build import build_model

    return build_model(read_pmx(data, path))


def read_pmx(data: bytes, path: str = "") -> dict:
    """Parse a PMX file into a dict of Model fields (see the package docstring)."""
    try:
        return _read_pmx(data, path, None)
    except FormatError as first:
        # Quirk: 1-byte bone indices declared, 2-byte written (some exporters).
        if len(data) >= 17 and data[:4] in MAGICS and data[8] >= 8 and data[14] == 1:
            try:
                out = _read_pmx(data, path, 2)
            except FormatError:
                raise first from None
            if not out["source_extras"].get("trailing"):
                out["warnings"] = (f"header declares 1-byte bone indices but the vertices use 2-byte ones; "
                                   f"read them as 2-byte (strict read failed: {first.detail} in "
                                   f"'{first.section}' at byte {first.offset})",) + tuple(out["warnings"])
                return out
        raise


# section name → reader, in file order (vertices take the additional UV count)
_SECTIONS = (("vertices", None), ("faces", vertices.read_faces), ("textures", materials.read_textures),
             ("materials", materials.read_materials), ("bones", bones.read_bones), ("morphs", morphs.read_morphs),
             ("display frames", morphs.read_display_frames), ("rigid bodies", physics.read_rigid_bodies),
             ("joints", physics.read_joints))


def _read_pmx(data: bytes, path: str, vertex_bone_size) -> dict:
    r = PmxReader(data, path)
    f: dict = {}
    h = read_header(r, f)
    if vertex_bone_size:
        r.sizes["vertex_bone"] = vertex_bone_size
    offsets = {}
    for section, read in _SECTIONS:
        r.section = section
        offsets[section] = r.pos
        if read is None:
            vertices.read_vertices(r, f, h.additional_uv)
        else:
            read(r, f)
    f["soft_bodies"] = ()
    if h.version >= 2.1 and r.remaining > 0:
        r.section = "soft bodies"
        physics.read_soft_bodies(r, f)
    extras = {"format": "pmx", "version": h.version, "encoding": "utf-8" if h.utf8 else "utf-16-le",
              "index_sizes": h.sizes, "globals": h.globals, "magic": h.magic,
              "ik_link_has_limit_raw": f.pop("ik_link_has_limit_raw"), "section_offsets": offsets}
    if vertex_bone_size:
        extras["vertex_bone_index_size_written"] = vertex_bone_size
    if r.remaining:
        extras["trailing"] = data[r.pos:]
        r.warnings.append(f"{r.remaining} bytes after the last section (byte {r.pos}) kept but ignored")
    f.update(source_format="pmx", source_path=str(path), source_extras=extras, warnings=tuple(r.warnings))
    return f
