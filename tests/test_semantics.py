"""The tests' NumPy semantics of codegen's tile instructions (tests/plan_semantics.py, the reference
interpreter's) against the ops' JAX references.

Every instruction runs on random tiles over the dtypes its op accepts and two shapes (size-1 and odd),
plus edge cases (wrap, NaN, ties, out-of-range indices, repeated indices). Each result must have the
primitive's abstract-eval dtype and shape; integers, bools and indices must match exactly; floats
within the per-dtype tolerance in ``TOL`` (see the comments where a case needs more).
"""
from __future__ import annotations

import ast
import inspect
from functools import partial

import jax
import numpy as np
import pytest

import plan_semantics as semantics
from plan_semantics import SEMANTICS, execute
from ptojax._jax import ShapedArray
from ptojax.ascend.cost import CUSTOM
from ptojax.primitives import tile
from ptojax.primitives._base import OPS
from ptojax.primitives.tile import TILE_OPS
from semantic_cases import BF16, CASES, F16, F32, FLOATS, I8, I32, MOVES, TENSOR_OP, TOL, rand

def reference(name):
    """The JAX implementation the tile primitive lowers to (the tensor op's ``reference``)."""
    if name == "mgather":
        return OPS["gather"].reference
    if name == "mscatter":
        return tile._mscatter_reference
    if name == "tmatmul_acc":
        return tile._tmatmul_acc_reference
    if name in ("tci", "tdeinterleave", "tinterleave", "tcumsum_carry"):
        return getattr(tile, f"_{name}_reference")
    return OPS[TENSOR_OP[name]].reference


def abstract(name, args, params):
    out, _ = TILE_OPS[name].abstract_eval(*[ShapedArray(np.shape(a), np.asarray(a).dtype) for a in args],
                                          **params)
    return out


def compare(got, want, aval, tol, atol_scale):
    want = np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.dtype == aval.dtype == want.dtype, (got.dtype, aval.dtype, want.dtype)
    assert got.shape == tuple(aval.shape) == want.shape, (got.shape, aval.shape, want.shape)
    if got.dtype not in FLOATS:
        np.testing.assert_array_equal(got, want)
        return
    rtol = TOL[tol][got.dtype]
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    scale = np.max(np.abs(w[finite]), initial=0.0)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol_scale * rtol * max(scale, 1.0))


@pytest.mark.parametrize("name, args, params, tol, atol_scale", CASES)
def test_matches_reference(name, args, params, tol, atol_scale):
    got = execute(name, *args, **params)
    want = jax.jit(partial(reference(name), **params))(*args)
    aval = abstract(name, args, params)
    if TILE_OPS[name].multiple_results:
        assert isinstance(got, tuple) and len(got) == len(want) == len(aval)
        for g, w, a in zip(got, want, aval):
            compare(g, w, a, tol, atol_scale)
    else:
        compare(got, want, aval, tol, atol_scale)


def test_every_compute_instruction_has_semantics():
    compute = set(TILE_OPS) - MOVES - set(CUSTOM)          # user-defined ones run their own
    assert set(SEMANTICS) == compute, (sorted(compute - set(SEMANTICS)), sorted(set(SEMANTICS) - compute))
    assert set(TILE_OPS) >= MOVES


def test_every_instruction_is_tested():
    """Every built-in instruction (user-defined ones, registered by other tests, bring their own)."""
    tested = {p.values[0] for p in CASES}
    builtin = set(SEMANTICS) - set(CUSTOM)
    assert tested == builtin, sorted(builtin - tested)


def test_semantics_does_not_use_jax():
    tree = ast.parse(inspect.getsource(semantics))
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m.split(".")[0] == "jax" for m in modules), modules


def test_execute_accepts_the_pto_prefix_and_rejects_moves():
    x = np.array([1.5, -2.5], F16)
    np.testing.assert_array_equal(execute("pto.tneg", x), -x)
    with pytest.raises(NotImplementedError, match="tload"):
        execute("tload", x)


