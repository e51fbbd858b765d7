"""``pow`` and ``clip`` with operands of different shapes (``isel/composite.py``).

Their composite rules assumed every tile operand of the output's shape: a broadcasting ``pow`` ran
``tabs`` / ``tlog`` / ``tmul`` on the small tile (a run-time error), a tensor bound of ``clip`` made a
``tmax`` of mismatched tiles, and a constant base of an f16 / bf16 power took its result's shape from
the constant. The operands are now broadcast as the binary ops' are (``broadcast.operand``).

Each case runs eagerly and under ``jax.jit``, matches ``jax.jit`` of the plain function (bit for bit
for clip, within the per-dtype tolerance of the pow tests otherwise), and its PTO-AS is accepted by
``ptoas`` where the binary is present.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16, F16, F32, FLOATS, I8, I32, TOL, assert_eager_matches_jit, rand
from ptojax.ascend.ptoas import find_ptoas


def _assembles(kernel, args, archs=("a3", "a5")):
    """ptoas accepts the kernel's PTO-AS for ``archs`` (where the binary is present)."""
    if find_ptoas() or os.environ.get("CI") == "true":
        compiled = kernel.lower(*args).compile()
        for arch in archs:
            compiled.ptoas(arch)


def _check(fn, args, exact):
    """``pj.kernel(fn)`` eagerly == under ``jax.jit``, close to (``exact``: equal to) ``jax.jit(fn)``,
    and accepted by ptoas."""
    kernel = pj.kernel(fn)
    got = np.asarray(assert_eager_matches_jit(kernel, *args))
    want = np.asarray(jax.jit(fn)(*args))
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        rtol, atol = TOL[want.dtype]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    _assembles(kernel, args)


def _dtype_id(dtype):
    return np.dtype(dtype).name


# ---------------------------------------------------------------------------------------------- pow
POW_PAIRS = [((3, 7), (7,)), ((2, 3, 7), (3, 1)), ((1, 1000), (1, 1)), ((4, 1), (1, 9)),
             ((7,), (3, 7)), ((3, 1), (3, 7)), ((2, 1, 7), (2, 3, 7))]


def _pow_inputs(sx, sy, dtype):
    """Positive bases, moderate exponents: finite in f16 (as the elementwise pow tests)."""
    return rand(sx, dtype, 0, 0.5, 2.0), rand(sy, dtype, 1, -2.0, 2.0)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
@pytest.mark.parametrize("sx, sy", POW_PAIRS, ids=str)
def test_jnp_power_broadcasts(sx, sy, dtype):
    _check(jnp.power, _pow_inputs(sx, sy, dtype), exact=False)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
@pytest.mark.parametrize("sx, sy", POW_PAIRS[:4], ids=str)
def test_ops_pow_broadcasts(sx, sy, dtype):
    _check(lambda a, b: pj.ops.pow(a, b), _pow_inputs(sx, sy, dtype), exact=False)


def test_pow_of_negative_bases_broadcasts():
    """A negative base to an integral exponent (the sign), a non-integral one (NaN), and 0 ** y."""
    x = np.array([[-2.0], [-0.5], [0.0], [3.0]], F32)
    y = np.array([[-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 0.5, -1.5]], F32)
    _check(jnp.power, (x, y), exact=False)
    _check(jnp.power, (y.T, x.T), exact=False)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
@pytest.mark.parametrize("form", ["jnp", "ops"])
def test_constant_base_to_a_tensor(form, dtype):
    x = rand((3, 7), dtype, 0, -2.0, 2.0)
    fn = (lambda a: 3.0 ** a) if form == "jnp" else (lambda a: pj.ops.pow(3.0, a))
    _check(fn, (x,), exact=False)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
def test_negative_constant_base_to_a_tensor(dtype):
    """A negative constant base is a filled tile (of the widened exponent's shape for f16 / bf16)."""
    x = np.arange(-3, 4, dtype=np.float32).reshape(1, 7).repeat(3, 0).astype(dtype)
    _check(lambda a: pj.ops.pow(-2.0, a), (x,), exact=False)


@pytest.mark.parametrize("dtype", FLOATS, ids=_dtype_id)
@pytest.mark.parametrize("exponent", [2.5, 3.0])
def test_tensor_to_a_constant_exponent(exponent, dtype):
    x = rand((3, 7), dtype, 0, 0.5, 2.0)
    _check(lambda a: a ** exponent, (x,), exact=False)
    _check(lambda a: pj.ops.pow(a, exponent), (x,), exact=False)


