"""glTF buffer views and accessors decoded straight into numpy arrays.

In: the root JSON ``Obj`` and the buffers (memoryviews). Out: per accessor a read-only array
``(count, components)`` — a strided view over the file's bytes where the data is stored plainly,
a copy where it is sparse, normalized or padded (MAT2/MAT3 of 8/16-bit components).
Every range is checked against the bytes that exist before a view is made, so a lying count or
offset raises ``FormatError`` naming e.g. ``accessors[12].count`` and allocates nothing.
What the file does not store but reading makes (zero-filled accessors without a bufferView,
sparse and converted copies, morph target arrays) is charged to ``spend``: at most
``budget_bytes(source)`` = 256 MiB + 64 × the file's size in all, and an accessor without a
bufferView may not exceed the file's buffers (+ 4 KiB).
"""

from __future__ import annotations

import numpy as np

from mmdkit.formats.gltf.jsonpath import Obj

COMPONENT = {5120: np.dtype("<i1"), 5121: np.dtype("<u1"), 5122: np.dtype("<i2"),
             5123: np.dtype("<u2"), 5125: np.dtype("<u4"), 5126: np.dtype("<f4")}
COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}
_NORM = {"i1": 127.0, "u1": 255.0, "i2": 32767.0, "u2": 65535.0, "u4": 4294967295.0}
_TYPES = tuple(COMPONENTS)
_INDEX_TYPES = (5121, 5123, 5125)


def budget_bytes(source_bytes: int) -> int:
    """Most bytes reading a file of ``source_bytes`` may make beyond what it stores."""
    return (256 << 20) + 64 * int(source_bytes)