def test_hardware_dtype_examples():
    # float16: 2048 + 1 is a tie, rounded once to even; 2048 + 3 rounds up to 2052
    got = execute("tadd", np.array([2048, 2048], F16), np.array([1, 3], F16))
    assert got.dtype == F16 and got.tolist() == [2048, 2052]
    assert execute("tadd", np.array([127, -128], I8), np.array(1, I8)).tolist() == [-128, -127]
    assert execute("tcvt", np.array([2.5, -2.5, 0.49999997, np.nan], F32), dtype=I8, rounding="round",
                   saturate=True).tolist() == [3, -3, 0, 0]
    q = execute("tmatmul", np.full((1, 129), -128, I8), np.full((129, 1), -128, I8), out_dtype=I32,
                transpose_a=False, transpose_b=False)
    assert q.dtype == I32 and q.item() == 129 * 128 * 128


@pytest.mark.parametrize("k", [1023, 1024, 1025, 3000])
def test_int8_matmul_is_exact_on_both_sides_of_the_float32_limit(k):
    """Up to 1024 terms the int8 product runs in float32 BLAS (partial sums <= 2**24), beyond in
    float64: both equal the int64 product, including the extreme all -128 rows."""
    rng = np.random.default_rng(k)
    a = rng.integers(-128, 128, (5, k)).astype(I8)
    b = rng.integers(-128, 128, (k, 7)).astype(I8)
    a[0], b[:, 0] = -128, -128
    got = execute("tmatmul", a, b, out_dtype=I32, transpose_a=False, transpose_b=False)
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert got.dtype == I32 and got[0, 0] == k * 128 * 128
    np.testing.assert_array_equal(got, want.astype(I32))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_mscatter_in_place_equals_the_returned_form(accumulate, axis):
    """The interpreter's in-place mscatter makes the same updates as the semantics' returned array:
    repeated indices in order (last write wins, or one rounding per add), -1 and out-of-range skipped."""
    rng = np.random.default_rng(axis + 2 * accumulate)
    for dtype in (F16, BF16, F32, I8):
        gm = rand(rng, (6, 5, 3), dtype)
        idx = np.array([[2, -1, 2], [5, 9, 0]], np.int32)
        shape = list(gm.shape)
        shape[axis:axis + 1] = idx.shape
        rows = rand(rng, tuple(shape), dtype)
        want = execute("mscatter", gm, idx, rows, axis=axis, accumulate=accumulate)
        got = gm.copy()
        semantics.mscatter_into(got, idx, rows, axis=axis, accumulate=accumulate)
        np.testing.assert_array_equal(got.view(f"u{dtype.itemsize}"), want.view(f"u{dtype.itemsize}"))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [F32, BF16, I32, I8])
def test_merge_topk_order_against_a_python_sort(dtype, largest):
    """tmrgsort's order equals Python's sort of (value, index) pairs: best value first, NaN above +inf,
    -0.0 tied with 0.0, ties by the lower index with -1 after every real index; the extremes of the
    integer types and the infinities included."""
    rng = np.random.default_rng(7)
    if dtype in FLOATS:
        pool = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 3.0], np.float32)
    else:
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, -1, 1, info.min + 1, 5], np.int64)
    values = rng.choice(pool, (3, 4, 6)).astype(dtype)
    indices = rng.integers(-1, 12, (3, 4, 6)).astype(I32)
    got_v, got_i = execute("tmrgsort", values, indices, k=10, largest=largest)
    for row in range(3):
        pairs = []
        for val, ix in zip(values[row].reshape(-1).astype(np.float64), indices[row].reshape(-1)):
            nan = bool(np.isnan(val))
            key = 0.0 if nan else (-val if largest else val) + 0.0
            pairs.append(((not nan) if largest else nan, key, int(np.uint32(ix)), ix))
        want = [p[3] for p in sorted(pairs)][:10]
        assert got_i[row].tolist() == want, (row, got_i[row].tolist(), want)
