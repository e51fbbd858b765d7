"""Layout ops (reshape, transpose, permute, expand, concat, view, assemble, pad) against NumPy goldens.

Layout ops move data without arithmetic, so every result must equal the NumPy golden bit for bit.
"""
from __future__ import annotations

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import (F16, F32, I8, I32, NUMERIC, assert_eager_matches_jit, assert_vmap_matches_loop, rand)

OPS = pj.ops


def exact(out, golden):
    golden = np.asarray(golden)
    assert out.dtype == golden.dtype, (out.dtype, golden.dtype)
    assert out.shape == golden.shape, (out.shape, golden.shape)
    np.testing.assert_array_equal(np.asarray(out), golden)


def golden_view(x, shape, offsets, valid_shape=None):
    valid_shape = shape if valid_shape is None else valid_shape
    out = np.zeros(shape, x.dtype)
    out[tuple(slice(0, v) for v in valid_shape)] = x[tuple(slice(o, o + v) for o, v in zip(offsets, valid_shape))]
    return out


def golden_assemble(x, offsets, out):
    out = np.array(out, copy=True)
    out[tuple(slice(o, o + n) for o, n in zip(offsets, x.shape))] = x
    return out


def _id(v):
    return str(v).replace(" ", "")


# ---------------------------------------------------------------------------------------------- cases
# Each case: name, input shapes, op call, numpy golden. Shapes include size-1 and prime sizes.
RESHAPE = [((7,), (7, 1)), ((3, 5), (5, 3)), ((1, 13), (13,)), ((4, 1, 6), (-1,)), ((2, 3, 17), (6, -1)),
           ((2, 3, 17), (1, 17, 1, 6)), ((1,), ())]


@pytest.mark.parametrize("src,dst", RESHAPE, ids=_id)
def test_reshape(src, dst):
    x = rand(src, F32, seed=1)
    exact(assert_eager_matches_jit(lambda v: OPS.reshape(v, dst), x), np.reshape(x, dst))


TRANSPOSE = [((3, 5), -2, -1), ((1, 13), 0, 1), ((4, 1, 6), 0, 2), ((2, 3, 17), -1, 0), ((2, 3, 17), 1, 1)]


@pytest.mark.parametrize("shape,d0,d1", TRANSPOSE, ids=_id)
def test_transpose(shape, d0, d1):
    x = rand(shape, F32, seed=2)
    exact(assert_eager_matches_jit(lambda v: OPS.transpose(v, d0, d1), x), np.swapaxes(x, d0, d1))


def test_transpose_default_swaps_last_two():
    x = rand((2, 3, 5), F32, seed=2)
    exact(OPS.transpose(x), np.swapaxes(x, -2, -1))


PERMUTE = [((7,), (0,)), ((3, 5), (1, 0)), ((4, 1, 6), (1, 2, 0)), ((2, 3, 17), (2, 0, 1)),
           ((2, 3, 17), (-1, 0, -2)), ((2, 1, 3, 5), (3, 1, 0, 2))]


@pytest.mark.parametrize("shape,dims", PERMUTE, ids=_id)
def test_permute(shape, dims):
    x = rand(shape, F32, seed=3)
    exact(assert_eager_matches_jit(lambda v: OPS.permute(v, dims), x), np.transpose(x, dims))


EXPAND = [((1,), (5,)), ((1,), (2, 3, 1)), ((7,), (3, 7)), ((1, 13), (4, 13)), ((4, 1, 6), (4, 5, 6)),
          ((3, 1), (2, 3, 17)), ((2, 3, 17), (2, 3, 17))]


@pytest.mark.parametrize("src,dst", EXPAND, ids=_id)
def test_expand(src, dst):
    x = rand(src, F32, seed=4)
    exact(assert_eager_matches_jit(lambda v: OPS.expand(v, dst), x), np.broadcast_to(x, dst))


CONCAT = [([(1,), (7,)], 0), ([(3, 5), (3, 1), (3, 2)], 1), ([(1, 13), (4, 13)], 0), ([(4, 1, 6), (4, 1, 6)], -2),
          ([(2, 3, 17), (2, 3, 1), (2, 3, 5)], -1), ([(2, 3, 17)], 0)]


