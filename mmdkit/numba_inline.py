"""Faster numba IR inlining (``inline="always"``) at compile time; the compiled code is unchanged.

In: nothing (importing this module patches ``numba.core.inline_closurecall.InlineWorker.inline_ir``
once). Out: nothing. Why: numba copies a callee's IR before inlining it, one block at a time, each
``copy.deepcopy`` with a fresh memo, so every block copies the callee's whole scope (every variable
of the callee, and of everything already inlined into it) — blocks × variables of work per inlined
call. The posing kernels inline callees that are large after their own inlining (``ik._ccd_step``,
``ik_lane_steps._lane_step_limited``, ...): this copying was about half of their cold compile.
Here the blocks of one scope share one memo while ``inline_ir`` runs, so the scope is copied once
and every block's variables point to that one copy, as they pointed to one scope in the original.
``inline_ir`` sets every inlined block's scope to the caller's afterwards either way: the IR that
is typed and lowered is the same, and so is the machine code.
"""

from __future__ import annotations

import copy
import functools

from numba.core import inline_closurecall, ir

_PATCHED = "_mmdkit_shared_scope_copy"


class _SharedScopeCopy:
    """Stands in for the ``copy`` module inside ``inline_closurecall`` during one ``inline_ir``:
    ``deepcopy(block)`` with one memo per block scope; everything else is ``copy``'s own."""

    def __init__(self):
        self._memos = {}

    def deepcopy(self, x, memo=None):
        if memo is None and isinstance(x, ir.Block):
            memo = self._memos.setdefault(id(x.scope), {})
        return copy.deepcopy(x, memo)

    def __getattr__(self, name):
        return getattr(copy, name)


def _patch():
    """Wrap ``InlineWorker.inline_ir`` (once per process). numba compiles under its global compiler
    lock, so swapping the module's ``copy`` for the call is not seen by another compile."""
    worker = inline_closurecall.InlineWorker
    original = worker.inline_ir
    if getattr(original, _PATCHED, False) or not isinstance(getattr(inline_closurecall, "copy", None),
                                                            type(copy)):
        return  # already patched, or a numba whose inliner no longer uses the copy module

    @functools.wraps(original)
    def inline_ir(self, *args, **kwargs):
        saved = inline_closurecall.copy
        inline_closurecall.copy = _SharedScopeCopy()
        try:
            return original(self, *args, **kwargs)
        finally:
            inline_closurecall.copy = saved

    setattr(inline_ir, _PATCHED, True)
    worker.inline_ir = inline_ir


_patch()
