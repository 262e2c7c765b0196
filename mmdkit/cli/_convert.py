"""What ``mmdkit convert`` must tell about a model: what PMD cannot hold, and its texture files.

In: a loaded Model, the source and destination paths. Out: ``pmd_losses`` — one line per kind
of data a PMD drops or simplifies (morph kinds, BDEF4/QDEF/SDEF vertices, soft bodies,
additional UVs); ``import_losses`` — the same for an imported (glTF) model; ``carry_textures`` —
copies the model's texture files (and writes the images a GLB holds) into the destination
folder at the same relative paths, so the stored (relative) paths stay valid there. Paths are
copied rather than rewritten: a rewritten path would leave the model's folder ('../'), which
the renderer refuses. Files are looked up as the renderer and the glTF exporter do
(``mmdkit.model.textures.texture_source``), the PMD toon files a model may use are the material
table's (``mmdkit.model.materials``), and files are copied as they are (a texture over
``MAX_TEXTURE_EDGE`` is downscaled where it is drawn or exported, not here).
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from mmdkit.errors import FormatError
from mmdkit.fileutil import atomic_path
from mmdkit.model import model as M
from mmdkit.model.materials import material_table
from mmdkit.model.textures import texture_source

_MORPH_KIND_NAMES = {M.MORPH_GROUP: "group", M.MORPH_BONE: "bone", M.MORPH_UV: "UV", M.MORPH_UV1: "additional-UV",
                     M.MORPH_UV2: "additional-UV", M.MORPH_UV3: "additional-UV", M.MORPH_UV4: "additional-UV",
                     M.MORPH_MATERIAL: "material", M.MORPH_FLIP: "flip", M.MORPH_IMPULSE: "impulse"}


def pmd_losses(model) -> list[str]:
    """One line per kind of data that writing ``model`` as a PMD drops or simplifies."""
    lines = []
    counts: dict[str, int] = {}
    for k in np.asarray(model.morph_kind):
        if int(k) != M.MORPH_VERTEX:
            name = _MORPH_KIND_NAMES.get(int(k), f"kind-{int(k)}")
            counts[name] = counts.get(name, 0) + 1
    if counts:
        kinds = ", ".join(f"{n} {name}" for name, n in counts.items())
        lines.append(f"dropped {sum(counts.values())} morphs PMD cannot hold (only vertex morphs): {kinds}")
    deform = np.asarray(model.vertex_deform)
    many = np.isin(deform, (M.DEFORM_BDEF4, M.DEFORM_QDEF))
    if many.any():
        lost = int(((np.asarray(model.vertex_bone_weight)[many] > 0).sum(axis=1) > 2).sum())
        lines.append(f"{int(many.sum())} BDEF4/QDEF vertices written as BDEF2 (the two heaviest bones; "
                     f"{lost} of them lose weight on a third or fourth bone)")
    sdef = int((deform == M.DEFORM_SDEF).sum())
    if sdef:
        lines.append(f"{sdef} SDEF vertices written as BDEF2 (linear blend)")
    if model.num_soft_bodies:
        lines.append(f"dropped {model.num_soft_bodies} soft bodies")
    extra_uv = 0 if model.vertex_additional_uv is None else model.vertex_additional_uv.shape[1]
    if extra_uv:
        lines.append(f"dropped {extra_uv} additional UV channels")
    return lines


def _texture_names(model) -> tuple[list[str], set[str]]:
    """(stored texture paths, plus the toon files its materials may take from its folder — a PMD's
    shared toon01..10.bmp; those optional ones, which may be absent)."""
    optional = sorted({im.toon for im in material_table(model).images if im.toon_optional})
    return [t for t in model.texture_path if t] + optional, set(optional)


def _write_embedded(embedded: dict[str, bytes], dst_dir: str) -> int:
    """Write the images an imported model holds (glTF/GLB) as files under ``dst_dir`` at their
    stored names (never over an existing file); returns how many were written."""
    written = 0
    for name, data in embedded.items():
        target = os.path.join(dst_dir, *name.split("/"))
        if os.path.exists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with atomic_path(target) as tmp, open(tmp, "wb") as fh:
            fh.write(data)
        written += 1
    return written


def import_losses(model) -> list[str]:
    """What a PMX/PMD made from an imported model (glTF) does not hold: reduced weights, morph
    normals, and the clips (a model file holds no motion)."""
    ex = model.source_extras or {}
    lines = list(ex.get("import_losses", ()))
    clips = ex.get("clips", ())
    if clips:
        lines.append(f"dropped {len(clips)} clips ({', '.join(clips[:5])}{', …' if len(clips) > 5 else ''}): a "
                     "model file holds no motion; write one with 'mmdkit convert SRC OUT.vmd --clip NAME'")
    return lines


def carry_textures(model, src: str, dst: str) -> tuple[int, list[str]]:
    """Copy the texture files of ``model`` (read from ``src``) beside ``dst`` at the same relative
    paths. Returns (files copied, messages about files that could not be carried)."""
    src_dir = os.path.realpath(os.path.dirname(os.path.abspath(src)))
    dst_dir = os.path.realpath(os.path.dirname(os.path.abspath(dst)))
    embedded = (model.source_extras or {}).get("embedded_textures", {})
    copied = _write_embedded(embedded, dst_dir)
    if src_dir == dst_dir:
        return copied, []
    notes = []
    names, optional = _texture_names(model)
    for stored in dict.fromkeys(n for n in names if n not in embedded):
        try:
            found = texture_source(stored, src_dir, None)  # the lookup the renderer and exporter use
        except FormatError as e:  # leaves the model folder
            notes.append(f"{e}; not copied")
            continue
        if found is None:
            if stored not in optional:
                notes.append(f"texture '{stored}' not found in {src_dir}; not copied")
            continue
        target = os.path.join(dst_dir, os.path.relpath(found, src_dir))
        if os.path.exists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with atomic_path(target) as tmp:
            shutil.copy2(found, tmp)
        copied += 1
    return copied, notes
