"""jnp functions PTO has no single instruction for, inside kernels: sin / cos / tan, erfc (the exact GELU),
exp2 (``ptojax/lowering/libm.py``), remainders (``pto.fmod``), flips and tiles.

Expected values are float64 NumPy / ``math`` of the float32 operands rounded once, or XLA's result
where it is exact (remainders, flips, tiles): never ptojax's.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16, F16, F32, I8, I32
from ptojax.lowering.libm import TRIG_RANGE
from ptojax.lowering.tensor import _stacks

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 2.0 ** -13, 1.0, -1.0, np.pi / 2,
                    np.pi, -np.pi, 3 * np.pi / 2, 2 * np.pi, 1e4 * np.pi, TRIG_RANGE * 0.999], np.float32)


def _ulps(got, want, dtype=F32):
    """|got - want| in units of the spacing of ``dtype`` at ``want`` (``want`` rounded to ``dtype`` once)."""
    want = np.asarray(want, np.float64).astype(dtype).astype(np.float64)
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    return np.abs(np.asarray(got).astype(np.float64) - want) / np.maximum(spacing, 2.0 ** -149)


@pytest.mark.parametrize("name, bound", [("sin", 3), ("cos", 3), ("tan", 4)])
def test_trig_within_a_few_ulp_across_the_range(name, bound):
    """Random arguments at four scales up to TRIG_RANGE (2**18: RoPE angles at DeepSeek-V3.2's 160K
    positions), plus zeros (signed), infinities, NaN, subnormals and the floats nearest multiples of π/2
    (where the reduction cancels most)."""
    rng = np.random.default_rng(5)
    near = (rng.integers(1, int(TRIG_RANGE / 1.6), 3000) * (np.pi / 2)).astype(F32)
    x = np.concatenate([rng.uniform(-s, s, 4000) for s in (4.0, 1e3, 2.0 ** 18, TRIG_RANGE)]
                       + [SPECIAL, near, np.nextafter(near, np.float32(np.inf))]).astype(F32)
    got = np.asarray(pj.kernel(getattr(jnp, name))(x))
    with np.errstate(invalid="ignore"):
        want = getattr(np, name)(x.astype(np.float64))
    finite = np.isfinite(x)
    err = _ulps(got[finite], want[finite])
    assert err.max() <= bound, (x[finite][err.argmax()], err.max())
    assert np.isnan(got[~finite]).all()                                        # sin(±inf), sin(NaN)
    zeros = x == 0
    if name != "cos":
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(x[zeros]))   # sin(-0) = -0


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["float16", "bfloat16"])
def test_trig_in_half_precision_rounds_the_float32_value_once(dtype):
    x = np.random.default_rng(6).uniform(-60, 60, 3000).astype(dtype)
    for name in ("sin", "cos"):
        got = np.asarray(pj.kernel(getattr(jnp, name))(x))
        assert got.dtype == dtype
        err = _ulps(got, getattr(np, name)(x.astype(np.float64)), dtype)
        assert err.max() <= 1, (name, err.max())          # within the one rounding of the float32 result


def test_erfc_and_the_exact_gelu():
    """erfc within 8 ulp wherever the result is a normal float (also deep in the tail, where rounding
    x² would cost x² ulp), within 2 subnormal steps where it is subnormal; reflected for x < 0."""
    x = np.concatenate([np.linspace(-10.5, 10.5, 20001), np.random.default_rng(7).uniform(0.4, 9.2, 5000),
                        SPECIAL[:8]]).astype(F32)
    got = np.asarray(pj.kernel(jax.scipy.special.erfc)(x))
    want = np.array([math.erfc(v) if not np.isnan(v) else np.nan for v in x.astype(np.float64)])
    normal = np.abs(want) >= np.finfo(F32).tiny
    err = _ulps(got[normal], want[normal])
    assert err.max() <= 8, (x[normal][err.argmax()], err.max())
    tail = np.isfinite(want) & ~normal
    assert tail.any() and np.abs(got[tail] - want[tail]).max() <= 2 * 2.0 ** -149
    np.testing.assert_array_equal(got[np.isinf(x)], np.where(x[np.isinf(x)] > 0, 0.0, 2.0))
    assert np.isnan(got[np.isnan(x)]).all()

    y = np.linspace(-6, 6, 1001).astype(F32)
    gelu = np.asarray(pj.kernel(lambda v: jax.nn.gelu(v, approximate=False))(y))
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in y.astype(np.float64)])
    np.testing.assert_allclose(gelu, exact, rtol=3e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_the_gelu_op_erf_form_runs_as_the_exact_gelu(dtype):
    """``pj.ops.gelu(x, approximate=False)``: no instruction computes it (``tgelu`` is the tanh form), so
    it lowers to the exact GELU's sequence, in float32 rounded once; eager and jitted agree within an
    ulp; the text is real (ptoas)."""
    y = np.linspace(-9, 6, 1536).reshape(24, 64).astype(dtype)
    kernel = pj.kernel(lambda v: pj.ops.gelu(v, approximate=False))
    got = np.asarray(kernel(y))
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in y.astype(np.float64).ravel()]).reshape(y.shape)
    assert got.dtype == dtype and "tgelu" not in kernel.lower(y).as_text("pto")
    if dtype == F32:
        np.testing.assert_allclose(got, exact, rtol=3e-6, atol=1e-7)
    else:
        assert _ulps(got, exact, dtype).max() <= 1
    assert _ulps(np.asarray(jax.jit(kernel)(y)), got, dtype).max() <= 1
    kernel.lower(y).compile().ptoas()


def test_exp2_is_exp_of_x_ln2_as_xla_computes_it():
    x = np.concatenate([np.random.default_rng(8).uniform(-140, 127, 5000), [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                                            128.0, -150.0]]).astype(F32)
    got, want = np.asarray(pj.kernel(jnp.exp2)(x)), np.asarray(jax.jit(jnp.exp2)(x))
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(F32).tiny)
    assert _ulps(got[normal], want[normal]).max() <= 2          # the two libraries' exp of one product
    np.testing.assert_array_equal(got[~np.isfinite(want)], want[~np.isfinite(want)])
    exact = np.exp2(x[normal].astype(np.float64))
    assert np.all(np.abs(got[normal] - exact) <= (np.abs(x[normal]) * 2.0 ** -24 + 2.0 ** -22) * exact)


# ------------------------------------------------------------------------------------------ remainders
def test_fmod_op_is_c_fmod():
    """Floats: exact (float64 np.fmod of the operands); integers: C's truncated remainder, ``x`` where
    the divisor is 0 and 0 for INT_MIN by -1, as XLA's ``rem``; a Python scalar takes the dtype. Eager
    (the op's reference) and in a kernel (``pto.tfmod``'s semantics) alike."""
    for fmod in (pj.ops.fmod, pj.kernel(pj.ops.fmod)):
        _check_fmod(fmod)


def _check_fmod(fmod):
    rng = np.random.default_rng(9)
    x = (rng.normal(size=(6, 40)) * 100).astype(F32)
    y = (rng.normal(size=(6, 40)) * 3).astype(F32)
    x[0, :6], y[0, :6] = [5.5, -5.5, np.inf, 1.0, -0.0, 1e30], [2.0, 2.0, 2.0, 0.0, 1.0, 3.3]
    for dtype in (F32, F16, BF16):
        with np.errstate(over="ignore", invalid="ignore"):      # 1e30 is inf in float16
            a, b = x.astype(dtype), y.astype(dtype)
            got = np.asarray(fmod(a, b))
            want = np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(dtype)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))   # NaN and -0.0 bits too
    for dtype in (I8, I32):
        info = np.iinfo(dtype)
        a = np.array([7, -7, 7, -7, 5, info.min, info.min, info.max, 0], dtype)
        b = np.array([3, 3, -3, -3, 0, -1, 7, -2, 0], dtype)
        got = np.asarray(fmod(a, b))
        np.testing.assert_array_equal(got, np.asarray(jax.lax.rem(a, b)))
        np.testing.assert_array_equal(got[:4], [1, -1, 1, -1])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(pj.kernel(lambda v: pj.ops.fmod(v, 1.5))(x)),
                                      np.fmod(x, np.float32(1.5)))


def test_remainders_translate_in_kernels():
    """jnp.remainder / fmod / floor_divide / ``%`` (Python's floor remainder, built from ``rem``) in a
    kernel give XLA's bits, on floats and on int32 paged-cache positions."""
    rng = np.random.default_rng(10)
    x, y = (rng.normal(size=(8, 64)) * 50).astype(F32), rng.uniform(0.5, 4, (8, 64)).astype(F32)
    y[0] *= -1
    for fn in (jnp.remainder, jnp.fmod, jnp.floor_divide, lambda a, b: a % b - a // b):
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x, y)), np.asarray(jax.jit(fn)(x, y)))
    pos = rng.integers(-300, 70000, (4, 128)).astype(I32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda p: p % 128)(pos)), pos % 128)
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda p: p // 128)(pos)), pos // 128)


