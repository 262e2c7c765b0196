"""mmdkit.numba_inline: numba's IR inlining with one scope copy per inlined callee, and SSA
reconstruction that skips the blocks not naming the variable, give the same kernels (results and
machine code) as numba's own passes."""

from __future__ import annotations

import math
import re

import numpy as np
from numba import njit
from numba.core import compiler, inline_closurecall, ssa

import mmdkit.mathutil  # noqa: F401  (installs the patch)
from mmdkit import numba_inline


@njit(inline="always")
def _clamp(a, lo, hi, reflect):
    if a < lo:
        d = 2.0 * lo - a
        return d if reflect and d <= hi else lo
    if a > hi:
        d = 2.0 * hi - a
        return d if reflect and d >= lo else hi
    return a


@njit(inline="always")
def _turn(axis, a, lo, hi, reflect):
    s = math.sin(0.5 * _clamp(a, lo, hi, reflect))
    if axis == 0:
        return s, 0.0
    return 0.0, s


def _kernel(xs, out):
    for i in range(xs.shape[0]):
        acc = 0.0
        for k in range(3):
            p = _turn(k % 2, xs[i] * (k + 1), -0.5, 0.75, k == 1)
            q = _turn(1, xs[i] - k, -1.0, 0.25, True)
            acc += p[0] - 2.0 * p[1] + q[1]
        out[i] = acc


def test_patch_installed_once():
    if not numba_inline.ACTIVE:  # a numba these wrappers were not checked against: numba's own steps
        assert not hasattr(inline_closurecall.InlineWorker.inline_ir, "__wrapped__")
        assert not hasattr(ssa._run_ssa, "__wrapped__")
        return
    assert getattr(inline_closurecall.InlineWorker.inline_ir, numba_inline._PATCHED, False)
    numba_inline._patch()  # a second import-time call changes nothing
    assert not getattr(inline_closurecall.InlineWorker.inline_ir.__wrapped__, numba_inline._PATCHED, False)
    assert inline_closurecall.copy.__name__ == "copy"  # the module is back outside inline_ir
    assert getattr(ssa._run_ssa, numba_inline._PATCHED, False)
    numba_inline._patch_ssa()
    assert not getattr(ssa._run_ssa.__wrapped__, numba_inline._PATCHED, False)
    assert not numba_inline._SSA_NAMES  # nothing left over from the compiles


def test_block_copies_share_one_scope():
    func_ir = compiler.run_frontend(_kernel)
    shim = numba_inline._SharedScopeCopy()
    blocks = [shim.deepcopy(b) for b in func_ir.blocks.values()]
    assert len(blocks) > 3
    scopes = {id(b.scope) for b in blocks}
    assert len(scopes) == 1 and id(func_ir.blocks[0].scope) not in scopes
    for b in blocks:
        for v in b.find_insts(inline_closurecall.ir.Assign):
            assert v.target.scope is b.scope


def _asm(dispatcher, sig):
    """The machine code without what names it: mangled names carry a counter of the functions
    compiled so far in the process, and ``.size`` lines the lengths of strings that hold them."""
    text = dispatcher.inspect_asm(sig)
    return re.sub(r"_ZN\S*|\.LCPI\S*|__numba\S*|\.file.*|\.ident.*|\.size.*", "", text)


def test_same_results_and_machine_code_as_numba_own_inliner():
    xs = np.linspace(-3.0, 3.0, 97)
    out = np.empty_like(xs)
    ref = np.empty_like(xs)
    patched = njit(_kernel)
    patched(xs, out)
    _kernel(xs, ref)  # in Python, the helpers compiled on their own: within 1e-12
    assert np.allclose(out, ref, rtol=0.0, atol=1e-12)
    if not numba_inline.ACTIVE:
        return
    worker = inline_closurecall.InlineWorker
    wrapped = worker.inline_ir, ssa._run_ssa, ssa._run_block_rewrite
    worker.inline_ir, ssa._run_ssa, ssa._run_block_rewrite = (f.__wrapped__ for f in wrapped)  # numba's own
    try:
        plain = njit(_kernel)
        plain.compile(patched.signatures[0])
    finally:
        worker.inline_ir, ssa._run_ssa, ssa._run_block_rewrite = wrapped
    sig = patched.signatures[0]
    assert _asm(patched, sig) == _asm(plain, sig)
