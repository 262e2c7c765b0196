"""Model → PMX file bytes: chooses version, encoding and index sizes, then writes each
section with its module's writer.

In: a ``Model`` from any source. Out: PMX 2.0, or 2.1 when the model uses 2.1 features; the
index sizes and text encoding of a PMX source are kept when the counts still fit, so an
unchanged model gives its file's bytes back.
"""

from __future__ import annotations

import numpy as np

from mmdkit.formats.pmx import bones, materials, morphs, physics, vertices
from mmdkit.formats.pmx.common import KIND_ORDER, PmxWriter
from mmdkit.formats.pmx.header import write_header
from mmdkit.model import model as M


def _min_size(n: int, unsigned: bool) -> int:
    if unsigned:
        return 1 if n <= 255 else 2 if n <= 65535 else 4
    return 1 if n <= 127 else 2 if n <= 32767 else 4


def _needs_21(model) -> bool:
    return bool(model.soft_bodies) or bool(np.isin(model.morph_kind, (M.MORPH_FLIP, M.MORPH_IMPULSE)).any()) or \
        bool((model.joint_type != 0).any()) or bool((model.vertex_deform == M.DEFORM_QDEF).any()) or \
        bool((model.material_flags >= M.MATERIAL_VERTEX_COLOR).any())


def _index_sizes(model, extras: dict) -> dict:
    """kind → index size: the smallest that fits, or the source's when larger."""
    counts = {"vertex": model.num_vertices, "texture": len(model.texture_path), "material": model.num_materials,
              "bone": model.num_bones, "morph": model.num_morphs, "rigid": model.num_rigid_bodies}
    sizes = {k: _min_size(counts[k], k == "vertex") for k in KIND_ORDER}
    for k, s in (extras.get("index_sizes") or {}).items():
        if k in sizes and s >= sizes[k]:
            sizes[k] = s
    return sizes


def write_pmx(model) -> bytes:
    """Serialise a ``Model`` (from any source) as PMX (see the module docstring)."""
    ex = model.source_extras if model.source_format == "pmx" else {}
    version = 2.1 if model.soft_bodies else ex.get("version") or (2.1 if _needs_21(model) else 2.0)
    w = PmxWriter(ex.get("encoding", "utf-16-le") == "utf-8", _index_sizes(model, ex))
    A = model.vertex_additional_uv.shape[1] if model.vertex_additional_uv is not None else 0
    write_header(w, model, ex, version, A)
    vertices.write_vertices(w, model, ex, A)
    vertices.write_faces(w, model)
    materials.write_textures(w, model)
    materials.write_materials(w, model)
    bones.write_bones(w, model, ex)
    morphs.write_morphs(w, model)
    morphs.write_display_frames(w, model)
    physics.write_rigid_bodies(w, model)
    physics.write_joints(w, model)
    if version >= 2.1:
        physics.write_soft_bodies(w, model)
    if ex.get("trailing"):
        w.raw(ex["trailing"])
    return w.getvalue()
