"""``matmul``: the cube unit's matrix multiply, with batch dims, transposed operands and a bias.

As on the cube: int8 · int8 accumulates in int32; fp16 / bf16 / fp32 accumulate in fp32. The result
is the accumulator, or (``out_dtype``) the accumulator converted on the way out, as the fixpipe does.
A bias is added in the accumulator dtype before that conversion.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._jax import ad, batching
from ..errors import PtoDtypeError, PtoShapeError, op_error
from . import cast as _cast
from . import elementwise, layout, reduce
from ._base import (BF16, F16, F32, I8, I32, batch_size, broadcast_shapes, canonical_dtype,
                    define, flag, names, shaped, tensor)

ACCUMULATOR = {I8: I32, F16: F32, BF16: F32, F32: F32}
OUT_DTYPES = {I8: (I32,), F16: (F32, F16), BF16: (F32, BF16), F32: (F32,)}


def mixed_dtype_remedy(a_dtype, b_dtype) -> str:
    """What to do about a product of ``a_dtype`` by ``b_dtype`` that the cube does not multiply (its
    operands are int8, fp16, bf16 or fp32, both of one dtype): the casts that make it one it does."""
    a_dtype, b_dtype = np.dtype(a_dtype), np.dtype(b_dtype)
    floats = [d for d in (a_dtype, b_dtype) if d in (F16, BF16, F32)]
    others = [d for d in (a_dtype, b_dtype) if d not in (F16, BF16, F32)]
    if floats and others:
        f, x = floats[0], others[0]
        if x.itemsize == 1:                                 # int8, uint8, bool: exact in every float dtype
            return f"cast the {x.name} operand to {f.name} first (`x.astype(jnp.{f.name})`: exact)"
        exact = {F32: 2 ** 24, F16: 2 ** 11, BF16: 2 ** 8}[f]
        return (f"cast the {x.name} operand to {f.name} first (`x.astype(jnp.{f.name})`: exact where "
                f"|x| <= {exact})" + ("" if f == F32 else ", or both operands to float32"))
    if len(floats) == 2:
        return "cast both operands to float32 first (`x.astype(jnp.float32)`: exact)"
    if all(d == I8 for d in others):
        return "pass both as int8"
    return (f"the cube has no {' or '.join(sorted({d.name for d in others if d != I8}))} multiply: cast both "
            "operands to int8 where their values fit (`x.astype(jnp.int8)`; the product accumulates in int32), "
            "or to float32 (exact below 2**24 in magnitude); an int8 einsum that sums an axis of one operand "
            "away has JAX sum it first, in int32: multiply first, then sum the product")


def _check_operands(a, b):
    for what, x in (("a", a), ("b", b)):
        if x.dtype not in ACCUMULATOR:
            raise op_error(PtoDtypeError, "matmul", f"{what} has dtype {np.dtype(x.dtype).name} (shape "
                           f"{tuple(x.shape)}); the cube multiplies {names(tuple(ACCUMULATOR))}: "
                           f"{mixed_dtype_remedy(a.dtype, b.dtype)}")


def _matrix(shape, transposed):
    rows, cols = shape[-2:]
    return (cols, rows) if transposed else (rows, cols)


def _abstract(a, b, *bias, out_dtype, transpose_a, transpose_b):
    _check_operands(a, b)
    if a.dtype != b.dtype:
        raise op_error(PtoDtypeError, "matmul", f"a is {a.dtype.name}{list(a.shape)} but b is "
                       f"{b.dtype.name}{list(b.shape)}; the cube multiplies operands of one dtype: "
                       f"{mixed_dtype_remedy(a.dtype, b.dtype)}")
    if out_dtype not in OUT_DTYPES[a.dtype]:
        raise op_error(PtoDtypeError, "matmul", f"out_dtype {np.dtype(out_dtype).name} is not available for "
                       f"{a.dtype.name} operands; allowed: {names(OUT_DTYPES[a.dtype])}")
    if a.ndim < 2 or b.ndim < 2:
        raise op_error(PtoShapeError, "matmul", f"operands need rank >= 2, got a {tuple(a.shape)}, b {tuple(b.shape)}")
    (m, k), (k2, n) = _matrix(a.shape, transpose_a), _matrix(b.shape, transpose_b)
    if k != k2:
        raise op_error(PtoShapeError, "matmul", f"contracting dims differ: a {tuple(a.shape)} gives K={k}, "
                       f"b {tuple(b.shape)} gives K={k2} (transpose_a={transpose_a}, transpose_b={transpose_b})")
    shape = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2]) + (m, n)
    if bias:
        (c,) = bias
        if c.dtype != ACCUMULATOR[a.dtype]:
            raise op_error(PtoDtypeError, "matmul", f"bias is {c.dtype.name}; the {a.dtype.name} cube adds a "
                           f"{ACCUMULATOR[a.dtype].name} bias")
        try:
            fits = broadcast_shapes("matmul", c.shape, shape) == shape
        except PtoShapeError:
            fits = False
        if not fits:
            raise op_error(PtoShapeError, "matmul", f"bias {tuple(c.shape)} does not broadcast to the output {shape}")
    return shaped(shape, out_dtype)


def _reference(a, b, *bias, out_dtype, transpose_a, transpose_b):
    acc = ACCUMULATOR[a.dtype]
    a = jnp.swapaxes(a, -1, -2) if transpose_a else a
    b = jnp.swapaxes(b, -1, -2) if transpose_b else b
    c = jnp.matmul(a, b, preferred_element_type=acc, precision=lax.Precision.HIGHEST)   # not TF32 on GPUs
    if bias:
        c = c + bias[0]
    if acc == F32:
        # The cube's accumulator starts at +0.0 and adds the products (pto-isa's CPU TMATMUL:
        # ``mul_acc = 0; mul_acc = fma(a, b, mul_acc)``; then ``acc + mul_acc``, ``+ bias``), so a zero
        # result is +0.0 even when every product is -0.0. XLA turns a K = 1 dot into a multiply (-0.0)
        # and folds ``x + 0.0`` away, hence the select: it changes -0.0 to +0.0 and nothing else.
        c = jnp.where(c == 0, jnp.zeros((), acc), c)
    return c.astype(out_dtype)


matmul_p = define("matmul", "matmul", abstract=_abstract, reference=_reference, dtypes=tuple(ACCUMULATOR))


def _jvp(primals, tangents, *, out_dtype, transpose_a, transpose_b):
    a, b, *bias = primals
    ta, tb, *tbias = tangents
    params = dict(out_dtype=out_dtype, transpose_a=transpose_a, transpose_b=transpose_b)
    out = matmul_p.bind(*primals, **params)
    terms = []
    if type(ta) is not ad.Zero:
        terms.append(matmul_p.bind(ta, b, **params))
    if type(tb) is not ad.Zero:
        terms.append(matmul_p.bind(a, tb, **params))
    if tbias and type(tbias[0]) is not ad.Zero:
        terms.append(layout.expand(_cast.cast(tbias[0], out_dtype), out.shape))
    if not terms:
        return out, ad.Zero(jax.typeof(out).to_tangent_aval())
    tangent = terms[0]
    for t in terms[1:]:
        tangent = elementwise.add(tangent, t)
    return out, tangent


def _transpose(ct, a, b, *bias, out_dtype, transpose_a, transpose_b):
    """Cotangents of the bilinear product, computed in float32 and rounded to each operand's dtype."""
    if type(ct) is ad.Zero:
        return [None] * (2 + len(bias))
    ct32 = _cast.cast(ct, F32)
    ct_a = ct_b = None
    if ad.is_undefined_primal(a):
        b32 = _cast.cast(b, F32)
        full = (matmul(ct32, b32, transpose_b=not transpose_b) if not transpose_a
                else matmul(b32, ct32, transpose_a=transpose_b, transpose_b=True))
        ct_a = _cast.cast(reduce.unbroadcast(full, a.aval.shape), a.aval.dtype)
    if ad.is_undefined_primal(b):
        a32 = _cast.cast(a, F32)
        full = (matmul(a32, ct32, transpose_a=not transpose_a) if not transpose_b
                else matmul(ct32, a32, transpose_a=True, transpose_b=transpose_a))
        ct_b = _cast.cast(reduce.unbroadcast(full, b.aval.shape), b.aval.dtype)
    ct_bias = [reduce.unbroadcast(_cast.cast(ct, bias[0].aval.dtype), bias[0].aval.shape)
               if ad.is_undefined_primal(bias[0]) else None] if bias else []
    return [ct_a, ct_b, *ct_bias]


