"""Assemble a glTF 2.0 document: JSON parts, one binary buffer, then a .glb or .gltf + .bin.

In: numpy arrays added as accessors (converted to glTF's column-major / little-endian layout),
encoded images, JSON objects (nodes, meshes, materials, …). Out: ``save(path, binary)`` writes
one GLB (JSON chunk + BIN chunk, images inside) or a .gltf with ``<stem>.bin`` and the images
beside it (each file atomically); returns the paths written.
"""

from __future__ import annotations

import json
import os
import struct
import urllib.parse

import numpy as np

from mmdkit.fileutil import atomic_path

ARRAY_BUFFER, ELEMENT_ARRAY_BUFFER = 34962, 34963
COMPONENT = {np.dtype(np.int8): 5120, np.dtype(np.uint8): 5121, np.dtype(np.int16): 5122,
             np.dtype(np.uint16): 5123, np.dtype(np.uint32): 5125, np.dtype(np.float32): 5126}
TYPES = {1: "SCALAR", 2: "VEC2", 3: "VEC3", 4: "VEC4", 16: "MAT4"}
IMAGE_EXT = {"image/png": "png", "image/jpeg": "jpg"}
GLB_MAGIC, GLB_JSON, GLB_BIN = 0x46546C67, 0x4E4F534A, 0x004E4942


def _pad4(n: int) -> int:
    return (4 - n % 4) % 4


class GltfDocument:
    """The glTF JSON under construction plus the bytes of its single buffer (4-byte aligned)."""

    def __init__(self, generator: str):
        self.json: dict = {"asset": {"version": "2.0", "generator": generator}}
        self._chunks: list[bytes] = []
        self._size = 0
        self._images: list[tuple[bytes, str]] = []  # (encoded bytes, mime) in image order

    def add(self, kind: str, obj: dict) -> int:
        """Append ``obj`` to the top-level array ``kind`` ('nodes', 'meshes', …); its index."""
        items = self.json.setdefault(kind, [])
        items.append(obj)
        return len(items) - 1

    def view(self, data: bytes, target: int | None = None) -> int:
        """A bufferView over ``data`` (placed at the next 4-byte boundary); its index."""
        offset = self._size
        self._chunks.append(data)
        pad = _pad4(len(data))
        if pad:
            self._chunks.append(b"\0" * pad)
        self._size += len(data) + pad
        view = {"buffer": 0, "byteOffset": offset, "byteLength": len(data)}
        if target is not None:
            view["target"] = target
        return self.add("bufferViews", view)

    def accessor(self, array, *, target: int | None = None, minmax: bool = False, normalized=False) -> int:
        """An accessor over (count,) or (count, n) ``array`` (n in 1, 2, 3, 4; (count, 4, 4) matrices
        given row-major with column vectors are stored column-major); its index."""
        a = np.asarray(array)
        if a.ndim == 3:  # matrices: glTF stores columns first
            a = a.transpose(0, 2, 1).reshape(len(a), 16)
        a = np.ascontiguousarray(a.reshape(len(a), -1), a.dtype.newbyteorder("<"))
        acc = {"bufferView": self.view(a.tobytes(), target), "componentType": COMPONENT[a.dtype],
               "count": int(a.shape[0]), "type": TYPES[a.shape[1]]}
        if normalized:
            acc["normalized"] = True
        if minmax:
            acc["min"], acc["max"] = self._bounds(a)
        return self.add("accessors", acc)

    def sparse_accessor(self, count: int, index, value) -> int:
        """A (count, 3) float32 accessor that is zero except rows ``index`` (E,) (increasing) =
        ``value`` (E, 3): sparse storage, no base buffer view; min/max over all rows."""
        index = np.asarray(index, np.uint32)
        value = np.ascontiguousarray(value, "<f4").reshape(-1, 3)
        if len(index) == 0:  # all zero: one stored zero row (Assimp reads no accessor without data)
            index, value = np.zeros(1, np.uint32), np.zeros((1, 3), "<f4")
        lo, hi = self._bounds(value)
        if len(index) < count:  # the rows not stored are zero
            lo, hi = [min(v, 0.0) for v in lo], [max(v, 0.0) for v in hi]
        return self.add("accessors", {
            "componentType": 5126, "count": int(count), "type": "VEC3", "min": lo, "max": hi,
            "sparse": {"count": int(len(index)),
                       "indices": {"bufferView": self.view(index.astype("<u4").tobytes()), "componentType": 5125},
                       "values": {"bufferView": self.view(value.tobytes())}}})

    @staticmethod
    def _bounds(a: np.ndarray) -> tuple[list, list]:
        if len(a) == 0:
            return [0.0] * a.shape[1], [0.0] * a.shape[1]
        lo, hi = a.min(axis=0), a.max(axis=0)
        cast = float if a.dtype.kind == "f" else int
        return [cast(v) for v in lo], [cast(v) for v in hi]

    def image(self, data: bytes, mime: str, name: str = "") -> int:
        """An image of encoded ``data`` (PNG or JPEG); placed in the buffer (GLB) or beside
        (.gltf) when saved; its index."""
        self._images.append((data, mime))
        img = {"mimeType": mime}
        if name:
            img["name"] = name
        return self.add("images", img)

    def save(self, path: str, binary: bool) -> list[str]:
        """Write the document to ``path`` (.glb when ``binary``, else .gltf + .bin + images)."""
        if binary:
            for i, (data, _) in enumerate(self._images):
                self.json["images"][i]["bufferView"] = self.view(data)
            self._finish_buffer(None)
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                f.write(self._glb())
            return [os.fspath(path)]
        folder, stem = os.path.split(os.path.splitext(os.path.abspath(path))[0])
        written = []
        for i, (data, mime) in enumerate(self._images):
            name = f"{stem}_image{i}.{IMAGE_EXT[mime]}"
            self.json["images"][i]["uri"] = urllib.parse.quote(name)
            written.append(self._write_file(os.path.join(folder, name), data))
        bin_name = stem + ".bin"
        self._finish_buffer(urllib.parse.quote(bin_name))
        if self._size:
            written.append(self._write_file(os.path.join(folder, bin_name), b"".join(self._chunks)))
        text = json.dumps(self.json, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        written.insert(0, self._write_file(os.fspath(path), text))
        return written

    @staticmethod
    def _write_file(path: str, data: bytes) -> str:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            f.write(data)
        return path

    def _finish_buffer(self, uri: str | None) -> None:
        if not self._size:
            return
        buf = {"byteLength": self._size}
        if uri is not None:
            buf["uri"] = uri
        self.json["buffers"] = [buf]

    def _glb(self) -> bytes:
        text = json.dumps(self.json, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        text += b" " * _pad4(len(text))
        parts = [struct.pack("<II", len(text), GLB_JSON), text]
        if self._size:
            parts += [struct.pack("<II", self._size, GLB_BIN), *self._chunks]
        total = 12 + sum(len(p) for p in parts)
        return b"".join([struct.pack("<III", GLB_MAGIC, 2, total), *parts])