@pytest.mark.parametrize("shapes,axis", CONCAT, ids=_id)
def test_concat(shapes, axis):
    xs = [rand(s, F32, seed=10 + i) for i, s in enumerate(shapes)]
    out = assert_eager_matches_jit(lambda *vs: OPS.concat(list(vs), axis=axis), *xs)
    exact(out, np.concatenate(xs, axis=axis))


VIEW = [((7,), (3,), (4,), None), ((7,), (1,), (6,), None), ((3, 5), (2, 3), (1, 2), None),
        ((1, 13), (1, 5), (0, 8), None), ((2, 3, 17), (1, 2, 7), (1, 1, 10), None),
        ((2, 3, 17), (2, 3, 17), (0, 0, 0), None),
        # valid_shape: only the leading valid part is read, the rest of the window is zero
        ((3, 5), (2, 4), (1, 2), (2, 3)), ((7,), (5,), (4,), (3,)), ((2, 3, 17), (2, 3, 8), (0, 1, 11), (1, 2, 6)),
        ((4, 1, 6), (3, 1, 4), (0, 0, 0), (0, 1, 4))]


@pytest.mark.parametrize("src,shape,offsets,valid", VIEW, ids=_id)
def test_view(src, shape, offsets, valid):
    x = rand(src, F32, seed=5, low=1.0, high=3.0)  # nonzero data, so a leaked element can't look like padding
    out = assert_eager_matches_jit(lambda v: OPS.view(v, shape, offsets, valid_shape=valid), x)
    exact(out, golden_view(x, shape, offsets, valid))
    if valid is not None:
        outside = np.ones(shape, bool)
        outside[tuple(slice(0, v) for v in valid)] = False
        assert np.all(np.asarray(out)[outside] == 0)


ASSEMBLE = [((1,), (0,), (7,)), ((3,), (4,), (7,)), ((2, 3), (1, 2), (3, 5)), ((1, 13), (0, 0), (1, 13)),
            ((1, 2, 5), (1, 1, 12), (2, 3, 17)), ((4, 1, 6), (0, 0, 0), (5, 2, 7))]


@pytest.mark.parametrize("src,offsets,dst", ASSEMBLE, ids=_id)
def test_assemble(src, offsets, dst):
    x, out = rand(src, F32, seed=6), rand(dst, F32, seed=7)
    res = assert_eager_matches_jit(lambda v, o: OPS.assemble(v, offsets, o), x, out)
    exact(res, golden_assemble(x, offsets, out))


PAD = [((1,), [(0, 0)], 0), ((7,), [(2, 3)], 0), ((3, 5), [(1, 0), (0, 4)], 2.5), ((1, 13), [(0, 1), (3, 0)], -1),
       ((4, 1, 6), [(1, 1), (0, 2), (1, 0)], 7), ((2, 3, 17), [(0, 0), (1, 2), (0, 3)], -0.5)]


@pytest.mark.parametrize("shape,pads,value", PAD, ids=_id)
def test_pad(shape, pads, value):
    x = rand(shape, F32, seed=8)
    out = assert_eager_matches_jit(lambda v: OPS.pad(v, pads, value), x)
    exact(out, np.pad(x, pads, constant_values=np.float32(value)))


def test_pad_default_value_is_zero():
    x = rand((2, 3), F32, seed=8, low=1.0, high=2.0)
    exact(OPS.pad(x, [(1, 1), (0, 2)]), np.pad(x, [(1, 1), (0, 2)]))