# --------------------------------------------------------------------------------------------- clip
CLIP_DTYPES = (F32, F16, BF16, I32, I8)
# (x, lo, hi): a shape for a tensor bound, a number for a scalar one, None for an open side
CLIP_CASES = {
    "column-lo": ((3, 33), (3, 1), 1),
    "row-lo": ((3, 33), (33,), 1),
    "same-lo": ((3, 33), (3, 33), 1),
    "column-lo-open": ((3, 33), (3, 1), None),
    "column-hi": ((3, 33), -1, (3, 1)),
    "row-hi-open": ((3, 33), None, (1, 33)),
    "column-lo-row-hi": ((3, 33), (3, 1), (33,)),
    "grouped-lo": ((2, 3, 33), (2, 1, 33), None),
    "grouped-hi": ((2, 3, 33), -1, (2, 1, 33)),
    "column-lo-tiled": ((40, 700), (40, 1), 1),
    "x-broadcast": ((3, 1), (1, 33), (3, 33)),
}


def _a5_rejects(dtype, lo, hi) -> bool:
    """Scalar bounds A5 code gets wrong whatever the shapes (elementwise max / min as much as clip):
    an int8 tile's ``tmax`` / ``tmin`` with an int16 filled scalar (``vector.scalar_binary``), a bf16
    open side's infinity (made by ``texpands``, which on A5 takes no bf16 destination)."""
    scalars = [v for v in (lo, hi) if not isinstance(v, np.ndarray)]
    return (dtype == I8 and bool(scalars)) or (dtype == BF16 and None in scalars)


def _bound(spec, dtype, seed, low, high):
    if spec is None or isinstance(spec, int):
        return spec
    return rand(spec, dtype, seed, low, high) if np.dtype(dtype) in FLOATS else \
        np.random.default_rng(seed).integers(int(low * 10), int(high * 10) + 1, spec).astype(dtype)


@pytest.mark.parametrize("dtype", CLIP_DTYPES, ids=_dtype_id)
@pytest.mark.parametrize("case", list(CLIP_CASES))
def test_clip_tensor_bounds_broadcast(case, dtype):
    sx, lo, hi = CLIP_CASES[case]
    x = rand(sx, dtype, 0) if np.dtype(dtype) in FLOATS else rand(sx, dtype, 0).clip(-40, 40)
    lo, hi = _bound(lo, dtype, 1, -1.0, 0.0), _bound(hi, dtype, 2, 0.0, 1.0)
    tensors = [v for v in (lo, hi) if isinstance(v, np.ndarray)]

    def bounds(rest):
        rest = iter(rest)
        return [next(rest) if isinstance(v, np.ndarray) else v for v in (lo, hi)]

    def fn(a, *rest):
        return pj.ops.clip(a, *bounds(rest))

    def plain(a, *rest):
        low, high = bounds(rest)
        a = a if low is None else jnp.maximum(a, jnp.asarray(low, a.dtype))
        return a if high is None else jnp.minimum(a, jnp.asarray(high, a.dtype))

    kernel = pj.kernel(fn)
    got = np.asarray(assert_eager_matches_jit(kernel, x, *tensors))
    want = np.asarray(jax.jit(plain)(x, *tensors))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    _assembles(kernel, (x, *tensors), ("a3",) if _a5_rejects(dtype, lo, hi) else ("a3", "a5"))


def test_clip_keeps_the_repro_bounds():
    """The report's case: ``clip(x f32[3,33], lo f32[3,1], 1.0)`` as ``np.clip``."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (3, 33)).astype(F32)
    for lo in (rng.uniform(-1, 0, (3, 1)).astype(F32), rng.uniform(-1, 0, (33,)).astype(F32)):
        got = pj.kernel(lambda a, b: pj.ops.clip(a, b, 1.0))(x, lo)
        np.testing.assert_array_equal(np.asarray(got), np.clip(x, lo, 1.0))


@pytest.mark.parametrize("dtype", (F32, I32), ids=_dtype_id)
def test_clip_of_scalars_unchanged(dtype):
    x = rand((3, 33), dtype, 0)
    _check(lambda a: pj.ops.clip(a, -1, 2), (x,), exact=True)
    _check(lambda a: pj.ops.clip(a, None, 2), (x,), exact=True)
