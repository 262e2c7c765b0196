"""The one home of MMD text encoding (cp932, "Shift-JIS"): decoding with fallbacks, encoding.

In: raw bytes of a fixed-size name field (zero- or 0xFD-padded, possibly truncated
mid-character) or of a whole text file (VPD). Out: ``(text, stripped_bytes, warning_or_None)``
for fields, ``(text, encoding, warning_or_None)`` for documents; encoders give cp932 bytes
('?' for characters cp932 lacks) and padded fixed fields back. Base layer: imports nothing.
"""

from __future__ import annotations


def strip_field(raw: bytes) -> bytes:
    """Bytes up to the first NUL (the rest of a fixed field is padding or garbage)."""
    i = raw.find(b"\0")
    return raw if i < 0 else raw[:i]


def decode_cp932(b: bytes) -> tuple[str, str | None]:
    """Decode already-stripped bytes: cp932, else UTF-8, else cp932 minus a cut-off lead
    byte (names truncated by a fixed field), else cp932 with U+FFFD replacements.
    Returns (text, warning or None)."""
    try:
        return b.decode("cp932"), None
    except UnicodeDecodeError:
        pass
    try:
        return b.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    if len(b) > 1:
        try:
            return b[:-1].decode("cp932"), None  # truncated in the middle of a 2-byte char
        except UnicodeDecodeError:
            pass
    return b.decode("cp932", errors="replace"), f"name {b!r} is not valid cp932/UTF-8; undecodable bytes replaced"


def decode_field(raw: bytes) -> tuple[str, bytes, str | None]:
    """A fixed-size field → (text, bytes before the first NUL, warning or None)."""
    b = strip_field(raw)
    s, w = decode_cp932(b)
    return s, b, w


def decode_document(data: bytes) -> tuple[str, str, str | None]:
    """A whole text file: cp932, else UTF-8 (with or without BOM), else cp932 with U+FFFD
    replacements. Returns (text, encoding used, warning or None)."""
    for enc in ("cp932", "utf-8-sig"):
        try:
            return data.decode(enc), enc, None
        except UnicodeDecodeError:
            pass
    return data.decode("cp932", errors="replace"), "cp932", "text is not valid cp932/UTF-8; bad bytes replaced"


def encode_cp932(s: str) -> bytes:
    """Text → cp932 bytes (characters cp932 lacks become '?')."""
    return s.encode("cp932", errors="replace")


def encode_field(s: str | bytes, size: int, pad: bytes = b"\0") -> bytes:
    """Text (or raw bytes) → exactly ``size`` bytes: cut to fit (never mid-character for
    text), NUL-terminated when shorter, then padded."""
    if isinstance(s, str):
        b = encode_cp932(s)
        if len(b) > size:
            out = b""
            for ch in s:
                c = encode_cp932(ch)
                if len(out) + len(c) > size:
                    break
                out += c
            b = out
    else:
        b = bytes(s)[:size]
    if len(b) < size:
        b = b + b"\0" + pad * (size - len(b) - 1)
    return b