def _batch(args, dims, **params):
    if dims[0] is None and dims[1] is None:  # only the bias is batched: give ``a`` the batch dim
        a = args[0]
        args, dims = (layout.expand(a, (batch_size(args, dims),) + tuple(a.shape)), *args[1:]), (0, *dims[1:])
    out_rank = max(x.ndim - (d is not None) for x, d in zip(args[:2], dims[:2]))
    return matmul_p.bind(*[layout.batch_front(x, d, out_rank) for x, d in zip(args, dims)], **params), 0


ad.primitive_jvps[matmul_p] = _jvp
ad.primitive_transposes[matmul_p] = _transpose
batching.primitive_batchers[matmul_p] = _batch


def matmul(a, b, *, out_dtype=None, transpose_a: bool = False, transpose_b: bool = False, bias=None):
    """``a @ b`` on the cube: ``a`` is ``(..., M, K)`` (``(..., K, M)`` with ``transpose_a``), ``b`` is
    ``(..., K, N)`` (``(..., N, K)`` with ``transpose_b``); leading batch dims broadcast.

    ``out_dtype`` defaults to the accumulator (int32 for int8, float32 otherwise); fp16/bf16 operands
    may also return their own dtype. ``bias`` (int32 / float32, broadcastable to the output) is added
    in the accumulator.
    """
    a, b = tensor("matmul", a), tensor("matmul", b)
    _check_operands(a, b)
    out_dtype = ACCUMULATOR[a.dtype] if out_dtype is None else canonical_dtype("matmul", out_dtype)
    args = (a, b) if bias is None else (a, b, tensor("matmul", bias))
    return matmul_p.bind(*args, out_dtype=out_dtype, transpose_a=flag("matmul", "transpose_a", transpose_a),
                         transpose_b=flag("matmul", "transpose_b", transpose_b))