def test_integer_division_through_the_float_divide_is_exact():
    """lax.div of int32 / int8 (the A2/A3 vector unit divides floats only): XLA's bits over random
    operands of every magnitude, the edges (INT_MIN / -1 wraps, x / 0 is -1), and jnp's // and divmod."""
    rng = np.random.default_rng(21)
    info = np.iinfo(I32)
    edge = np.array([0, 1, -1, 2, -2, 7, -7, info.min, info.max, info.min + 1, info.max - 1, 2 ** 24, 2 ** 24 + 1,
                     -2 ** 24 - 1, 2 ** 30, -2 ** 30, 12345678, 999999937], np.int64)
    x = np.concatenate([rng.integers(info.min, info.max, 60000, dtype=np.int64), rng.integers(-1000, 1000, 20000),
                        rng.integers(info.min, info.max, 40000, dtype=np.int64), np.repeat(edge, edge.size)])
    y = np.concatenate([rng.integers(info.min, info.max, 60000, dtype=np.int64), rng.integers(-50, 50, 20000),
                        rng.integers(-300, 300, 40000), np.tile(edge, edge.size)])
    x, y = x.astype(I32), y.astype(I32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jax.lax.div)(x, y)), np.asarray(jax.jit(jax.lax.div)(x, y)))
    a, b = rng.integers(-128, 128, 5000).astype(I8), rng.integers(-128, 128, 5000).astype(I8)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jax.lax.div)(a, b)), np.asarray(jax.jit(jax.lax.div)(a, b)))
    b32 = np.where(y == 0, 3, y)
    for fn in (lambda u, v: u // v, lambda u, v: jnp.divmod(u, v)[1]):
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x, b32)), np.asarray(jax.jit(fn)(x, b32)))


