"""``x.at[...]`` updates jnp writes as a scatter at constant starts or on several axes, and a float base
to an integer exponent (``ptojax/lowering/gathers.py``, ``tensor.py``).

A static slice (``x.at[8:12]``, ``x.at[2:4, 4:8]``, ``x.at[3, 2:4]``) is one window: an assemble (set) or
the window plus the updates assembled back (add); integer indices on several axes (``x.at[i, j]``) one
scatter into the merged rows. Expected values are ``jax.jit`` of the plain function, eager and under
``jax.jit``: bit for bit for the data movement, within a tolerance for ``pow``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from helpers import BF16, F16, F32, I8, I32, rand

_FILL = lax.GatherScatterMode.FILL_OR_DROP


def _check(fn, *args, rtol=0.0):
    """``pj.kernel(fn)``, eager and jitted, equals ``jax.jit(fn)`` (bit for bit where ``rtol`` is 0)."""
    want = np.asarray(jax.jit(fn)(*args))
    kernel = pj.kernel(fn)
    for got in (kernel(*args), jax.jit(kernel)(*args)):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        if rtol:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)
        else:
            np.testing.assert_array_equal(got, want)


_WINDOWS = {
    "set rows": (lambda x, v: x.at[8:12].set(v), (4, 32)),
    "add rows": (lambda x, v: x.at[8:12].add(v), (4, 32)),
    "set last rows": (lambda x, v: x.at[-4:].set(v), (4, 32)),
    "set a scalar into rows": (lambda x, v: x.at[8:12].set(2), None),
    "set columns": (lambda x, v: x.at[:, 4:8].set(v), (16, 4)),
    "add columns": (lambda x, v: x.at[:, 4:8].add(v), (16, 4)),
    "set a block to 0": (lambda x, v: x.at[2:4, 4:8].set(0), None),
    "add a block": (lambda x, v: x.at[2:4, 4:8].add(v), (2, 4)),
    "set a row's part": (lambda x, v: x.at[3, 2:6].set(v), (4,)),
    "strided set": (lambda x, v: x.at[::2].set(v), (8, 32)),
    "strided add": (lambda x, v: x.at[1::4].add(v), (4, 32)),
}


@pytest.mark.parametrize("dtype", [F32, F16, I32])
@pytest.mark.parametrize("case", list(_WINDOWS))
def test_static_slice_update(case, dtype):
    """``x.at[static slices].set / add``: one window at constant starts (strided: rows)."""
    fn, shape = _WINDOWS[case]
    v = rand(shape, dtype, seed=1) if shape else np.zeros((), dtype)
    _check(fn, rand((16, 32), dtype), v)


def test_static_slice_update_of_a_batched_table():
    """``jax.vmap`` of ``x.at[8:12].set(v)`` over the table and the update: one window of the batch."""
    fn = jax.vmap(lambda x, v: x.at[8:12].set(v))
    _check(fn, rand((3, 16, 32), F32), rand((3, 4, 32), F32, seed=1))


@pytest.mark.parametrize("start,mode", [(12, _FILL), (13, _FILL), (-1, _FILL), (13, lax.GatherScatterMode.CLIP)])
@pytest.mark.parametrize("add", [False, True])
def test_window_scatter_out_of_range(start, mode, add):
    """``lax.scatter`` of one window at a constant start: XLA drops a window not wholly inside
    (FILL_OR_DROP) or clamps its start (CLIP)."""
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(0, 1), inserted_window_dims=(),
                                        scatter_dims_to_operand_dims=(0,))
    scatter = lax.scatter_add if add else lax.scatter

    def fn(x, v):
        return scatter(x, np.array([start], np.int32), v, dnums, mode=mode)

    _check(fn, rand((16, 32), F32), rand((4, 32), F32, seed=1))


def test_window_scatter_at_a_run_time_start_in_drop_mode_names_what_is_not_translated():
    """A window at a start known at run time whose write XLA drops when out of range stays unsupported:
    the error says so and suggests lax.dynamic_update_slice / pj.ops.assemble."""
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(0, 1), inserted_window_dims=(),
                                        scatter_dims_to_operand_dims=(0,))

    def fn(x, v, i):
        return lax.scatter(x, jnp.reshape(i, (1,)), v, dnums, mode=_FILL)

    with pytest.raises(pj.PtoUnsupportedError) as err:
        pj.kernel(fn)(rand((16, 32), F32), rand((4, 32), F32), np.int32(3))
    text = str(err.value)
    assert "start known only at run time" in text and "window of shape (4, 32)" in text
    assert "lax.dynamic_update_slice" in text and "pj.ops.assemble" in text
    assert "test_scatter_windows.py" in text


_POINTS = {
    "set one element": (lambda x, v, i, j: x.at[3, 5].set(v[0]), (16, 32)),
    "set elements": (lambda x, v, i, j: x.at[i, j].set(v), (16, 32)),
    "add elements": (lambda x, v, i, j: x.at[i, j].add(v), (16, 32)),
    "set elements, clipped": (lambda x, v, i, j: x.at[i, j].set(v, mode="clip"), (16, 32)),
    "set rows of a 3-d table": (lambda x, v, i, j: x.at[i, j].set(jnp.stack([v] * 8, 1)), (16, 32, 8)),
    "set columns of a 3-d table": (lambda x, v, i, j: x.at[:, i, j].set(jnp.stack([v] * 4)), (4, 16, 32)),
    "add around an axis": (lambda x, v, i, j: x.at[i, :, j].add(jnp.stack([v] * 8, 1)), (16, 8, 32)),
}


@pytest.mark.parametrize("dtype", [F32, F16, I32])
@pytest.mark.parametrize("case", list(_POINTS))
def test_point_scatter(case, dtype):
    """``x.at[i, j].set / add`` with integer indices on several axes: distinct in-range, negative (from
    the end) and out-of-range index pairs (dropped, or clamped with mode="clip"); adds accumulate."""
    fn, shape = _POINTS[case]
    i = np.array([1, -2, 40, 5, 0, 7], np.int32)
    j = np.array([3, 31, 2, -40, 0, 9], np.int32)
    if "add" in case:
        i[4:], j[4:] = 1, 3                          # repeats of the first pair accumulate
    _check(fn, rand(shape, dtype), rand((6,), dtype, seed=1), i, j)


def test_point_scatter_at_scalar_indices_known_at_run_time():
    """``x.at[i, j].set / add`` with traced scalars: one element, dropped when out of range."""
    def fn(x, v, i, j):
        return x.at[i, j].set(v[0]).at[j, i].add(v[1])

    for i, j in ((3, 5), (-1, 7), (16, 2)):
        _check(fn, rand((16, 32), F32), rand((2,), F32, seed=1), np.int32(i), np.int32(j))


@pytest.mark.parametrize("i", [3, -1, 15])
def test_clipped_window_at_a_start_known_at_run_time(i):
    """``x.at[i, 2:6].set(v, mode="clip")``: a window clamped as lax.dynamic_update_slice clamps it."""
    _check(lambda x, v, i: x.at[i, 2:6].set(v, mode="clip"), rand((16, 32), I32), rand((4,), I32, seed=1), np.int32(i))


def test_window_at_a_run_time_start_dropped_when_out_of_range_is_refused():
    """``x.at[i, 2:6].set(v)`` with a traced ``i`` (FILL_OR_DROP): the error says which scatter and why."""
    with pytest.raises(pj.PtoUnsupportedError) as err:
        pj.kernel(lambda x, v, i: x.at[i, 2:6].set(v))(rand((16, 32), F32), rand((4,), F32), np.int32(3))
    text = str(err.value)
    assert "index vectors of shape () on axes (0, 1), each writing a window of shape (1, 4)" in text
    assert "start known only at run time" in text and "lax.dynamic_update_slice clamps it instead" in text


# ---------------------------------------------------------------------------------- float ** integer
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_float_base_to_an_integer_exponent_array(dtype):
    """``x ** jnp.arange(n)`` (``lax.pow(float, int32)``): the exponent converted to the base's dtype, as
    XLA lowers it; negative bases keep the sign of odd powers."""
    x = np.linspace(-1.5, 1.5, 8 * 16, dtype=np.float32).reshape(8, 16).astype(dtype)
    _check(lambda x: x ** jnp.arange(16), x, rtol={F32: 1e-5}.get(dtype, 1e-2))


def test_float16_base_to_an_int8_exponent():
    """``a16 ** (i8 % 4)`` and negative int8 exponents."""
    a16 = rand((16, 32), F16, low=-2, high=2)
    i8 = rand((16, 32), I8, seed=1)
    _check(lambda a, i: a ** (i % 4), a16, i8, rtol=1e-2)
    _check(lambda a, i: a ** (i % 5 - 2), rand((16, 32), F32, low=0.5, high=2), i8, rtol=1e-5)


def test_constant_base_to_an_integer_exponent():
    """``2.0 ** n`` with an int32 array ``n``."""
    _check(lambda n: 2.0 ** n, np.arange(-8, 24, dtype=np.int32).reshape(1, 32) % 20 - 4, rtol=1e-6)


def test_float_base_to_a_constant_integer_exponent():
    """``x ** np.arange(n)`` (a constant int32 exponent) as the same float pow."""
    _check(lambda x: x ** (np.arange(32, dtype=np.int32) % 7), rand((8, 32), F32, low=0.5, high=1.5), rtol=1e-5)
