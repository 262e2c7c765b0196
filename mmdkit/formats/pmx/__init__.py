"""PMX 2.0/2.1 reader and writer: bytes ⇄ a dict of ``Model`` field arrays.

In (read): the bytes of a .pmx file. Out: ``dict`` keyed by ``Model`` field names (numpy
arrays as documented in ``mmdkit.model.model``) plus ``source_extras``/``warnings``; build it
with ``mmdkit.model.build.build_model`` (``load_pmx`` does both). Write: ``write_pmx(model)
-> bytes``. One module per group of sections (header, vertices, materials, bones, morphs,
physics), each holding its record tables and both directions.

Quirks handled (see docs/formats.md): a file that declares 1-byte bone indices but writes
2-byte ones is re-read with 2-byte bone indices when that consumes the file exactly, with a
warning; bytes after the last section are kept (``source_extras['trailing']``) with a warning.
"""

from mmdkit.formats.pmx.physics import SoftBodyRecord
from mmdkit.formats.pmx.reader import load_pmx, read_pmx
from mmdkit.formats.pmx.writer import write_pmx

__all__ = ["SoftBodyRecord", "load_pmx", "read_pmx", "write_pmx"]