# ------------------------------------------------------------------------------------------ layout
@pytest.mark.parametrize("fn", [lambda v: jnp.flip(v, -1), lambda v: jnp.flip(v, (0, 1)), jnp.flip,
                                lambda v: jnp.tile(v, (2, 1, 3)), lambda v: jnp.tile(v[0], 3),
                                lambda v: jnp.roll(v, 2, 1)],
                         ids=["flip-last", "flip-two", "flip-all", "tile-3d", "tile-promoted", "roll"])
@pytest.mark.parametrize("dtype", [F32, I8], ids=["float32", "int8"])
def test_flips_and_tiles(fn, dtype):
    x = np.arange(3 * 5 * 4).reshape(3, 5, 4).astype(dtype)
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.asarray(fn(x)))


# ------------------------------------------------------------------------------------------ bitwise
def _wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _bitwise_golden(name, a, b, bits):
    """Python integers: shifts by a count outside [0, bits) give 0 (left) or the sign (right), as XLA."""
    if name in ("shift_left", "shift_right") and not 0 <= b < bits:
        return -1 if name == "shift_right" and a < 0 else 0
    fn = {"bitwise_and": lambda: a & b, "bitwise_or": lambda: a | b, "bitwise_xor": lambda: a ^ b,
          "bitwise_not": lambda: ~a, "shift_left": lambda: a << b, "shift_right": lambda: a >> b}[name]
    return _wrap(fn(), bits)


@pytest.mark.parametrize("dtype", [I8, I32], ids=["int8", "int32"])
@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left",
                                  "shift_right"])
def test_bitwise_ops_against_python_integers(name, dtype):
    bits, info = 8 * np.dtype(dtype).itemsize, np.iinfo(dtype)
    rng = np.random.default_rng(11)
    a = np.concatenate([rng.integers(info.min, info.max, 200, dtype=np.int64), [info.min, info.max, -1, 0, 1] * 9])
    b = np.concatenate([rng.integers(info.min, info.max, 200, dtype=np.int64), np.resize(np.arange(-3, bits + 3), 45)])
    if name.startswith("shift"):
        b[:200] = rng.integers(0, bits, 200)
    a, b = a.astype(dtype), b.astype(dtype)
    want = np.array([_bitwise_golden(name, int(x), int(y), bits) for x, y in zip(a, b)], dtype)
    op = getattr(pj.ops, name)
    fn = (lambda x, y: op(x)) if name == "bitwise_not" else op
    for run in (fn, pj.kernel(fn)):                                   # the reference, pto.t<op>'s semantics
        np.testing.assert_array_equal(np.asarray(run(a, b)), want)


@pytest.mark.parametrize("dtype", [I8, I32], ids=["int8", "int32"])
def test_population_count_and_leading_zeros(dtype):
    info = np.iinfo(dtype)
    x = np.concatenate([np.random.default_rng(22).integers(info.min, info.max, 3000, dtype=np.int64),
                        [0, -1, 1, info.min, info.max]]).astype(dtype)
    for fn in (jax.lax.population_count, jax.lax.clz):
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.asarray(jax.jit(fn)(x)))
    bits = np.unpackbits(x.view(np.uint8)).reshape(x.size, -1).sum(1)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jax.lax.population_count)(x)), bits)


