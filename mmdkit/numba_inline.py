"""Faster numba IR inlining (``inline="always"``) and SSA reconstruction at compile time; the
compiled code is unchanged.

In: nothing (importing this module wraps ``numba.core.inline_closurecall.InlineWorker.inline_ir``
and ``numba.core.ssa._run_ssa`` / ``_run_block_rewrite`` once). Out: nothing. Why: the posing
kernels inline callees that are large after their own inlining (``ik._ccd_step``,
``ik_lane_steps._lane_step_limited``, ...), and two of numba's steps grow with the product of sizes:
- numba copies a callee's IR before inlining it, one block at a time, each ``copy.deepcopy`` with a
  fresh memo, so every block copies the callee's whole scope (every variable of the callee and of
  everything already inlined into it): blocks × variables per inlined call. Here the blocks of one
  scope share one memo while ``inline_ir`` runs, so the scope is copied once and every block's
  variables point to that one copy, as they pointed to one scope in the original. ``inline_ir``
  sets every inlined block's scope to the caller's afterwards either way.
- SSA reconstruction rewrites every block once per variable assigned more than once
  (``_patch_ssa``): variables × statements.
The IR that is typed and lowered is the same, and so is the LLVM IR and the machine code
(``inspect_llvm``/``inspect_asm`` of ``run_frame``, ``solve_bones``, ``solve_ik``, ``solve_lanes``
compared: identical); the cold compile of ``stages.run_frame`` takes ~25% less (docs/performance.md).
"""

from __future__ import annotations

import copy
import functools

import numba
from numba.core import inline_closurecall, ir, ssa

#: the numba releases whose inliner and SSA pass these wrappers were checked against (same LLVM IR
#: and machine code for the posing kernels on 0.68.1); outside them numba runs its own steps
VERIFIED_NUMBA = ((0, 68), (0, 68))
ACTIVE = VERIFIED_NUMBA[0] <= (numba.version_info.major, numba.version_info.minor) <= VERIFIED_NUMBA[1]

_PATCHED = "_mmdkit_shared_scope_copy"
_SSA_NAMES = []  # per running ssa._run_ssa (innermost last): block label -> the variable names its statements use


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
    if not ACTIVE or getattr(original, _PATCHED, False) or not isinstance(getattr(inline_closurecall, "copy", None),
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


def _patch_ssa():
    """Wrap ``ssa._run_ssa`` and ``ssa._run_block_rewrite`` (once per process). numba's SSA
    reconstruction rewrites every block once per variable assigned more than once (each inlined
    copy of a callee brings its own): variables × statements. A block whose statements do not
    name the variable comes out of that rewrite as it went in (the handlers return each statement
    unchanged and record nothing), so it is copied without running them; the names per block are
    gathered once per ``_run_ssa`` (a rewrite only renames the variable it fixes and adds phi
    nodes of that variable, so the other blocks' names stay valid)."""
    run_ssa, run_block_rewrite = getattr(ssa, "_run_ssa", None), getattr(ssa, "_run_block_rewrite", None)
    if not ACTIVE or run_ssa is None or run_block_rewrite is None or getattr(run_ssa, _PATCHED, False):
        return  # a numba without these steps, or already patched

    @functools.wraps(run_ssa)
    def _run_ssa(blocks):
        _SSA_NAMES.append({label: {v.name for stmt in block.body for v in stmt.list_vars()}
                           for label, block in blocks.items()})
        try:
            return run_ssa(blocks)
        finally:
            _SSA_NAMES.pop()

    @functools.wraps(run_block_rewrite)
    def _run_block_rewrite(blocks, states, handler):
        varname = states.get("varname")
        if not _SSA_NAMES or varname is None:
            return run_block_rewrite(blocks, states, handler)
        names = _SSA_NAMES[-1]
        new_blocks = {}
        for label, block in blocks.items():
            if label in names and varname not in names[label]:
                states["label"], states["block"] = label, block
                new_block = ir.Block(scope=block.scope, loc=block.loc)
                new_block.body = list(block.body)
                new_blocks[label] = new_block
            else:
                new_blocks.update(run_block_rewrite({label: block}, states, handler))
        return new_blocks

    setattr(_run_ssa, _PATCHED, True)
    ssa._run_ssa, ssa._run_block_rewrite = _run_ssa, _run_block_rewrite


_patch()
_patch_ssa()