# ----------------------------------------------------------------------------------------- dtype grid
def _dtype_cases():
    return {
        "reshape": (lambda x: OPS.reshape(x, (-1, 3)), lambda x: np.reshape(x, (-1, 3)), [(4, 3, 5)]),
        "transpose": (lambda x: OPS.transpose(x, 0, 2), lambda x: np.swapaxes(x, 0, 2), [(4, 3, 5)]),
        "permute": (lambda x: OPS.permute(x, (1, 2, 0)), lambda x: np.transpose(x, (1, 2, 0)), [(4, 3, 5)]),
        "expand": (lambda x: OPS.expand(x, (2, 4, 3, 5)), lambda x: np.broadcast_to(x, (2, 4, 3, 5)), [(4, 1, 5)]),
        "concat": (lambda x, y: OPS.concat([x, y], axis=1), lambda x, y: np.concatenate([x, y], 1),
                   [(4, 3, 5), (4, 2, 5)]),
        "view": (lambda x: OPS.view(x, (2, 3, 4), (1, 0, 1), valid_shape=(2, 2, 3)),
                 lambda x: golden_view(x, (2, 3, 4), (1, 0, 1), (2, 2, 3)), [(4, 3, 5)]),
        "assemble": (lambda x, o: OPS.assemble(x, (1, 1, 2), o), lambda x, o: golden_assemble(x, (1, 1, 2), o),
                     [(2, 2, 3), (4, 3, 5)]),
        "pad": (lambda x: OPS.pad(x, [(0, 1), (2, 0), (1, 1)], 5), lambda x: np.pad(x, [(0, 1), (2, 0), (1, 1)],
                                                                                    constant_values=x.dtype.type(5)),
                [(4, 3, 5)]),
    }


DTYPE_CASES = _dtype_cases()


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(DTYPE_CASES))
def test_layout_dtypes(name, dtype):
    fn, gold, shapes = DTYPE_CASES[name]
    args = [rand(s, dtype, seed=20 + i) for i, s in enumerate(shapes)]
    out = assert_eager_matches_jit(fn, *args)
    exact(out, gold(*args))


@pytest.mark.parametrize("dtype,value", [(F32, 2.5), (F16, -1.25), (I8, -7), (I32, 123456), (I8, 127)],
                         ids=_id)
def test_pad_nonzero_value(dtype, value):
    x = rand((3, 4), dtype, seed=9)
    out = assert_eager_matches_jit(lambda v: OPS.pad(v, [(1, 2), (0, 1)], value), x)
    exact(out, np.pad(x, [(1, 2), (0, 1)], constant_values=np.asarray(value, dtype)))


def test_bool_layout():
    x = rand((3, 4), np.bool_, seed=3)
    exact(OPS.concat([x, x[:1]], axis=0), np.concatenate([x, x[:1]], 0))
    exact(OPS.transpose(x), x.T)


# --------------------------------------------------------------------------------------------- vmap
def _vmap_cases():
    return [
        ("reshape", lambda x: OPS.reshape(x, (-1,)), [(4, 3, 5)], [0, 1, -1]),
        ("transpose", lambda x: OPS.transpose(x, 0, 1), [(4, 3, 5)], [0, 1, -1]),
        ("permute", lambda x: OPS.permute(x, (1, 0)), [(4, 3, 5)], [0, 2]),
        ("expand", lambda x: OPS.expand(x, (2, 3, 5)), [(4, 1, 5)], [0]),
        ("expand", lambda x: OPS.expand(x, (2, 3, 5)), [(3, 4, 5)], [1]),
        ("expand-rank", lambda x: OPS.expand(x, (2, 3, 5)), [(5, 4)], [-1]),
        ("view", lambda x: OPS.view(x, (2, 3), (1, 1), valid_shape=(2, 2)), [(4, 3, 5)], [0, 1, -1]),
        ("pad", lambda x: OPS.pad(x, [(1, 0), (0, 2)], 3.0), [(4, 3, 5)], [0, 1, -1]),
        ("concat", lambda x, y: OPS.concat([x, y], axis=-1), [(4, 3, 5), (3, 4, 2)], [(0, 1), (2, None), (None, 1)]),
        ("assemble", lambda x, o: OPS.assemble(x, (1, 2), o), [(2, 3, 4), (4, 3, 5)],
         [(2, 0), (None, 1), (-1, None)]),
    ]


VMAP_CASES = [(n, f, s, ax) for n, f, s, axes in _vmap_cases() for ax in axes]