class Accessors:
    """Checked, cached decoding of ``accessors[i]`` of one document."""

    def __init__(self, root: Obj, buffers: list[memoryview], source_bytes: int = 0):
        self.root = root
        self.buffers = buffers
        self.views = root.objs("bufferViews")
        self.items = root.objs("accessors")
        # accessors without a bufferView are zeros: none larger than the data the file holds
        self.zero_limit = 4096 + sum(len(b) for b in buffers)
        self.budget = budget_bytes(source_bytes or sum(len(b) for b in buffers))
        self.spent = 0
        self._view_cache: dict[int, tuple[memoryview, int]] = {}
        self._cache: dict[int, tuple[np.ndarray, Obj]] = {}
        self._float_cache: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.items)

    def spend(self, nbytes: int, where: Obj, key: str | None) -> None:
        """Charge ``nbytes`` made while reading; ``FormatError`` at ``where.key`` past the budget."""
        self.spent += int(nbytes)
        if self.spent > self.budget:
            raise where.error(key, f"reading it would make {self.spent / 2**20:,.0f} MiB of arrays the file does "
                                   f"not store, more than the {self.budget / 2**20:,.0f} MiB allowed for this file")

    def view(self, i: int) -> tuple[memoryview, int]:
        """``bufferViews[i]`` → (its bytes, byteStride or 0), range-checked against its buffer."""
        hit = self._view_cache.get(i)
        if hit is not None:
            return hit
        v = self.views[i]
        b = v.int("buffer", hi=len(self.buffers))
        off, n = v.int("byteOffset", 0), v.int("byteLength", lo=1)
        stride = v.int("byteStride", 0)
        if stride and (stride < 4 or stride > 252 or stride % 4):
            raise v.error("byteStride", f"{stride} is not a multiple of 4 in 4..252")
        size = len(self.buffers[b])
        if off + n > size:
            raise v.error("byteLength", f"bytes {off}..{off + n} lie past the end of buffers[{b}] "
                                        f"({size} bytes)")
        hit = self._view_cache[i] = (self.buffers[b][off:off + n], stride)
        return hit

    def _packed(self, o: Obj, count: int, dt: np.dtype, ncomp: int) -> np.ndarray:
        """Tightly packed ``count × ncomp`` values at ``o.bufferView`` + ``o.byteOffset`` (sparse)."""
        mv, _ = self.view(o.int("bufferView", hi=len(self.views)))
        off = o.int("byteOffset", 0)
        need = off + count * ncomp * dt.itemsize
        if need > len(mv):
            raise o.error("bufferView", f"{count} values need {need} bytes, the view has {len(mv)}")
        return np.frombuffer(mv, dt, count * ncomp, off).reshape(count, ncomp)

    def _stored(self, a: Obj, dt: np.dtype, typ: str, count: int) -> np.ndarray:
        """The stored (non-sparse) values of accessor ``a`` as a strided view or padded copy."""
        vi = a.int("bufferView", hi=len(self.views))
        mv, stride = self.view(vi)
        off, ncomp, item = a.int("byteOffset", 0), COMPONENTS[typ], dt.itemsize
        cols = int(typ[3]) if typ.startswith("MAT") else 1
        rows = ncomp // cols
        col_bytes = (rows * item + 3) // 4 * 4 if cols > 1 else ncomp * item  # columns 4-aligned
        elem = cols * col_bytes
        stride = stride or elem
        if stride < elem:
            raise self.views[vi].error("byteStride", f"{stride} is smaller than one {typ} element "
                                                     f"({elem} bytes) of accessors")
        if off % item:
            raise a.error("byteOffset", f"{off} is not a multiple of the component size {item}")
        if off + elem > len(mv):
            raise a.error("byteOffset", f"{off} lies past the end of bufferViews[{vi}] ({len(mv)} bytes)")
        need = off + stride * (count - 1) + elem
        if need > len(mv):
            raise a.error("count", f"{count} elements of {stride} bytes from byte {off} need {need} "
                                   f"bytes, bufferViews[{vi}] has {len(mv)}")
        if cols > 1 and col_bytes != rows * item:  # padded matrix columns
            arr = np.ndarray((count, cols, rows), dt, mv, off, (stride, col_bytes, item))
            return arr.reshape(count, ncomp)
        return np.ndarray((count, ncomp), dt, mv, off, (stride, item))

    def _sparse(self, a: Obj, arr: np.ndarray, dt: np.dtype, count: int) -> np.ndarray:
        s = a.obj("sparse")
        n = s.int("count", lo=1)
        if n > count:
            raise s.error("count", f"{n} sparse values for an accessor of {count} elements")
        io, vo = s.obj("indices"), s.obj("values")
        ict = io.int("componentType", lo=None)
        if ict not in _INDEX_TYPES:
            raise io.error("componentType", f"{ict} is not an unsigned index type (5121, 5123, 5125)")
        idx = self._packed(io, n, COMPONENT[ict], 1)[:, 0]
        if int(idx.max()) >= count:
            raise io.error("bufferView", f"index {int(idx.max())} is out of range ({count} elements)")
        out = np.array(arr)
        out[idx] = self._packed(vo, n, dt, arr.shape[1])
        return out

    def read(self, i: int, where: Obj, key: str, types: tuple[str, ...] | None = None) -> np.ndarray:
        """Raw values (count, components) of accessor ``where.key`` = i; ``types`` allowed."""
        if not 0 <= i < len(self.items):
            raise where.error(key, f"index {i} is out of range (there are {len(self.items)} accessors)")
        hit = self._cache.get(i)
        if hit is None:
            hit = self._cache[i] = (self._decode(i), self.items[i])
        arr, a = hit
        if types is not None and a.d.get("type") not in types:
            raise where.error(key, f"accessors[{i}] is {a.d.get('type')}, expected {' or '.join(types)}")
        return arr

    def _decode(self, i: int) -> np.ndarray:
        a = self.items[i]
        ct = a.int("componentType", lo=None)
        if ct not in COMPONENT:
            raise a.error("componentType", f"{ct} is not a glTF component type")
        dt, typ = COMPONENT[ct], a.str("type", choices=_TYPES)
        count, ncomp = a.int("count", lo=1), COMPONENTS[typ]
        if a.has("bufferView"):
            arr = self._stored(a, dt, typ, count)
        elif count * ncomp * dt.itemsize > self.zero_limit:
            raise a.error("count", f"{count} elements without a bufferView would need "
                                   f"{count * ncomp * dt.itemsize} bytes; the file's buffers hold {self.zero_limit - 4096}")
        else:
            self.spend(count * ncomp * dt.itemsize, a, "count")
            arr = np.zeros((count, ncomp), dt)
        if a.has("sparse"):
            if a.has("bufferView"):
                self.spend(arr.nbytes, a, "sparse")
            arr = self._sparse(a, arr, dt, count)
        if dt.kind == "f" and not np.isfinite(arr).all():
            raise a.error(None, "holds NaN or infinite values")
        arr.flags.writeable = False
        return arr

    def floats(self, i: int, where: Obj, key: str, types: tuple[str, ...] | None = None) -> np.ndarray:
        """Values as float32 (count, components); normalized integers mapped to [0, 1] / [-1, 1]."""
        arr = self.read(i, where, key, types)
        if arr.dtype.kind == "f":
            return arr
        out = self._float_cache.get(i)
        if out is None:
            self.spend(arr.size * 4, where, key)
            if self.items[i].bool("normalized", False):
                scale = np.float32(_NORM[arr.dtype.str[1:]])
                out = np.maximum(arr / scale, np.float32(-1.0)).astype(np.float32)
            else:
                out = arr.astype(np.float32)
            out.flags.writeable = False
            self._float_cache[i] = out
        return out

    def indices(self, i: int, where: Obj, key: str, limit: int) -> np.ndarray:
        """Unsigned integer scalars (count,) as uint32, each checked < ``limit``."""
        a = self.items[i] if 0 <= i < len(self.items) else None
        arr = self.read(i, where, key, ("SCALAR",))
        if a is not None and a.d.get("componentType") not in _INDEX_TYPES:
            raise where.error(key, f"accessors[{i}] has componentType {a.d.get('componentType')}, "
                                   "not an unsigned integer")
        arr = arr[:, 0].astype(np.uint32)
        if len(arr) and int(arr.max()) >= limit:
            raise where.error(key, f"accessors[{i}] holds index {int(arr.max())}, out of range "
                                   f"(there are {limit})")
        return arr