def test_int4_unpacking_and_logical_shifts_translate():
    """Two int4 weights per int8 (``(p << 4) >> 4`` sign-extends the low nibble, ``p >> 4`` the high one),
    ``&``, ``|``, ``^``, ``~`` and ``lax.shift_right_logical`` (also by a tensor of counts, 0 and past
    the width among them) give XLA's bits in a kernel."""
    rng = np.random.default_rng(12)
    packed = rng.integers(-128, 128, (16, 64)).astype(I8)
    unpack = lambda p: jnp.stack([(p << 4) >> 4, p >> 4], -1).reshape(16, 128)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(pj.kernel(unpack)(packed)), np.asarray(unpack(packed)))
    lo = (packed.astype(np.int32) << 28) >> 28
    np.testing.assert_array_equal(np.asarray(pj.kernel(unpack)(packed))[:, 0::2], lo)
    for dtype in (I8, I32):
        bits = 8 * np.dtype(dtype).itemsize
        x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (4, 64), dtype=np.int64).astype(dtype)
        n = rng.integers(-2, bits + 3, (4, 64)).astype(dtype)
        for fn in (jax.lax.shift_right_logical, lambda v, k: jax.lax.shift_right_logical(v, jnp.asarray(3, v.dtype)),
                   lambda v, k: (v & k) | (v ^ ~k)):
            np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x, n)), np.asarray(jax.jit(fn)(x, n)))


# ------------------------------------------------------------------------------------- scan over tensors
SCANS = {
    "prefix-sum": lambda x: jax.lax.scan(lambda c, r: (c + r, c), jnp.zeros(x.shape[1], x.dtype), x),
    "reverse": lambda x: jax.lax.scan(lambda c, r: (c * 0.5 + r, c), jnp.zeros(x.shape[1], x.dtype), x, reverse=True),
    "outputs-only": lambda x: jax.lax.scan(lambda c, _: (c * 2.0, c + 1.0), x[0], None, length=5),
    "pytree-xs-ys": lambda x: jax.lax.scan(lambda c, ab: (c + ab[0] * ab[1], (c, ab[0] - c)), x[0] * 0, (x, x[::-1])),
    "recurrence": lambda x: jax.lax.scan(lambda h, u: (jnp.tanh(h * 0.9 + u), jnp.sum(h)), jnp.zeros(x.shape[1]), x),
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scans_over_tensors_run_as_counted_loops(name):
    """``lax.scan`` with stacked inputs / outputs (forward, reversed, pytrees, outputs only) in a kernel:
    each step reads and writes one row; XLA's values (same float32 ops, same order)."""
    x = np.random.default_rng(13).normal(size=(12, 40)).astype(F32)
    got, want = pj.kernel(SCANS[name])(x), jax.jit(SCANS[name])(x)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)
    loops = [e for e in pj.lower(SCANS[name], x).level("tensor").jaxpr.eqns if e.primitive.name == "scan"]
    assert loops and not any(_stacks(e) for e in loops)          # carries only: what the runtime runs


def test_a_scan_over_no_rows_gives_its_initial_carry_and_empty_outputs():
    """xs of length 0: the step was traced on row 0 of an empty axis ('cannot select from the empty axis')."""
    fn = SCANS["prefix-sum"]
    x = np.zeros((0, 32), F32)
    want = jax.jit(fn)(x)
    for got in (pj.kernel(fn)(x), jax.jit(pj.kernel(fn))(x)):
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            assert g.shape == w.shape
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# ------------------------------------------------------------------------------- gathers and selects
POINT_GATHERS = {
    "x[i, j]": lambda x, i, j: x[i, j, :],
    "x[:, i, j]": lambda x, i, j: x[:, i % 8, j % 5],
    "x[i, :, j]": lambda x, i, j: x[i, :, j % 5],
    "diag": lambda x, i, j: jnp.diag(x[:5, :5, 0]),
    "clip": lambda x, i, j: x.at[i, j].get(mode="clip"),
    "fill": lambda x, i, j: x.at[i, j].get(mode="fill", fill_value=-5.0),
    "fill-nan": lambda x, i, j: x.at[i, j].get(mode="fill"),
    "x[i]": lambda x, i, j: x[i],
    "take": lambda x, i, j: jnp.take(x, j, axis=1),
}