@pytest.mark.parametrize("name,fn,shapes,in_axes", VMAP_CASES, ids=[f"{c[0]}-{_id(c[3])}" for c in VMAP_CASES])
def test_vmap_matches_loop(name, fn, shapes, in_axes):
    args = [rand(s, F32, seed=30 + i) for i, s in enumerate(shapes)]
    if name == "concat" and in_axes == (2, None):
        args[1] = rand((4, 2), F32, seed=31)  # unbatched second operand
    if name == "concat" and in_axes == (None, 1):
        args[0] = rand((3, 5), F32, seed=30)
    if name == "assemble" and in_axes == (None, 1):
        args[0] = rand((2, 3), F32, seed=30)
    if name == "assemble" and in_axes == (-1, None):
        args[0], args[1] = rand((3, 4, 2), F32, seed=30), rand((4, 6), F32, seed=31)
    out = assert_vmap_matches_loop(fn, tuple(args), in_axes, rtol=0, atol=0)
    # Independent golden for the mapped slices too (a consistently wrong batching rule must fail).
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,)
    size = next(a.shape[d] for a, d in zip(args, axes) if d is not None)
    golden_fns = {
        "reshape": lambda x: np.reshape(x, (-1,)), "transpose": lambda x: np.swapaxes(x, 0, 1),
        "permute": lambda x: np.transpose(x, (1, 0)), "expand": lambda x: np.broadcast_to(x, (2, 3, 5)),
        "expand-rank": lambda x: np.broadcast_to(x, (2, 3, 5)),
        "view": lambda x: golden_view(x, (2, 3), (1, 1), (2, 2)),
        "pad": lambda x: np.pad(x, [(1, 0), (0, 2)], constant_values=np.float32(3.0)),
        "concat": lambda x, y: np.concatenate([x, y], -1), "assemble": lambda x, o: golden_assemble(x, (1, 2), o),
    }
    golden = np.stack([golden_fns[name](*[a if d is None else np.take(a, i, axis=d) for a, d in zip(args, axes)])
                       for i in range(size)])
    exact(out, golden)


def test_nested_vmap():
    x = rand((3, 4, 5, 6), F32, seed=40)
    fn = jax.vmap(jax.vmap(lambda v: OPS.pad(OPS.transpose(v, 0, 1), [(1, 0), (0, 1)], -2.0), in_axes=-1),
                  in_axes=1)
    out = fn(x)  # outer maps axis 1 (size 4) -> (3, 5, 6); inner maps its last axis (size 6) -> (3, 5)
    golden = np.stack([np.stack([np.pad(x[:, i, :, j].T, [(1, 0), (0, 1)], constant_values=np.float32(-2.0))
                                 for j in range(6)]) for i in range(4)])
    exact(out, golden)
    exact(jax.jit(fn)(x), golden)


# ------------------------------------------------------------------------------------------- errors
def _raises(cls, op, *fragments):
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in (f"pto.{op}",) + fragments)
    return pytest.raises(cls, match=re.compile(pattern, re.S))


def test_error_reshape_size_mismatch():
    x = np.zeros((2, 3, 17), F32)
    with _raises(pj.PtoShapeError, "reshape", "(2, 3, 17)", "102", "(5, 20)", "100"):
        OPS.reshape(x, (5, 20))
    with _raises(pj.PtoShapeError, "reshape", "(4, -1)", "(2, 3, 17)"):
        OPS.reshape(x, (4, -1))
    with _raises(pj.PtoArgumentError, "reshape", "(-1, -1)"):
        OPS.reshape(x, (-1, -1))


def test_error_expand_incompatible():
    with _raises(pj.PtoShapeError, "expand", "(3, 5)", "(3, 4)"):
        OPS.expand(np.zeros((3, 5), F32), (3, 4))
    with _raises(pj.PtoShapeError, "expand", "(4, 1, 6)", "(1, 6)"):  # expand cannot drop dims
        OPS.expand(np.zeros((4, 1, 6), F32), (1, 6))


