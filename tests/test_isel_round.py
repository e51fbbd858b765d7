"""Selection of ``round`` (``tround``, ties to even; ``ptojax/ascend/isel/composite.py``): the real text,
accepted by ``ptoas`` (A3 and A5, level2 and level3, when the binary is present), run by the real-text
engine (``Compiled.run()``) and, for f32 / f16, by pto-isa's CPU simulator, equals
``np.rint`` bit for bit: ties, signed zeros (``round(-0.3)`` is ``-0.0``), values past 2**23 and past
int32, infinities and NaN."""
import jax
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from helpers import same_bits
from ptojax.ascend import crosscheck as xc
from ptojax.ascend.ptoas import find_ptoas

BF16 = ml_dtypes.bfloat16


def edge_values(dtype) -> np.ndarray:
    """Ties, near-ties, signed zeros, the smallest normal, the largest finite, the edges of exact
    integers (2**23 for f32) and of int32, infinities and NaN, in ``dtype``."""
    info = ml_dtypes.finfo(dtype)
    values = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -124.5, 1023.5, 1024.5, 0.49, -0.49, 0.51, -0.51,
              1e-3, -1e-3, float(info.tiny), -float(info.tiny), float(info.max), -float(info.max),
              2.0 ** 22 + 0.5, 2.0 ** 23 - 0.5, -(2.0 ** 23 - 0.5), 2.0 ** 23 + 2, 3e9, -3e9, np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):
        return np.array(values, np.float64).astype(dtype)


def kernel(vec):
    def fn(x):
        if vec is None:
            return pj.ops.round(x)
        with pj.tile(vec=vec):
            return pj.ops.round(x)
    return fn


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,vec", [((40,), (64,)), ((4, 16), (2, 32)), ((31, 1), None)],
                         ids=["row", "rows", "column"])
def test_real_text_rounds_half_to_even_bit_for_bit(dtype, shape, vec):
    rng = np.random.default_rng(3)
    x = (rng.integers(-2000, 2000, int(np.prod(shape))) / 4).astype(dtype)     # many ties
    edges = edge_values(dtype)
    x[:edges.size] = edges[:x.size]
    x = rng.permutation(x).reshape(shape)
    fn = kernel(vec)
    compiled = pj.kernel(fn).lower(x).compile()
    if find_ptoas():
        for arch in ("a3", "a5"):
            for level in ("level2", "level3"):
                compiled.ptoas(arch, level)             # a PtoasError names the program, line and message
    text = compiled.as_text("pto")
    assert "pto.tround" not in text and "pto.tsel" in text
    got, _ = compiled.run(x)
    want = np.rint(x)
    same_bits(np.asarray(got), want)
    same_bits(np.asarray(compiled(x)), want)
    same_bits(np.asarray(jax.jit(fn)(x)), want)


def test_the_vendor_simulator_rounds_the_same():
    """pto-isa's CPU simulator (f32, f16: its bf16 is f16 under C++20) on the same edge values."""
    from vendor_tools import MISSING, IN_CI
    if MISSING and not IN_CI:
        pytest.skip("vendor tools not found: " + ", ".join(MISSING))
    jobs, inputs, xs = [], [], []
    for dtype in (np.float32, np.float16):
        edges = edge_values(dtype)
        x = np.concatenate([edges, (np.arange(64 - edges.size) - 16.5).astype(dtype)]).astype(dtype).reshape(2, 32)
        (job,) = xc.jobs_of(pj.kernel(kernel((2, 32))).lower(x).compile().code)
        params = xc.pointer_params(xc.functions(job[0])[job[1]])
        inputs.append([x.reshape(-1)] + [np.zeros(n, dt) for _, dt, n in params[1:]])
        jobs.append(job)
        xs.append(x)
    for x, result in zip(xs, xc.run(jobs, inputs=inputs)):
        assert result.status == "exact", (x.dtype, result.sim_error or result.engine_error or result.errors())
        assert {"tcvt f32->i32 RINT", "tcvt i32->f32 RINT", "tsel"} <= set(result.kinds)
        same_bits(result.sim[1].reshape(x.shape), np.rint(x))