@pytest.mark.parametrize("name", sorted(POINT_GATHERS))
def test_gathers_of_integer_array_indices_match_xla(name):
    """Several axes indexed by integer arrays (2-D index arrays too), and out-of-range indices: XLA clamps
    them (jnp indexing leaves them to it), ``mode="fill"`` reads the fill."""
    x = np.random.default_rng(14).normal(size=(6, 8, 5)).astype(F32)
    i = np.array([[1, 5, -1], [7, 20, -9]], np.int32)
    j = np.array([[2, 7, 3], [-9, 1, 0]], np.int32)
    fn = POINT_GATHERS[name]
    got, want = np.asarray(pj.kernel(fn)(x, i, j)), np.asarray(jax.jit(fn)(x, i, j))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_select_piecewise_and_integer_select_n():
    x = np.random.default_rng(15).normal(size=(16, 64)).astype(F32)
    which = np.resize(np.array([0, 1, 2, 5, -1, 3, 4], np.int32), (16, 64))     # out of range both ways
    fns = [lambda v: jnp.select([v < -1, v > 1], [v * 2, v * 3], v),
           lambda v: jnp.piecewise(v, [v < -1, (v >= -1) & (v < 1)], [lambda u: -u, 0.5, lambda u: u * 2]),
           lambda v: jax.lax.select_n(jnp.asarray(which), *[v * k for k in range(5)]),
           lambda v: jnp.argmax(v > 0.5, axis=-1)]
    for fn in fns:
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.asarray(jax.jit(fn)(x)))


# -------------------------------------------------------------------------------- cumulative ops
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("axis", [0, 1])
def test_cumulative_max_min_prod_and_logsumexp(axis, reverse):
    """cummax / cummin exactly (NaN propagates, int32 too), cumprod and cumlogsumexp within a few
    float32 roundings of float64's (a -inf row stays -inf, not NaN); fp16/bf16 in float32, rounded once."""
    rng = np.random.default_rng(16)
    x = rng.normal(size=(16, 37)).astype(F32)
    x[3, 5], x[4, :] = np.nan, -np.inf
    xi = rng.integers(-100, 100, (16, 37)).astype(I32)
    for op in (jax.lax.cummax, jax.lax.cummin):
        fn = lambda v, op=op: op(v, axis=axis, reverse=reverse)  # noqa: E731
        for arg in (x, xi):
            np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(arg)), np.asarray(jax.jit(fn)(arg)))
    prod = np.asarray(pj.kernel(lambda v: jax.lax.cumprod(v, axis=axis, reverse=reverse))(x * 0.1 + 1))
    want = np.cumprod(np.flip(x * 0.1 + 1, axis) if reverse else x * 0.1 + 1, axis=axis, dtype=np.float64)
    want = np.flip(want, axis) if reverse else want
    np.testing.assert_allclose(prod, want, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda v: jax.lax.cumprod(v, axis=axis))(xi % 3)),
                                  np.cumprod(xi % 3, axis=axis).astype(I32))
    for dtype, rtol in ((F32, 2e-6), (BF16, 2 ** -8)):
        v = x.astype(dtype)
        got = np.asarray(pj.kernel(lambda u: jax.lax.cumlogsumexp(u, axis=axis, reverse=reverse))(v))
        with np.errstate(invalid="ignore"):
            wide = v.astype(np.float64)
            want = np.logaddexp.accumulate(np.flip(wide, axis) if reverse else wide, axis=axis)
        want = np.flip(want, axis) if reverse else want
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=1e-6)


# ------------------------------------------------------------------------- inverse and hyperbolic
INVERSE = {  # jnp name: (float64 reference, ulp bound, argument ranges)
    "arctan": (np.arctan, 3, [(-5, 5), (-1e4, 1e4)]),
    "arcsin": (np.arcsin, 4, [(-1, 1), (0.3, 0.6)]),
    "arccos": (np.arccos, 4, [(-1, 1), (0.9098, 0.90981)]),       # 4 ulp at 0.9098007 (all of [0.5, 1] tried)
    "sinh": (np.sinh, 8, [(-3, 3), (-89, 89)]),
    "cosh": (np.cosh, 4, [(-3, 3), (-89, 89)]),
    "arcsinh": (np.arcsinh, 3, [(-5, 5), (-1e30, 1e30)]),
    "arccosh": (np.arccosh, 3, [(1, 5), (1, 1e30)]),
    "arctanh": (np.arctanh, 3, [(-1, 1)]),
    "cbrt": (np.cbrt, 1, [(-100, 100)]),
}
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 1.0, -1.0, 0.5, -0.5, 2.0, 1e30, -1e30,
                  88.0, 89.0, -89.0, 95.0, 1 + 2.0 ** -20], np.float32)