def test_error_concat_mismatched_dims():
    with _raises(pj.PtoShapeError, "concat", "(3, 5)", "(4, 5)", "axis 1"):
        OPS.concat([np.zeros((3, 5), F32), np.zeros((4, 5), F32)], axis=1)
    with _raises(pj.PtoShapeError, "concat", "(3, 5)", "(3, 5, 1)"):
        OPS.concat([np.zeros((3, 5), F32), np.zeros((3, 5, 1), F32)], axis=0)
    with _raises(pj.PtoDtypeError, "concat", "float32", "float16"):
        OPS.concat([np.zeros((3, 5), F32), np.zeros((3, 5), F16)])
    with _raises(pj.PtoArgumentError, "concat", "axis 2"):
        OPS.concat([np.zeros((3, 5), F32)] * 2, axis=2)


def test_error_view_out_of_bounds():
    with _raises(pj.PtoShapeError, "view", "offset 3", "(3, 5)", "<= 5"):
        OPS.view(np.zeros((3, 5), F32), (2, 3), (1, 3))
    with _raises(pj.PtoShapeError, "view", "valid 4", "size 3"):
        OPS.view(np.zeros((3, 5), F32), (2, 3), (0, 0), valid_shape=(2, 4))
    with _raises(pj.PtoShapeError, "view", "offset -1"):
        OPS.view(np.zeros((3, 5), F32), (2, 3), (-1, 0))
    with _raises(pj.PtoShapeError, "view", "(2,)", "(3, 5)"):
        OPS.view(np.zeros((3, 5), F32), (2,), (0,))


def test_error_assemble_does_not_fit():
    with _raises(pj.PtoShapeError, "assemble", "(2, 3)", "(2, 3)", "(3, 5)"):
        OPS.assemble(np.zeros((2, 3), F32), (2, 3), np.zeros((3, 5), F32))
    with _raises(pj.PtoShapeError, "assemble", "(4, 1)", "(3, 5)"):
        OPS.assemble(np.zeros((4, 1), F32), (0, 0), np.zeros((3, 5), F32))
    with _raises(pj.PtoDtypeError, "assemble", "int8", "int32"):
        OPS.assemble(np.zeros((1, 1), I8), (0, 0), np.zeros((3, 5), I32))


@pytest.mark.parametrize("config", [((-1, 2, 0), (0, -3, 0)), ((-2, -1, 0), (-1, -1, 0)), ((0, 0, 0), (2, -2, 0))])
def test_lax_pad_with_negative_edges_cuts_then_pads(config):
    """``lax.pad`` with negative edges (autodiff's shifts, as in ``jnp.prod``'s derivative) in a kernel,
    on both backends (it was unsupported)."""
    x = np.arange(48, dtype=np.float32).reshape(6, 8)
    fn = lambda v: jax.lax.pad(v, np.float32(-1), config)  # noqa: E731
    for backend in ("sim", "xla"):
        exact(pj.kernel(fn, backend=backend)(x), fn(x))


def test_error_negative_pad():
    with _raises(pj.PtoArgumentError, "pad", "((1, 0), (0, -2))", "non-negative"):
        OPS.pad(np.zeros((3, 5), F32), [(1, 0), (0, -2)])
    with _raises(pj.PtoShapeError, "pad", "((1, 1),)", "(3, 5)"):
        OPS.pad(np.zeros((3, 5), F32), [(1, 1)])
    with _raises(pj.PtoArgumentError, "pad", "2.5", "int8"):
        OPS.pad(np.zeros((3, 5), I8), [(1, 1), (0, 0)], 2.5)


def test_error_permute_and_transpose_args():
    with _raises(pj.PtoArgumentError, "permute", "(0, 0, 1)", "(2, 3, 4)"):
        OPS.permute(np.zeros((2, 3, 4), F32), (0, 0, 1))
    with _raises(pj.PtoArgumentError, "transpose", "axis 3", "rank-3"):
        OPS.transpose(np.zeros((2, 3, 4), F32), 0, 3)
    with _raises(pj.PtoShapeError, "transpose", "(7,)"):
        OPS.transpose(np.zeros((7,), F32))


