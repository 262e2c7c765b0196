"""Named argument groups of the pose kernels: each field declared once, read by name in numba.

In: declarations — ``Field(name, shape, dtype, space, doc, rest)``, shape in size symbols (``"B"``
bones, ``"K"`` IK solvers, ...) and ints. Out: a group type (``group``): a ``collections.namedtuple``
whose fields are the declared names, which numba passes like a plain tuple (one heterogeneous named
tuple: ``bone_state_inout.bone_world_p`` compiles to the same code as ``bone_state_inout[7]``); its
docstring lists every field's shape, dtype, space and meaning; ``allocate(Group, sizes)`` → a
group of arrays at rest (zeros, ones, or identity quaternions); ``copy_group(g)`` (numba) → a copy
of every array of g. ``Rig`` (``rig.py``) and ``PoseState`` (``state.py``) declare their groups here.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba.extending import overload

Field = namedtuple("Field", ["name", "shape", "dtype", "space", "doc", "rest"], defaults=(0.0,))
Field.__doc__ = """One array of a group: name, shape (size symbols and ints), dtype (numpy name), space
(model / parent-local / "" where none applies), doc, rest (fill value of ``allocate``: a number, or
"identity" for quaternions (x, y, z, w) = (0, 0, 0, 1))."""


def _shape_text(shape) -> str:
    return "(" + ",".join(str(s) for s in shape) + (",)" if len(shape) == 1 else ")")


def group(name: str, fields: tuple, doc: str, module: str):
    """The namedtuple type of a group of ``fields`` (``Field``s), defined in ``module`` (where it
    must be a module attribute named ``name``: numba's cache finds the type by that name).
    ``Group.FIELDS`` keeps the declarations."""
    cls = namedtuple(name, [f.name for f in fields], module=module)
    cls.FIELDS = tuple(fields)
    rows = [f"{f.name} {_shape_text(f.shape)} {f.dtype}{', ' + f.space if f.space else ''}: {f.doc}" for f in fields]
    cls.__doc__ = doc + "\n\n" + "\n".join(rows)
    return cls


def allocate(cls, sizes: dict):
    """A ``cls`` group of new arrays at rest; ``sizes`` maps each size symbol to its length."""
    arrays = []
    for f in cls.FIELDS:
        shape = tuple(sizes[s] if isinstance(s, str) else s for s in f.shape)
        if f.rest == "identity":
            a = np.zeros(shape, f.dtype)
            a[..., 3] = 1.0
        else:
            a = np.full(shape, f.rest, f.dtype)
        arrays.append(a)
    return cls(*arrays)


def expose_fields(owner: type, groups: dict) -> None:
    """Give class ``owner`` a read-only property per field of its groups ({attribute: group type}):
    ``owner.name`` reads ``getattr(self, attribute).name``."""
    def field_property(attribute, name, group_type):
        return property(lambda self: getattr(getattr(self, attribute), name),
                        doc=f"``{attribute}.{name}`` (see ``{group_type.__name__}``)")

    for attribute, group_type in groups.items():
        for name in group_type._fields:
            setattr(owner, name, field_property(attribute, name, group_type))


def copy_group(g):
    """A group of the same type as ``g`` holding a copy of each of its arrays (in numba only)."""
    raise NotImplementedError("copy_group runs inside numba kernels")


@overload(copy_group, jit_options=dict(nogil=True))
def _copy_group(g):
    cls = g.instance_class
    n = len(g.types)
    src = f"def impl(g):\n    return cls({', '.join(f'g[{i}].copy()' for i in range(n))})\n"
    scope = {"cls": cls}
    exec(src, scope)  # one generated body per group type: the field count is known only here
    return scope["impl"]