@pytest.mark.parametrize("name", sorted(INVERSE))
def test_inverse_and_hyperbolic_functions(name):
    """Within their ulp bounds of float64's wherever the float32 result is normal; infinities, NaN
    (outside the domain too), overflow and signed zeros as NumPy's."""
    ref, bound, ranges = INVERSE[name]
    rng = np.random.default_rng(17)
    tiny = 10.0 ** -rng.uniform(1, 20, 500)
    x = np.concatenate([rng.uniform(lo, hi, 100_000) for lo, hi in ranges] + [tiny, -tiny, EDGES]).astype(F32)
    got = np.asarray(pj.kernel(getattr(jnp, name))(x))
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
        rounded = want.astype(F32)
    normal = np.isfinite(rounded) & (np.abs(want) >= np.finfo(F32).tiny)
    err = _ulps(got[normal], want[normal])
    assert err.max() <= bound, (x[normal][err.argmax()], err.max())
    np.testing.assert_array_equal(got[~np.isfinite(rounded)], rounded[~np.isfinite(rounded)])
    zeros = (x == 0) & ~np.isnan(rounded)
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(rounded[zeros]))


def test_arctan2_quadrants_zeros_and_infinities():
    rng = np.random.default_rng(18)
    pairs = [(a, b) for a in EDGES[:9] for b in EDGES[:9]]
    y = np.concatenate([rng.normal(size=5000) * 10, [p[0] for p in pairs]]).astype(F32)
    x = np.concatenate([rng.normal(size=5000) * 10, [p[1] for p in pairs]]).astype(F32)
    got = np.asarray(pj.kernel(jnp.arctan2)(y, x))
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(F32).tiny)
    assert _ulps(got[normal], want[normal]).max() <= 3
    np.testing.assert_array_equal(got[~normal], want[~normal].astype(F32))        # ±0, ±π, NaN
    defined = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[defined]), np.signbit(want[defined]))


@pytest.mark.parametrize("name", ["fmod", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"])
def test_new_binary_ops_broadcast(name):
    """(2, 1, 3) with (4, 3) by NumPy's rules, eager (the reference) and in a kernel."""
    rng = np.random.default_rng(19)
    a = rng.integers(-100, 100, (2, 1, 3)).astype(I32)
    b = rng.integers(1, 7, (4, 3)).astype(I32)
    want = {"fmod": np.fmod, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
            "bitwise_xor": np.bitwise_xor, "shift_left": np.left_shift, "shift_right": np.right_shift}[name](a, b)
    op = getattr(pj.ops, name)
    for run in (op, pj.kernel(op)):
        np.testing.assert_array_equal(np.asarray(run(a, b)), want)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["float32", "float16", "bfloat16"])
def test_max_min_nan_from_either_operand_abs_of_minus_zero_and_exact_scalar_compares(dtype):
    """``tmax`` / ``tmin`` pass only their first operand's NaN, ``tabs(-0.0)`` is -0.0 and ``tcmps``'s EQ / NE
    are ``|x - s| < 1e-9``: the translations still give XLA's results, eagerly and under ``jax.jit``
    (operands of one shape, a row and a column broadcast, in both orders; a NaN scalar, which ``tmaxs``
    / ``tmins`` would drop)."""
    rng = np.random.default_rng(19)
    x, y = (rng.normal(size=(16, 40)).astype(dtype) for _ in range(2))
    x[1, 2], y[3, 4], x[5, 6], y[5, 6] = np.nan, np.nan, np.inf, -np.inf
    x[7, :8] = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-12, np.inf, -np.inf, 2.0 ** -20], np.float32).astype(dtype)
    row, col = y[:1].copy(), y[:, :1].copy()
    row[0, 9], col[10, 0] = np.nan, np.nan
    cases = [(op, a, b) for op in (jnp.maximum, jnp.minimum)
             for a, b in ((x, y), (y, x), (x, row), (row, x), (x, col), (col, x))]
    cases += [(lambda v: (jnp.abs(v), v == 0, v != 0, v == np.inf, v != -np.inf), x, None)]
    for fn, a, b in cases:
        args = (a,) if b is None else (a, b)
        want = jax.tree.leaves(fn(*args))
        for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
            for g, w in zip(jax.tree.leaves(run(*args)), want):
                g, w = (np.asarray(v).astype(F32 if v.dtype != np.bool_ else np.bool_) for v in (g, w))
                np.testing.assert_array_equal(g, w)          # (in float32: NumPy sees bfloat16 NaNs unequal)
            if b is None:                           # abs: +0.0 (max / min of ±0: either zero, as XLA's vary)
                np.testing.assert_array_equal(np.signbit(np.asarray(run(a)[0])), np.signbit(want[0]))
    for op in (jnp.maximum, jnp.minimum):                   # a constant scalar, NaN or not, on either side
        for fn in [functools.partial(lambda v, op, c, first: op(v, c) if first else op(c, v), op=op, c=c, first=first)
                   for c in (dtype.type(np.nan), dtype.type(0.5)) for first in (True, False)]:
            want = np.asarray(fn(x)).astype(F32)
            for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
                np.testing.assert_array_equal(np.asarray(run(x)).astype(F32), want)


