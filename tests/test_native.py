"""Native code (ptojax/ascend/nativecode.py) computes host code's bits: conversions, sums, products,
whole kernels, errors, promotion."""
import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fuzz
import ptojax as pj
from helpers import BF16, F16, rand, same_bits
from ptojax.ascend import asm, halfbits, hostcode, nativecode
from ptojax.ascend.hostcode import host_kernel
from ptojax.ascend.interpreter import Core, PtoExecutionError
from ptojax.execute import execute
from kernels import KERNELS, seed_kernel, seed_program, short_view


@numba.njit
def _loop(convert, x, out):
    for i in range(x.size):
        out[i] = convert(x[i])


_CONVERSIONS = {"f16 in integers": (np.float16, halfbits.widen_f16_bits, halfbits.narrow_f16_bits),
                "bf16": (ml_dtypes.bfloat16, halfbits.widen_bf16, halfbits.narrow_bf16)}
if halfbits.widen_f16 is halfbits.widen_f16_cpu:        # the CPU's conversions, where native code uses them
    _CONVERSIONS["f16 on the CPU"] = (np.float16, halfbits.widen_f16_cpu, halfbits.narrow_f16_cpu)


@pytest.mark.parametrize("case", list(_CONVERSIONS))
def test_half_conversions_are_numpys_and_ml_dtypes_bits(case):
    """Widening every float16 / bfloat16 value; rounding float32 values at and around every rounding
    boundary (each value and each midpoint, +-3 ulp), NaNs with every payload shape, and random bits."""
    dtype, widen, narrow = _CONVERSIONS[case]
    dtype = np.dtype(dtype)
    bits = np.arange(1 << 16, dtype=np.uint16)
    wide = np.empty(bits.size, np.float32)
    _loop(widen, bits, wide)
    np.testing.assert_array_equal(wide.view(np.uint32), bits.view(dtype).astype(np.float32).view(np.uint32))
    exact = wide.view(np.uint32).astype(np.int64)
    near = np.arange(-3, 4)
    candidates = np.concatenate([(exact[:, None] + near).ravel(), (((exact[:-1] + exact[1:]) // 2)[:, None] + near).ravel(),
                                 np.random.default_rng(0).integers(0, 1 << 32, 1 << 21)])
    values = (candidates % (1 << 32)).astype(np.uint32).view(np.float32)
    rounded = np.empty(values.size, np.uint16)
    _loop(narrow, values, rounded)
    with np.errstate(all="ignore"):
        want = values.astype(dtype).view(np.uint16)
    np.testing.assert_array_equal(rounded, want)


def test_pairwise_sum_is_numpys_row_sum():
    rng = np.random.default_rng(1)
    for n in [*range(1, 140), 255, 256, 257, 1000, 1024, 4099, 8192, 65537]:
        x = (rng.standard_normal((4, n)) * 10.0 ** rng.integers(-4, 5, (4, n))).astype(np.float32)
        x[0] = -0.0 if n < 20 else x[0]                         # signed zeros: NumPy starts from +0
        want = np.add.reduce(x, axis=(1,), dtype=np.float32)
        got = np.array([np.float32(0.0) + nativecode.pairwise_sum(row, 0, n) for row in x], np.float32)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"n={n}")


@pytest.mark.skipif(nativecode._sgemm() is None, reason="NumPy's BLAS is not the wheels' scipy-openblas64")
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_native_gemm_is_numpys_matmul(ta, tb):
    """The product native code makes through NumPy's cblas_sgemm equals ``np.matmul`` of the same
    (transposed) float32 copies, bit for bit, at shapes across BLAS's kernel blockings."""
    rng = np.random.default_rng(2)
    for m, n, k in [(2, 2, 1), (64, 32, 64), (16, 256, 128), (128, 128, 512), (33, 17, 300), (8, 512, 1024)]:
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        want = np.matmul(a.T if ta else a, b.T if tb else b)
        got = np.empty((m, n), np.float32)
        nativecode._sgemm()(101, 112 if ta else 111, 112 if tb else 111, m, n, k, 1.0, a.ctypes.data, a.shape[1],
                            b.ctypes.data, b.shape[1], 0.0, got.ctypes.data, n)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{m}x{n}x{k}")


def _native_and_host(fn, args):
    """The kernel's outputs with every program that native code takes promoted, its outputs on host
    code alone, and the promoted programs."""
    host = pj.kernel(fn).compiled_for(*args)._code()
    native = pj.kernel(fn).compiled_for(*args)._code()
    promoted = [key[0] for key in native.kernels if native.host(key) is not None and native.host(key).promote()]
    want, _ = execute(host.lowering, *args, compiled=host)
    got, _ = execute(native.lowering, *args, compiled=native)
    return got, want, promoted


def test_the_seed_kernel_runs_natively_with_host_codes_bits():
    args = rand((64, 64), F16, 1), rand((64, 64), F16, 2), rand((64, 32), F16, 3)
    got, want, promoted = _native_and_host(seed_kernel, args)
    assert sorted(promoted) == ["matmul", "mul+add", "sum"]
    same_bits(got, want)


def _mixed(x, y, w, b):
    """Every instruction native code takes: float16 / bfloat16 / float32 arithmetic with broadcasting
    and scalars, casts, row sums, transposed and K-chained products (rows in one tile: a row loop
    has no native form)."""
    with pj.tile(vec=(16, 128)):
        h = jnp.sqrt(jnp.abs(x * 0.5 - y / 3.0)) + (-x)
        s = jnp.sum(h.astype(jnp.float32), axis=-1, keepdims=True)
        z = (h.astype(jnp.bfloat16) * b).astype(jnp.float32) - s
    with pj.tile(cube=(16, 64, 32)):
        m = pj.ops.matmul(x, w)
        t = pj.ops.matmul(y, w, transpose_a=True, transpose_b=True, out_dtype=jnp.float16)
    return z, m, t


def test_elementwise_casts_sums_and_products_run_natively_with_host_codes_bits():
    args = (rand((64, 128), F16, 4), rand((64, 128), F16, 5), rand((128, 64), F16, 6), rand((1, 128), BF16, 7))
    got, want, promoted = _native_and_host(_mixed, args)
    assert len(promoted) >= 3, promoted
    same_bits(got, want)


def _compares_integers_reciprocals(x, y, i, j):
    """Comparisons, int32 arithmetic (wrapping), reciprocals and broadcasts (texpand)."""
    with pj.tile(vec=(16, 64)):
        r = jax.lax.rsqrt(jnp.abs(x) + 1.0) + 1.0 / (y + 2.0)
        c = x < y
        k = jnp.maximum(i, j) * 70000 - jnp.abs(j) + (-i)
        e = jnp.broadcast_to(x[:, :1], x.shape) * 2.0
    return r, c, k, e


def test_comparisons_integers_and_reciprocals_run_natively_with_host_codes_bits():
    ints = np.random.default_rng(9).integers(-2**31, 2**31, (2, 64, 128), dtype=np.int64).astype(np.int32)
    ints[0, 0, :4] = [-2**31, 2**31 - 1, 0, -1]
    args = (rand((64, 128), np.float32, 10), rand((64, 128), np.float32, 11), ints[0], ints[1])
    got, want, promoted = _native_and_host(_compares_integers_reciprocals, args)
    assert len(promoted) >= 3, promoted
    same_bits(got, want)


def _special_arithmetic(x, y):
    with pj.tile(vec=(16, 64)):
        return (x / y, x * y - y, jnp.sqrt(x), jax.lax.rsqrt(y), 1.0 / x, x.astype(jnp.bfloat16),
                x.astype(jnp.float16), jnp.sum(x * y, axis=-1), x > y, x == y)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def test_special_values_natively(dtype):
    """Zeros of both signs, infinities, NaNs, subnormals (of the dtype and of float32), overflow: IEEE
    division by zero and the rest as host code computes them."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 6e-8, 65504.0, 70000.0, 3e38,
                         -1.0, 1.0, 0.5, 1.5, -2.5], np.float32)
    rng = np.random.default_rng(12)
    with np.errstate(over="ignore"):                     # 70000 and 3e38 are infinities in float16
        x, y = (rng.choice(specials, (64, 128)).astype(dtype) for _ in range(2))
    got, want, promoted = _native_and_host(_special_arithmetic, (x, y))
    assert promoted
    same_bits(got, want)


_SLOW_TO_COMPILE = {"matmul-fp16-out", "matmul-batched", "mlp-block", "layout", "elementwise-tails"}  # 15-23 s each


@pytest.mark.parametrize("name,kernel,args", [pytest.param(*k, marks=[pytest.mark.slow] if k[0] in _SLOW_TO_COMPILE
                                                           else []) for k in KERNELS], ids=[k[0] for k in KERNELS])
def test_test_kernels_natively(name, kernel, args):
    got, want, _ = _native_and_host(kernel, args)
    same_bits(got, want)


def _random_kernel_natively(spec):
    fn, args = fuzz.build(spec)
    got, want, _ = _native_and_host(fn, args)
    same_bits(got, want)


_FUZZ = dict(derandomize=True, deadline=None, database=None, print_blob=True,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_random_kernels_natively = settings(max_examples=12, **_FUZZ)(given(fuzz.kernels(max_ops=6))(_random_kernel_natively))
test_many_random_kernels_natively = pytest.mark.slow(
    settings(max_examples=150, **_FUZZ)(given(fuzz.kernels(max_ops=8))(_random_kernel_natively)))


@pytest.mark.parametrize("edit,index,arrays", [
    (lambda s: s, (2, 0), ((64, 32), (64,))),
    (short_view, (0, 0), ((64, 32), (64,))),
    (lambda s: s, (0, 0), ((64, 16), (64,))),
    (lambda s: s, (0, 0), ((64, 32), (32,))),
], ids=["window", "view", "argument", "output"])
def test_native_code_raises_host_codes_errors(edit, index, arrays):
    """A check that fails in native code (or an argument it cannot take) reruns the call as host code,
    which raises the interpreter's error."""
    kernel, memory = seed_program(("sum", (2, 1)), edit)
    host, promoted = host_kernel(kernel, memory), host_kernel(kernel, memory)
    assert promoted.promote()
    messages = []
    for k in (host, promoted):
        gm = [np.zeros(shape, np.float32) for shape in arrays]
        with pytest.raises(PtoExecutionError) as err:
            k(Core(memory), [index], gm)
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_host_code_is_promoted_after_its_calls(monkeypatch):
    monkeypatch.setattr(hostcode, "NATIVE_AFTER", 3)
    args = rand((64, 64), F16, 1), rand((64, 64), F16, 2), rand((64, 32), F16, 3)
    kernel = pj.kernel(seed_kernel)
    want = np.asarray(pj.kernel(seed_kernel, backend="xla")(*args))
    code = kernel.compiled_for(*args)._code()
    hosts = [code.host(key) for key in code.kernels]
    for call in range(4):
        assert all(bool(h.native) == (call >= 3) for h in hosts), call
        got = np.asarray(kernel(*args))
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_kernels_native_code_cannot_take_keep_host_code():
    """An instruction without a native form (an exponential) leaves the kernel on host code."""
    kernel, memory = seed_program(("mul+add", (2, 2)), lambda s: dataclasses.replace(s, op="texp", ins=s.ins[:1])
                                  if isinstance(s, asm.Instr) and s.op == "tadd" else s)
    host = host_kernel(kernel, memory)
    assert host is not None and nativecode.native_kernel(host) is None
    assert host.promote() is False


def test_native_code_that_does_not_compile_for_its_arguments_gives_way_to_host_code():
    kernel, memory = seed_program(("sum", (2, 1)), lambda s: s)
    host, promoted = host_kernel(kernel, memory), host_kernel(kernel, memory)
    assert promoted.promote()

    def fails(*args):
        raise numba.core.errors.TypingError("no such specialisation")

    promoted.native.fn = fails
    x = rand((64, 32), np.float32, 8)
    outs = [np.zeros(64, np.float32), np.zeros(64, np.float32)]
    for k, out in zip((host, promoted), outs):
        for index in ((0, 0), (1, 0)):
            k(Core(memory), [index], [x, out])
    np.testing.assert_array_equal(outs[1], outs[0])
    assert promoted.native is False and "no such specialisation" in str(promoted.native_error)
