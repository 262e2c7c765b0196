"""The CPU skinning kernels' stack scratch and row stores (numba intrinsics, LLVM IR).

A kernel computes one run of vertices (≤ SCRATCH rows) at a time into a float32 scratch buffer on
its own stack frame, in structure-of-arrays rows (posed positions, posed normals, morph offsets), then
``scatter`` writes the rows to the (V, 3) float32 outputs at the vertices' original rows: a block of
eight consecutive output rows with three 32-byte stores (x, y, z interleaved in registers), a block
of four with three 16-byte stores, a pair with a 16-byte and an 8-byte store, any other row with
an 8-byte and a 4-byte store. The outputs
must be C-contiguous (n, 3) float32 (rows 12 bytes apart; the stores assume it). Nothing here
allocates.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["SCRATCH", "PAD", "PX", "PY", "PZ", "NX", "NY", "NZ", "OX", "OY", "OZ", "scratch", "zero_offsets",
           "gather_offsets", "scatter"]

#: most rows in one run (the stack scratch holds one run; a multiple of the 8-wide vector)
SCRATCH = 256
#: zero rows after the per-row tables: a run's vector loop runs to its row count rounded up to 8
PAD = 8
#: the scratch's rows (SCRATCH floats used of each; rows 1,056 bytes apart, not a multiple of 4 KiB,
#: so no false store-to-load aliasing): posed position x, y, z; posed normal x, y, z; morph offset
#: x, y, z (zero in groups without offsets)
ROW = SCRATCH + 8
PX, PY, PZ, NX, NY, NZ, OX, OY, OZ = (row * ROW for row in range(9))


@intrinsic
def scratch(typingctx):
    """Pointer to 9 × ROW float32 in the calling function's stack frame (32-byte aligned,
    uninitialised; allocated once per call, in the entry block, so a loop does not grow the stack).
    A raw pointer, not an array: the kernels compile without numba's reference counting
    (``_nrt=False``), which would otherwise incref/decref every array handed to a helper with a
    loop, once per run."""
    def codegen(context, builder, signature, args):
        with builder.goto_entry_block():
            slot = builder.alloca(ir.ArrayType(ir.FloatType(), 9 * ROW))
            slot.align = 32
        return builder.bitcast(slot, ir.PointerType(ir.FloatType()))
    return types.CPointer(types.float32)(), codegen


def _row_pointer(context, builder, out_t, out, i_t, i):
    """LLVM float* to out[i, 0] of a (n, 3) float32 C-contiguous array (the row stride is the
    constant 3 floats: the callers check the shape)."""
    if out_t.layout != "C" or out_t.ndim != 2:
        raise TypeError("scratch stores need a C-contiguous (n, 3) float32 array")
    rows = context.make_array(out_t)(context, builder, out)
    i = context.cast(builder, i, i_t, types.intp)
    return builder.gep(rows.data, [builder.mul(i, context.get_constant(types.intp, 3))], inbounds=True)


def _load_xyz(context, builder, s, k_t, k, lanes):
    """Scratch x, y, z at k, k + ROW, k + 2 ROW as three <lanes x float> (lanes 1: scalars)."""
    k = context.cast(builder, k, k_t, types.intp)
    out = []
    for r in (PX, PY, PZ):
        p = builder.gep(s, [builder.add(k, context.get_constant(types.intp, r))])
        if lanes > 1:
            p = builder.bitcast(p, ir.PointerType(ir.VectorType(ir.FloatType(), lanes)))
        out.append(builder.load(p, align=4))
    return out


def _mask(lanes):
    """A shufflevector mask: <n x i32> constant of the lane numbers."""
    lanes = list(lanes)
    return ir.Constant(ir.VectorType(ir.IntType(32), len(lanes)), lanes)


def _store(builder, value, dst, offset):
    """Store a float vector at float* dst + offset, unaligned."""
    p = builder.gep(dst, [ir.IntType(64)(offset)])
    builder.store(value, builder.bitcast(p, ir.PointerType(value.type)), align=4)


@intrinsic
def _put_row(typingctx, out, i, s, k):
    """out[i] = (s[PX + k], s[PY + k], s[PZ + k]) for out (n, 3) float32 C-contiguous and s the
    scratch pointer (k offset by NX for normals): (x, y) as one 8-byte store, z as one 4-byte store."""
    def codegen(context, builder, signature, args):
        dst = _row_pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        x, y, z = _load_xyz(context, builder, args[2], signature.args[3], args[3], 1)
        pair = ir.VectorType(ir.FloatType(), 2)
        xy = builder.insert_element(builder.insert_element(ir.Constant(pair, ir.Undefined), x, ir.IntType(32)(0)),
                                    y, ir.IntType(32)(1))
        _store(builder, xy, dst, 0)
        builder.store(z, builder.gep(dst, [ir.IntType(64)(2)]), align=4)
        return context.get_dummy_value()
    return types.void(out, i, s, k), codegen


def _rows_store(n, chunks, doc):
    """An intrinsic (out, i, s, k): out[i .. i + n - 1] ← scratch rows k .. k + n - 1 (as
    ``_put_row``), the n-wide x, y, z rows interleaved in registers and stored as ``chunks``
    floats at a time (3n in all)."""
    @intrinsic
    def put(typingctx, out, i, s, k):
        def codegen(context, builder, signature, args):
            dst = _row_pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1])
            x, y, z = _load_xyz(context, builder, args[2], signature.args[3], args[3], n)
            xy = builder.shuffle_vector(x, y, _mask(range(2 * n)))  # x_j = j, y_j = n + j
            zz = builder.shuffle_vector(z, z, _mask(j % n for j in range(2 * n)))  # z_j = 2n + j
            lane = [(p % 3) * n + p // 3 for p in range(3 * n)]  # output float p = row p // 3, axis p % 3
            offset = 0
            for c in chunks:
                _store(builder, builder.shuffle_vector(xy, zz, _mask(lane[offset:offset + c])), dst, offset)
                offset += c
            return context.get_dummy_value()
        return types.void(out, i, s, k), codegen
    put.__doc__ = doc
    return put


_put_rows8 = _rows_store(8, (8, 8, 8), "out[i .. i + 7] ← scratch rows k .. k + 7: three 32-byte stores.")
_put_rows4 = _rows_store(4, (4, 4, 4), "out[i .. i + 3] ← scratch rows k .. k + 3: three 16-byte stores.")
_put_rows2 = _rows_store(2, (4, 2), "out[i], out[i + 1] ← scratch rows k, k + 1: a 16-byte and an 8-byte store.")


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def zero_offsets(s):
    """Scratch rows OX.. ← 0: the morph offsets of a group without them (once per kernel call)."""
    for k in range(3 * ROW):
        s[OX + k] = np.float32(0.0)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def gather_offsets(s, lo, end, vertex_index, vertex_offset):
    """Scratch rows OX.. ← the morph offsets of permuted rows [lo, end) (from their original rows),
    so the transform loops add them unbranched."""
    for k in range(np.int64(end - lo)):
        v = lo + np.uint64(k)
        i = vertex_index[v]
        s[OX + k] = vertex_offset[i, 0]; s[OY + k] = vertex_offset[i, 1]; s[OZ + k] = vertex_offset[i, 2]


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def scatter(s, run, r, vertex_index, want_normal, vertex_position_out, vertex_normal_out):
    """Output rows of run r's permuted rows [lo, hi) = run[r, 0:2] ← the scratch's posed positions
    (and normals). Rows [lo, run[r, 7]) come in eights of consecutive output rows, then up to
    run[r, 8] in fours, then up to run[r, 9] in pairs (as the tables are built), written with 32-,
    16- and 16 + 8-byte stores; the rest one by one."""
    lo = run[r, 0]
    n8 = np.int64(run[r, 7] - lo)
    n4 = np.int64(run[r, 8] - lo)
    n2 = np.int64(run[r, 9] - lo)
    n = np.int64(run[r, 1] - lo)
    if want_normal:
        for k in range(0, n8, 8):
            i = vertex_index[lo + np.uint64(k)]
            _put_rows8(vertex_position_out, i, s, k)
            _put_rows8(vertex_normal_out, i, s, NX + k)
        for k in range(n8, n4, 4):
            i = vertex_index[lo + np.uint64(k)]
            _put_rows4(vertex_position_out, i, s, k)
            _put_rows4(vertex_normal_out, i, s, NX + k)
        for k in range(n4, n2, 2):
            i = vertex_index[lo + np.uint64(k)]
            _put_rows2(vertex_position_out, i, s, k)
            _put_rows2(vertex_normal_out, i, s, NX + k)
        for k in range(n2, n):
            i = vertex_index[lo + np.uint64(k)]
            _put_row(vertex_position_out, i, s, k)
            _put_row(vertex_normal_out, i, s, NX + k)
    else:
        for k in range(0, n8, 8):
            _put_rows8(vertex_position_out, vertex_index[lo + np.uint64(k)], s, k)
        for k in range(n8, n4, 4):
            _put_rows4(vertex_position_out, vertex_index[lo + np.uint64(k)], s, k)
        for k in range(n4, n2, 2):
            _put_rows2(vertex_position_out, vertex_index[lo + np.uint64(k)], s, k)
        for k in range(n2, n):
            _put_row(vertex_position_out, vertex_index[lo + np.uint64(k)], s, k)
