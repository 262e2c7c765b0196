"""The glTF container: GLB chunks, the JSON document, buffers and image bytes.

In: the file's bytes (``.gltf`` JSON text or a ``.glb`` binary), its path (messages) and the folder
external files are read from. Out: the root JSON ``Obj``, one ``memoryview`` per buffer (exactly
``byteLength`` bytes) and image bytes. External files must lie in that folder or below it: absolute
paths, ``..`` and other URI schemes are refused; sizes are checked before anything is allocated.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import os
import re
import stat
import struct
from urllib.parse import unquote

from mmdkit.errors import FormatError
from mmdkit.formats.gltf.jsonpath import Obj

GLB_MAGIC = b"glTF"
CHUNK_JSON = 0x4E4F534A
CHUNK_BIN = 0x004E4942
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_MAGIC_MIME = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"RIFF", "image/webp"),
               (b"GIF8", "image/gif"), (b"BM", "image/bmp"))
_EXT_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
             ".webp": "image/webp", ".ktx2": "image/ktx2", ".dds": "image/vnd-ms.dds"}


def split_glb(data: memoryview, path: str) -> tuple[memoryview, memoryview | None]:
    """GLB bytes → (JSON chunk, BIN chunk or None); header and chunk lengths checked."""
    def err(detail, offset):
        return FormatError(detail, path=path, section="GLB header", offset=offset)

    if len(data) < 20:
        raise err(f"file is {len(data)} bytes; a GLB needs a 12-byte header and a JSON chunk", 0)
    _, version, length = struct.unpack_from("<4sII", data, 0)
    if version != 2:
        raise err(f"GLB version {version}; only glTF 2.0 (version 2) is read", 4)
    if length > len(data):
        raise err(f"truncated: the header says {length} bytes, the file has {len(data)}", 8)
    if length < 20:
        raise err(f"the header says the file is {length} bytes; a GLB needs at least 20 (header and "
                  "a JSON chunk header)", 8)
    pos, chunks = 12, []
    while pos < length:
        if pos + 8 > length:
            raise err(f"truncated chunk header: {length - pos} bytes left, 8 needed", pos)
        size, kind = struct.unpack_from("<II", data, pos)
        if pos + 8 + size > length:
            raise err(f"chunk {len(chunks)} says {size} bytes, only {length - pos - 8} remain", pos)
        chunks.append((kind, data[pos + 8:pos + 8 + size]))
        pos += 8 + size
    if chunks[0][0] != CHUNK_JSON:
        raise err(f"the first chunk is 0x{chunks[0][0]:08x}, not JSON", 16)
    bin_chunk = chunks[1][1] if len(chunks) > 1 and chunks[1][0] == CHUNK_BIN else None
    return chunks[0][1], bin_chunk


def parse_json(text: bytes | memoryview, path: str) -> Obj:
    """UTF-8 JSON text → the root ``Obj``; checks ``asset.version`` is 2.x."""
    try:
        doc = json.loads(bytes(text).decode("utf-8-sig").rstrip("\0"))  # some writers pad with NULs
    except UnicodeDecodeError as e:
        raise FormatError(f"JSON is not UTF-8 ({e.reason} at byte {e.start})", path=path,
                          section="JSON") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                          path=path, section="JSON") from None
    except RecursionError:
        raise FormatError("JSON arrays/objects are nested too deeply to read", path=path,
                          section="JSON") from None
    except ValueError as e:  # an integer of more digits than Python converts (sys.int_info)
        raise FormatError(f"not valid JSON: {str(e).split(';')[0]}", path=path, section="JSON") from None
    root = Obj(doc, "", path)
    version = root.obj("asset").str("version")
    if not version.startswith("2."):
        raise root.error("asset.version", f"glTF {version!r:.20}; only glTF 2.x is read")
    return root


def _external_file(uri: str, where: Obj, key: str, base_dir: str | None) -> str:
    """Relative URI → a path inside ``base_dir``; refuses absolute paths, '..' and schemes."""
    rel = unquote(uri)
    if any(ord(c) < 32 for c in rel):
        raise where.error(key, f"{uri!r:.80}: a file name with a control character (NUL, newline, ...)")
    if _SCHEME.match(uri) or rel.startswith(("/", "\\")) or os.path.isabs(rel):
        raise where.error(key, f"{uri!r:.80}: only data: URIs and file names relative to the "
                               "glTF file are read (no absolute paths or URLs)")
    parts = [p for p in re.split(r"[/\\]", rel) if p not in ("", ".")]
    if ".." in parts or not parts:
        raise where.error(key, f"{uri!r:.80}: refers outside the glTF file's folder ('..')")
    if base_dir is None:
        raise where.error(key, f"{uri!r:.80}: an external file needs the glTF file's folder "
                               "(read_gltf(..., base_dir=...))")
    root = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, full]) != root:
        raise where.error(key, f"{uri!r:.80}: resolves outside the glTF file's folder (a link)")
    return full


def _data_uri(uri: str, where: Obj, key: str) -> tuple[bytes, str]:
    """``data:[mime][;base64],payload`` → (bytes, mime)."""
    head, sep, payload = uri.partition(",")
    if not sep or not head.endswith(";base64"):
        raise where.error(key, "data: URI is not base64-encoded (expected 'data:<mime>;base64,')")
    try:
        return base64.b64decode(payload, validate=True), head[5:-7]
    except (binascii.Error, ValueError) as e:
        raise where.error(key, f"data: URI is not valid base64 ({e})") from None


def read_uri(uri: str, where: Obj, key: str, base_dir: str | None, limit: int | None,
             what: str, warnings: list[str] | None = None) -> tuple[bytes, str]:
    """The bytes (at most ``limit``) and mime type of a data: URI or an external file.
    A file that is missing or unreadable raises, or with ``warnings`` given is noted there
    and reads as b''."""
    if uri.startswith("data:"):
        return _data_uri(uri, where, key)
    full = _external_file(uri, where, key, base_dir)
    try:
        data = _read_regular(full, limit)
    except OSError as e:
        why = "not found" if isinstance(e, FileNotFoundError) else f"cannot be read ({e.strerror})"
        err = where.error(key, f"external {what} {uri!r:.80} {why} in {base_dir}")
        if warnings is None:
            raise err from None
        warnings.append(f"{err}; left empty")
        return b"", ""
    return data, _EXT_MIME.get(os.path.splitext(full)[1].lower(), "")


def _read_regular(full: str, limit: int | None) -> bytes:
    """At most ``limit`` bytes (all without it) of the regular file ``full``: opened non-blocking
    and checked with fstat before any read, so a FIFO or device raises OSError instead of
    blocking, and never more than the file's size is asked for."""
    fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a pipe, device or folder)")
        left = st.st_size if limit is None else min(limit, st.st_size)
        parts = []
        while left > 0:
            b = f.read(left)
            if not b:
                break
            parts.append(b)
            left -= len(b)
    return b"".join(parts)


def read_buffers(root: Obj, glb_bin: memoryview | None, base_dir: str | None) -> list[memoryview]:
    """One memoryview of exactly ``byteLength`` bytes per ``buffers[i]``."""
    out = []
    for i, b in enumerate(root.objs("buffers")):
        length = b.int("byteLength", lo=1)
        if b.has("uri"):
            data = memoryview(read_uri(b.str("uri"), b, "uri", base_dir, length, "buffer")[0])
        elif i == 0 and glb_bin is not None:
            data = glb_bin
        else:
            raise b.error("uri", "missing: only the first buffer of a GLB may omit it")
        if len(data) < length:
            raise b.error("byteLength", f"says {length} bytes, the data has only {len(data)}")
        out.append(data[:length])
    return out


def sniff_mime(data: bytes, declared: str) -> str:
    """The declared mime type, else one guessed from the first bytes ('' when unknown)."""
    if declared:
        return declared
    for magic, mime in _MAGIC_MIME:
        if data.startswith(magic):
            return mime
    return ""
