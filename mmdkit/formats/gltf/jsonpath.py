"""Typed, path-aware access to a parsed glTF JSON document.

In: the decoded JSON (dicts/lists) and the file name for messages. Out: ``Obj`` views whose getters
check type and range and raise ``FormatError(file, section=<JSON path>)``, e.g.
``accessors[12].count: -3 is below 0`` — every message names the exact key that was wrong.
"""

from __future__ import annotations

import math

from mmdkit.errors import FormatError

_MISSING = object()
MAX_INT = 2**53
"""Largest integer magnitude read (JSON numbers are doubles; every glTF count, offset and index
fits below it). Larger ones are refused, so no size computed from them overflows."""


def _finite(x) -> bool:
    """A JSON number (not a bool) that fits a float and is neither NaN nor infinite."""
    return (type(x) is float and math.isfinite(x)) or (type(x) is int and abs(x) < 1e300)


class Obj:
    """One JSON object at ``jpath`` (e.g. ``meshes[0].primitives[1]``) of the file ``path``."""

    __slots__ = ("d", "jpath", "path")

    def __init__(self, d, jpath: str, path: str):
        if not isinstance(d, dict):
            raise FormatError(f"expected a JSON object, got {type(d).__name__}", path=path, section=jpath)
        self.d = d
        self.jpath = jpath
        self.path = path

    def key(self, k: str) -> str:
        return f"{self.jpath}.{k}" if self.jpath else k

    def error(self, k: str | None, detail: str) -> FormatError:
        return FormatError(detail, path=self.path, section=self.key(k) if k else self.jpath)

    def has(self, k: str) -> bool:
        return k in self.d

    def _raw(self, k, default):
        v = self.d.get(k, _MISSING)
        if v is _MISSING:
            if default is _MISSING:
                raise self.error(k, "is required but missing")
            return default
        return v

    def int(self, k: str, default=_MISSING, lo: int | None = 0, hi: int | None = None) -> int:
        """An integer in [lo, hi) (hi exclusive: an index into a list of length hi)."""
        v = self.d.get(k, default)
        if type(v) is int and (lo is None or v >= lo) and (v < hi if hi is not None else v < MAX_INT):
            return v  # the common case, checked in one line (this runs thousands of times a file)
        v = self._raw(k, default)
        if v is default and default is not _MISSING:
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise self.error(k, f"expected an integer, got {v!r:.40}")
        if lo is not None and v < lo:
            raise self.error(k, f"{v:.6g} is below {lo}")
        if abs(v) >= MAX_INT:
            raise self.error(k, f"{v:.6g} is too large (at most 2^53 is read)")
        if hi is not None and v >= hi:
            raise self.error(k, f"index {v} is out of range (there are {hi})")
        return v

    def num(self, k: str, default=_MISSING) -> float:
        v = self._raw(k, default)
        if v is default and default is not _MISSING:
            return v
        if not _finite(v):
            raise self.error(k, f"expected a finite number, got {v!r:.40}")
        return float(v)

    def str(self, k: str, default=_MISSING, choices: tuple | None = None) -> str:
        v = self.d.get(k, default)
        if v is _MISSING:
            raise self.error(k, "is required but missing")
        if not isinstance(v, str):
            raise self.error(k, f"expected a string, got {v!r:.40}")
        if choices is not None and v not in choices:
            raise self.error(k, f"{v!r:.40} is not one of {', '.join(choices)}")
        return v

    def bool(self, k: str, default=_MISSING) -> bool:
        v = self._raw(k, default)
        if not isinstance(v, bool):
            raise self.error(k, f"expected true or false, got {v!r:.40}")
        return v

    def floats(self, k: str, n: int, default=_MISSING, bound: float | None = None) -> list[float]:
        """A list of exactly ``n`` finite numbers (each within ±``bound`` when given)."""
        v = self.d.get(k, _MISSING)
        if v is _MISSING:
            return self._raw(k, default)
        try:
            if type(v) is list and len(v) == n and all(type(x) in (float, int) for x in v):
                out = [float(x) for x in v]
                if all(map(math.isfinite, out)) and (bound is None or max(map(abs, out), default=0.0) <= bound):
                    return out
        except OverflowError:  # an integer beyond a double
            pass
        within = f" within ±{bound:g}" if bound is not None else ""
        raise self.error(k, f"expected {n} finite numbers{within}, got {v!r:.60}")

    def ints(self, k: str, hi: int | None, default=_MISSING) -> list[int]:
        """A list of integer indices, each in [0, hi)."""
        v = self._raw(k, default)
        if not isinstance(v, list):
            raise self.error(k, f"expected a list of indices, got {v!r:.40}")
        for i, x in enumerate(v):
            if isinstance(x, bool) or not isinstance(x, int) or x < 0 or (hi is not None and x >= hi):
                raise self.error(f"{k}[{i}]", f"index {x!r:.20} is out of range (there are {hi})")
        return v

    def obj(self, k: str, default=_MISSING) -> Obj | None:
        v = self._raw(k, default)
        if v is default and default is not _MISSING:
            return v
        return Obj(v, self.key(k), self.path)

    def objs(self, k: str) -> list[Obj]:
        """The objects of the optional list ``k`` (empty when absent)."""
        v = self.d.get(k, [])
        if not isinstance(v, list):
            raise self.error(k, f"expected a list, got {type(v).__name__}")
        base = self.key(k)
        return [Obj(x, f"{base}[{i}]", self.path) for i, x in enumerate(v)]

    def count(self, k: str) -> int:
        """Length of the optional top-level list ``k``."""
        v = self.d.get(k, [])
        return len(v) if isinstance(v, list) else 0