def test_every_permutation_of_a_3d_array_and_axis_reversals_in_4d():
    """``x.T`` of a 3-d / 4-d array and the other permutations: where the tile holds the two moved axes
    as a column (a (3, 4, 1) tile is 12 x 1), selection regroups it as their matrix before ``ttrans``
    (it failed: "no copy of a 1x12 tile into a 4x3 one"); eager, jitted and ptoas alike."""
    x3 = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x4 = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    cases = [(x3, p) for p in itertools.permutations(range(3))] + [
        (x4, p) for p in [(3, 2, 1, 0), (0, 2, 3, 1), (3, 1, 2, 0), (1, 0, 3, 2)]]
    for x, perm in cases:
        kernel = pj.kernel(lambda v, perm=perm: jnp.transpose(v, perm))
        want = np.transpose(x, perm)
        np.testing.assert_array_equal(np.asarray(kernel(x)), want)
        np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), want)
        kernel.lower(x).compile().ptoas()


@pytest.mark.parametrize("src, dst, vec", [((3, 1), (3, 3, 2), (8, 3, 24)), ((3, 1), (3, 3, 2), (4, 8, 8)),
                                           ((4, 1), (2, 4, 32), (2, 8, 32)), ((3, 1, 1), (3, 3, 8), (8, 3, 8))])
def test_a_column_broadcast_over_columns_and_groups_of_rows(src, dst, vec):
    """A column broadcast to more columns and repeated over a leading axis: ``trowexpand`` to the
    columns, then the rows in groups (it had no real form: "broadcasting [3, 1] to [9, 2]"); eager,
    jitted and ptoas alike."""
    def f(x):
        with pj.tile(vec=vec):
            return jnp.broadcast_to(x, dst) * 2.0

    x = np.arange(np.prod(src), dtype=np.float32).reshape(src) + 1
    kernel = pj.kernel(f)
    want = np.broadcast_to(x, dst) * 2
    np.testing.assert_array_equal(np.asarray(kernel(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), want)
    kernel.lower(x).compile().ptoas()


def test_empty_slices_and_concat_operands():
    """An empty slice computes nothing (its result an empty constant) and an empty concat operand is
    dropped: a slice past the last column fed a concat 'zero-size operand' error; an empty operand of
    other shape is still an error."""
    x = rand((2, 4, 64), F32, 5)
    f = lambda v: jnp.concatenate([v[..., :32], v[..., 64:], v[..., 32:]], axis=-1) * 2
    kernel = pj.kernel(f)
    np.testing.assert_array_equal(np.asarray(kernel(x)), x * 2)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), x * 2)
    assert pj.kernel(lambda v: v[..., 64:] * 2)(x).shape == (2, 4, 0)
    with _raises(pj.PtoShapeError, "concat", "differ outside axis 2"):
        OPS.concat([x, np.zeros((2, 3, 0), F32)], -1)


STRIDED = [((64, 64), (0, 0), (64, 64), (1, 2)), ((64, 64), (0, 1), (64, 64), (1, 2)),
           ((7, 13), (1, 2), (7, 12), (3, 4)), ((5, 17), (0, 16), (5, 17), (1, 5)),
           ((2, 9, 10), (0, 1, 3), (2, 8, 10), (1, 3, 7)), ((33,), (2,), (31,), (4,))]


@pytest.mark.parametrize("shape,start,limit,strides", STRIDED, ids=_id)
def test_strided_slice(shape, start, limit, strides):
    """``x[lo:hi:k]`` (the interleaved RoPE's ``x[..., 1::2]``): rows of ``k`` reshaped, a column taken."""
    x = rand(shape, F32, seed=9)
    out = assert_eager_matches_jit(pj.kernel(lambda v: jax.lax.slice(v, start, limit, strides) * 2.0), x)
    exact(out, x[tuple(slice(lo, hi, k) for lo, hi, k in zip(start, limit, strides))] * np.float32(2.0))
