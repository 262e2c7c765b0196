"""PMX header: magic, version, the globals (text encoding, additional UVs, index sizes), names.

In (read): a ``PmxReader`` at byte 0. Out: the header values (``Header``) and the model's
names/comments in ``f``. Write: the same from a ``Model`` and its PMX ``source_extras``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mmdkit.formats.pmx.common import KIND_ORDER, PmxReader, PmxWriter

MAGICS = (b"PMX ", b"PMXP")
NAME_FIELDS = ("name", "name_en", "comment", "comment_en")


@dataclass
class Header:
    """What the header says: version 2.0/2.1, globals bytes, additional UV count, index sizes."""

    magic: bytes
    version: float
    globals: bytes
    utf8: bool
    additional_uv: int
    sizes: dict  # kind → 1, 2 or 4, as declared


def read_header(r: PmxReader, f: dict) -> Header:
    """Magic .. comment_en; sets ``r.utf8``/``r.sizes`` (the declared sizes)."""
    r.section = "header"
    magic = r.raw(4)
    if magic not in MAGICS:
        raise r.error(f"not a PMX file (magic {magic!r}, expected b'PMX ')", 0)
    version = r.f32()
    if not (1.95 <= version <= 2.15):
        raise r.error(f"unsupported PMX version {version:g} (expected 2.0 or 2.1)", 4)
    nglob = r.u8()
    if nglob < 8:
        raise r.error(f"header has {nglob} globals, needs 8", 8)
    glob = r.raw(nglob)
    enc, nuv = glob[0], glob[1]
    if enc not in (0, 1):
        raise r.error(f"unknown text encoding {enc} (0 UTF-16LE, 1 UTF-8)", 9)
    if nuv > 4:
        raise r.error(f"additional UV count {nuv} > 4", 10)
    sizes = {}
    for i, kind in enumerate(KIND_ORDER):
        s = glob[2 + i]
        if s not in (1, 2, 4):
            raise r.error(f"{kind} index size {s} is not 1, 2 or 4", 11 + i)
        sizes[kind] = s
    r.utf8 = enc == 1
    r.sizes = dict(sizes)
    for k in NAME_FIELDS:
        f[k] = r.text()
    return Header(magic, 2.1 if version > 2.05 else 2.0, bytes(glob), enc == 1, nuv, sizes)


def write_header(w: PmxWriter, model, extras: dict, version: float, additional_uv: int) -> None:
    """Magic .. comment_en for the writer's encoding and index sizes (unknown globals kept)."""
    glob = bytearray(extras.get("globals", b"\0" * 8))
    glob[0] = 1 if w.utf8 else 0
    glob[1] = additional_uv
    for i, k in enumerate(KIND_ORDER):
        glob[2 + i] = w.sizes[k]
    w.raw(extras.get("magic", b"PMX "))
    w.f32(2.1 if version >= 2.1 else 2.0)
    w.u8(len(glob))
    w.raw(bytes(glob))
    for k in NAME_FIELDS:
        w.text(getattr(model, k))