def test_f16_activations_and_powers_compute_in_float32_and_round_once():
    """``tanh`` / ``sigmoid`` / ``silu`` / ``gelu`` / ``x ** y`` of f16 tiles: their instruction
    sequences run in float32 and round once (in f16 every step rounds: tanh(1e-3) came out 2 % off,
    25 ulp; sqrt(65504) as a power 5 ulp), within a few f16 ulp of float32's result, eagerly and under
    jax.jit alike."""
    x = (np.random.default_rng(0).normal(size=(8, 64)) * 3).astype(F16)
    x[0, :6] = [1e-3, -1e-3, 1e-4, 0.1, -8.0, 11.0]
    positive = np.abs(x) + 1
    positive[1, :3] = [65504, 3.0, 0.5]
    for fn, arg in ((pj.ops.tanh, x), (pj.ops.sigmoid, x), (pj.ops.silu, x), (pj.ops.gelu, x),
                    (lambda v: jnp.power(v, 0.5), positive), (lambda v: pj.ops.pow(v, v / 8), positive)):
        kernel = pj.kernel(fn)
        got = np.asarray(kernel(arg))
        want = np.asarray(fn(arg.astype(F32))).astype(F16)        # the float32 reference, rounded once
        finite = np.isfinite(want)
        assert _ulps(got[finite], want[finite], F16).max() <= 6, fn
        np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(arg)), got)


def test_tanh_within_two_ulp_down_to_tiny_arguments():
    """``tanh``: an odd polynomial below 0.625 and ``(1 - e) / (1 + e)`` past it, within 2 ulp of the exact
    value everywhere (``2 / (1 + exp(-2x)) - 1`` was 14 % off at 1e-4), -0 kept, ±1 at ±inf; f16 / bf16
    within one rounding of it; eager and jitted alike; the text is real (ptoas)."""
    x = np.concatenate([np.linspace(-12, 12, 12001), np.geomspace(1e-30, 1, 2000), -np.geomspace(1e-30, 1, 2000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 0.625, -0.625, 1e-45]]).astype(F32)
    x = np.pad(x, (0, -len(x) % 64), constant_values=1.0).reshape(-1, 64)
    kernel = pj.kernel(jnp.tanh)
    got = np.asarray(kernel(x))
    want = np.tanh(x.astype(np.float64))
    finite = np.isfinite(x)
    assert _ulps(got[finite], want[finite]).max() <= 2
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    np.testing.assert_array_equal(got[np.isinf(x)], np.sign(x[np.isinf(x)]))
    assert np.isnan(got[np.isnan(x)]).all()
    normal = np.abs(x) >= np.finfo(F32).tiny                      # (XLA:CPU flushes subnormals under jit)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x))[normal], got[normal])
    kernel.lower(x).compile().ptoas()
    for dtype in (F16, BF16):
        y = x.astype(dtype)
        half = np.asarray(pj.kernel(jnp.tanh)(y))
        exact = np.tanh(y.astype(np.float64))
        ok = np.isfinite(y)
        assert half.dtype == dtype and _ulps(half[ok], exact[ok], dtype).max() <= 1


@pytest.mark.parametrize("op", [jnp.logical_and, jnp.logical_or])
def test_logical_and_or_of_constants_and_broadcast_predicates(op):
    """A constant operand (``x & True`` is x, ``x & False`` all false) and predicates of two shapes (a
    row against a matrix, a scalar against a matrix): as XLA, eagerly and under jax.jit; ptoas accepts
    the text. ``jnp.arctan2`` by a scalar and ``jnp.hypot`` reach these."""
    rng = np.random.default_rng(21)
    x, y = rng.normal(size=(16, 64)).astype(F32), rng.normal(size=(16, 64)).astype(F32)
    cases = [lambda a, b: op(a > 0, True), lambda a, b: op(a > 0, False), lambda a, b: op(True, b < 0),
             lambda a, b: op(a > 0, (b > 0)[:1]), lambda a, b: op((a > 0)[:, :1], b < 0.5),
             lambda a, b: op(a.sum() > 0, b > 0)]
    for fn in cases:
        f = lambda a, b, fn=fn: fn(a, b).astype(F32)              # noqa: E731
        want = np.asarray(jax.jit(f)(x, y))
        kernel = pj.kernel(f)
        np.testing.assert_array_equal(np.asarray(kernel(x, y)), want)
        np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x, y)), want)
        kernel.lower(x, y).compile().ptoas()
    for fn in (lambda a, b: jnp.arctan2(a, 2.0), lambda a, b: jnp.arctan2(-3.0, b), jnp.hypot):
        got, want = np.asarray(pj.kernel(fn)(x, y)), np.asarray(jax.jit(fn)(x, y))
        np.testing.assert_allclose(got, want, rtol=4e-7)


