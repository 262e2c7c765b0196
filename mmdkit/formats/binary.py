"""Bounds-checked little-endian reading and writing of MMD binary files.

In: ``bytes`` of a whole file (+ its path for messages). Out: scalars, strings and numpy
views at a moving offset; every read checks the bytes that remain and raises
``FormatError(path, section, offset)`` instead of reading past the end or allocating from a
lying count.
"""

from __future__ import annotations

import struct

import numpy as np

from mmdkit.errors import FormatError

_S = {c: struct.Struct("<" + c) for c in ("B", "b", "H", "h", "I", "i", "f")}
U8, I8, U16, I16, U32, I32, F32 = (_S[c] for c in ("B", "b", "H", "h", "I", "i", "f"))
F32x2, F32x3, F32x4 = (struct.Struct(f"<{n}f") for n in (2, 3, 4))


class BinaryReader:
    """A cursor over ``data`` with checked reads. ``section`` names what is being read."""

    __slots__ = ("data", "pos", "end", "path", "section", "warnings")

    def __init__(self, data: bytes, path: str = "", pos: int = 0):
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.pos = pos
        self.end = len(self.data)
        self.path = str(path)
        self.section = "header"
        self.warnings: list[str] = []

    # --- errors -------------------------------------------------------------------------
    def error(self, detail: str, offset: int | None = None) -> FormatError:
        return FormatError(detail, path=self.path, section=self.section,
                           offset=self.pos if offset is None else offset)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, what: str = "") -> None:
        if n < 0 or self.pos + n > self.end:
            what = f" for {what}" if what else ""
            raise self.error(f"file ends early: needs {n} bytes{what}, only {self.end - self.pos} remain")

    # --- scalars ------------------------------------------------------------------------
    def unpack(self, st: struct.Struct):
        p = self.pos
        if p + st.size > self.end:
            self.need(st.size)
        self.pos = p + st.size
        return st.unpack_from(self.data, p)

    def u8(self) -> int:
        p = self.pos
        if p + 1 > self.end:
            self.need(1)
        self.pos = p + 1
        return self.data[p]

    def one(self, st: struct.Struct):
        p = self.pos
        if p + st.size > self.end:
            self.need(st.size)
        self.pos = p + st.size
        return st.unpack_from(self.data, p)[0]

    def i32(self) -> int:
        return self.one(I32)

    def u32(self) -> int:
        return self.one(U32)

    def u16(self) -> int:
        return self.one(U16)

    def f32(self) -> float:
        return self.one(F32)

    def raw(self, n: int) -> bytes:
        p = self.pos
        if p + n > self.end or n < 0:
            self.need(n)
        self.pos = p + n
        return self.data[p:p + n]

    def count(self, value: int, item_min_size: int, what: str, offset: int | None = None) -> int:
        """Check a count read from the file against the bytes that remain (before allocating)."""
        off = self.pos - 4 if offset is None else offset
        if value < 0:
            raise self.error(f"negative {what} count {value}", off)
        if value * item_min_size > self.end - self.pos:
            raise self.error(f"{what} count {value} needs at least {value * item_min_size} bytes, "
                             f"only {self.end - self.pos} remain", off)
        return value

    def i32_count(self, item_min_size: int, what: str) -> int:
        return self.count(self.i32(), item_min_size, what)

    def u32_count(self, item_min_size: int, what: str) -> int:
        return self.count(self.u32(), item_min_size, what)

    def array(self, dtype, n: int) -> np.ndarray:
        """``n`` items of ``dtype`` at the cursor, as a read-only view (no copy)."""
        dt = np.dtype(dtype)
        size = dt.itemsize * n
        if n < 0 or self.pos + size > self.end:
            self.need(size, f"{n} items")
        a = np.frombuffer(self.data, dt, n, self.pos)
        self.pos += size
        return a


class BinaryWriter:
    """Accumulates little-endian pieces; ``getvalue()`` joins them."""

    __slots__ = ("parts",)

    def __init__(self):
        self.parts: list[bytes] = []

    def pack(self, st: struct.Struct, *values) -> None:
        self.parts.append(st.pack(*values))

    def u8(self, v: int) -> None:
        self.parts.append(U8.pack(v))

    def u16(self, v: int) -> None:
        self.parts.append(U16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(I32.pack(v))

    def u32(self, v: int) -> None:
        self.parts.append(U32.pack(v))

    def f32(self, v: float) -> None:
        self.parts.append(F32.pack(v))

    def raw(self, b) -> None:
        self.parts.append(bytes(b))

    def array(self, a: np.ndarray) -> None:
        self.parts.append(np.ascontiguousarray(a).tobytes())

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


_CODES = {"B": "u1", "b": "i1", "H": "<u2", "h": "<i2", "I": "<u4", "i": "<i4", "f": "<f4"}


def record(fields, index_dtypes: dict | None = None) -> np.dtype:
    """One record layout, shared by a format's reader and writer: rows ``(name, code, count)``
    → a packed little-endian numpy dtype. ``code`` is a struct letter (B b H h I i f) or a key
    of ``index_dtypes`` (e.g. 'bone' → '<i2' for a file's index size); ``count`` is 1 (a
    scalar), n, or a shape tuple."""
    out = []
    for name, code, count in fields:
        dt = _CODES[code] if code in _CODES else index_dtypes[code]
        out.append((name, dt) if count == 1 else (name, dt, count))
    return np.dtype(out)


def join_records(chunks: list, dtype: np.dtype) -> np.ndarray:
    """Raw fixed-size records read one by one (between variable-size fields) → (n,) array."""
    return np.frombuffer(b"".join(chunks), dtype, len(chunks))


def record_bytes(rec: np.ndarray) -> list:
    """(n,) structured array → n ``bytes`` objects, one per record, to interleave with text."""
    b = rec.tobytes()
    s = rec.dtype.itemsize
    return [b[i * s:(i + 1) * s] for i in range(len(rec))]
