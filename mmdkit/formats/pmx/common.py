"""What every PMX section shares: index sizes per kind, the text codec, the section cursor.

In: the header's globals (text encoding, index sizes). Out: ``PmxReader`` (a ``BinaryReader``
with ``text()`` and ``index(kind)``), ``PmxWriter`` (a ``BinaryWriter`` with the same two),
and numpy dtypes of index fields for the section record tables.
"""

from __future__ import annotations

import struct

from mmdkit.formats.binary import I32, BinaryReader, BinaryWriter

KIND_ORDER = ("vertex", "texture", "material", "bone", "morph", "rigid")  # header globals 2..7

IDX_STRUCT = {(1, False): struct.Struct("<b"), (2, False): struct.Struct("<h"), (4, False): struct.Struct("<i"),
              (1, True): struct.Struct("<B"), (2, True): struct.Struct("<H"), (4, True): struct.Struct("<i")}


def idx_dtype(size: int, unsigned: bool = False) -> str:
    """numpy dtype of a ``size``-byte index (vertex indices are unsigned below 4 bytes)."""
    if size == 1:
        return "u1" if unsigned else "i1"
    if size == 2:
        return "<u2" if unsigned else "<i2"
    return "<i4"


def index_dtypes(sizes: dict) -> dict:
    """kind → dtype of its index for ``binary.record`` tables ('vertex', 'bone', ...)."""
    return {k: idx_dtype(s, k == "vertex") for k, s in sizes.items()}


class PmxReader(BinaryReader):
    """The file cursor plus the header's text encoding and index sizes."""

    __slots__ = ("utf8", "sizes")

    def text(self) -> str:
        n = self.one(I32)
        if n < 0 or n > self.end - self.pos:
            raise self.error(f"text length {n} exceeds the {self.end - self.pos} bytes that remain", self.pos - 4)
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        if self.utf8:
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                self.warnings.append(f"{self.section}: invalid UTF-8 text at byte {self.pos - n}; replaced")
                return b.decode("utf-8", errors="replace")
        try:
            return b.decode("utf-16-le")
        except UnicodeDecodeError:
            self.warnings.append(f"{self.section}: invalid UTF-16 text at byte {self.pos - n}; kept with surrogates")
            return b.decode("utf-16-le", errors="surrogatepass" if n % 2 == 0 else "replace")

    def index(self, kind: str) -> int:
        return self.one(IDX_STRUCT[(self.sizes[kind], kind == "vertex")])


class PmxWriter(BinaryWriter):
    """Accumulates a PMX file; ``text``/``index`` follow the chosen encoding and index sizes."""

    __slots__ = ("utf8", "sizes")

    def __init__(self, utf8: bool, sizes: dict):
        super().__init__()
        self.utf8 = utf8
        self.sizes = sizes

    def text(self, s: str) -> None:
        b = s.encode("utf-8" if self.utf8 else "utf-16-le", errors="surrogatepass")
        self.parts.append(I32.pack(len(b)) + b)

    def index(self, kind: str, v) -> None:
        self.parts.append(IDX_STRUCT[(self.sizes[kind], kind == "vertex")].pack(int(v)))