POW_BASES = np.array([-2.0, -0.5, 0.0, -0.0, 3.0, -3.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-3, 7.5, -7.5,
                      2.5, 0.3, 1e20, -1e20], F32)


def _pow_matches_xla(got, want):
    """NaN where XLA's pow is NaN, its infinities and signed zeros, and within ``(|y log x| + 2)`` ulp
    elsewhere (exp(y log x) in float32 loses an ulp per unit of its exponent to rounding it)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        got = np.where(np.abs(got) < np.finfo(F32).tiny, got * 0, got)       # XLA:CPU flushes subnormals
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    special = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special])
    np.testing.assert_array_equal(np.signbit(got[special]), np.signbit(want[special]))
    finite = np.isfinite(want) & ~special
    return np.where(finite, got, 0.0), np.where(finite, want, 1.0), finite


@pytest.mark.parametrize("p", [2.0, 3.0, -1.0, -2.0, 0.0, 1.0, 0.5, -0.5, 17.0, -17.0, 18.0, 2.5, -1.5, 1 / 3])
def test_pow_by_a_constant_is_cs_pow(p):
    """``x ** p`` for a constant p: negative bases to integral powers signed (they were NaN: exp(p log x)),
    NaN for non-integral ones, C's zeros, infinities and ``x ** 0 = 1``; integral powers up to 16 are
    products (``x ** 2.0`` is XLA's ``x * x``), 0.5 a square root; eager and jitted alike; ptoas accepts."""
    x = np.tile(POW_BASES, 4)[:64].reshape(1, 64)
    kernel = pj.kernel(lambda v: v ** p)
    eager = np.asarray(kernel(x))
    got, want, finite = _pow_matches_xla(eager, jax.jit(lambda v: v ** p)(x))
    with np.errstate(all="ignore"):
        exponent = np.nan_to_num(np.abs(p * np.log(np.abs(x.astype(np.float64)))), nan=0.0)
        ulp = np.spacing(np.abs(want).astype(F32)).astype(np.float64)
    assert np.all((np.abs(got - want) <= (exponent + 2) * ulp)[finite])
    if p == int(p) and abs(p) <= 16:
        assert np.all((np.abs(got - want) <= 2 * ulp)[finite])
    normal = np.abs(x) >= 1e-3
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x))[normal], eager[normal])
    kernel.lower(x).compile().ptoas()


def test_pow_of_tiles_and_of_a_constant_base():
    """``x ** y`` elementwise over every pair of special and ordinary values (C's pow: the sign of odd
    integral powers, -0, ±inf, ``1 ** nan = 1``, ``nan ** 0 = 1``); ``c ** y`` for a constant base (RoPE's
    ``10000 ** (i / d)``) within 2 ulp (``log c`` to 48 bits), where ``exp(y log c)`` was 28 ulp off."""
    ys = np.array([2.0, 3.0, -1.0, -3.0, 0.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1.0, 2.5, -2.0, 17.0, 1e10, -1e10], F32)
    x, y = np.repeat(POW_BASES, len(ys)).reshape(-1, 32), np.tile(ys, len(POW_BASES)).reshape(-1, 32)
    f = lambda a, b: a ** b                                                # noqa: E731
    got, want, finite = _pow_matches_xla(pj.kernel(f)(x, y), jax.jit(f)(x, y))
    with np.errstate(all="ignore"):
        exponent = np.nan_to_num(np.abs(y * np.log(np.abs(x.astype(np.float64)))), nan=0.0)
        ulp = np.spacing(np.abs(want).astype(F32)).astype(np.float64)
    assert np.all((np.abs(got - want) <= (exponent + 2) * ulp)[finite])
    pj.kernel(f).lower(x, y).compile().ptoas()

    e = np.concatenate([np.random.default_rng(30).uniform(-40, 40, 4000), np.arange(64) / 64,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30]]).astype(F32)
    for c in (10000.0, 2.0, 0.5, 1.0, 1.5):
        g = lambda v, c=c: c ** v                                          # noqa: E731
        got, want, finite = _pow_matches_xla(pj.kernel(g)(e), jax.jit(g)(e))
        with np.errstate(over="ignore"):
            exact = np.power(np.float64(c), e.astype(np.float64))
        normal = finite & (np.abs(want) >= np.finfo(F32).tiny)
        assert _ulps(got[normal], exact[normal]).max() <= 2, c
