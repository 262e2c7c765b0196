"""PMD reader and writer: bytes ⇄ a dict of ``Model`` field arrays (the PMX-shaped model).

In (read): the bytes of a .pmd file (with the optional English-name, toon-texture and
physics extensions). Out: ``dict`` of Model fields for ``build_model`` (``load_pmd`` does
both). ``reader.py`` reads the sections as stored (``records.py`` layouts), ``convert.py``
turns PMD concepts into PMX ones, ``writer.py`` goes back: ``write_pmd(model) -> bytes``.
"""

from mmdkit.formats.pmd.convert import to_model
from mmdkit.formats.pmd.reader import read_raw
from mmdkit.formats.pmd.writer import write_pmd


def read_pmd(data: bytes, path: str = "") -> dict:
    """Parse a PMD file into a dict of Model fields."""
    return to_model(read_raw(data, path), path)


def load_pmd(data: bytes, path: str = ""):
    """Bytes of a .pmd file → validated ``Model``."""
    from mmdkit.model.build import build_model

    return build_model(read_pmd(data, path))


__all__ = ["load_pmd", "read_pmd", "write_pmd"]
