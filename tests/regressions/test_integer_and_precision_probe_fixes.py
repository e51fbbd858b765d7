"""Findings of a probe of integer and cast semantics at edge values (about 260 cases): ``jax.jit`` of an
int8 ``a | ~b`` kernel crashed the process (XLA:CPU compiling the replay's signed narrowing into an int8
``or``); integer ``rem`` ran ``tfmod`` (C's ``%``) on a zero divisor and on ``INT_MIN % -1``, which the
vendor's simulator traps on; ``lax.reduce_precision`` to float16's format kept ``2**-14`` where XLA
flushes to zero."""
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from vendor_tools import tools

_FIXTURES = (tools,)                  # (the vendor tools, pinned)

I32_MIN = np.iinfo(np.int32).min


def test_int8_bitwise_of_a_narrowed_value_compiles_under_jit():
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        import ptojax as pj
        a = np.resize(np.arange(-128, 128, dtype=np.int8), (8, 128))
        b = np.roll(a, 3, axis=1)
        for f in (lambda a, b: a | ~b, lambda a, b: a & ~b, lambda a, b: a | -b, lambda a, b: a | jnp.maximum(a, b)):
            assert np.array_equal(jax.jit(pj.kernel(f))(a, b), jax.jit(f)(a, b))
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def _vendor(kernel, *args):
    """The one program of ``kernel`` run on ``args`` (flat, in order; the output after them) by the engine
    and by pto-isa's CPU simulator."""
    (job,) = xc.jobs_of(kernel.lower(*args).compile())
    inputs = [np.ascontiguousarray(a).reshape(-1) for a in args]
    inputs.append(np.zeros(inputs[0].size, np.asarray(args[0]).dtype))
    return xc.run([job], inputs=[inputs])[0]


@pytest.mark.usefixtures("tools")
@pytest.mark.parametrize("name, fn, args", [
    ("tile % tile", lax.rem, (np.array([I32_MIN, 5, -7, 9], np.int32), np.array([-1, 0, 2, -1], np.int32))),
    ("tile % -1", lambda a: lax.rem(a, np.int32(-1)), (np.array([I32_MIN, 5, -7, 9], np.int32),)),
    ("3 % tile", lambda b: lax.rem(np.int32(3), b), (np.array([0, -1, 2, I32_MIN], np.int32),)),
    ("INT_MIN % tile", lambda b: np.int32(I32_MIN) % b, (np.array([-1, 0, 2, 3], np.int32),)),
])
def test_integer_remainder_by_zero_and_minus_one_runs_on_the_vendor_simulator(name, fn, args):
    args = tuple(np.resize(a, (8, 128)) for a in args)
    want = np.asarray(jax.jit(fn)(*args))
    np.testing.assert_array_equal(pj.kernel(fn)(*args), want)
    result = _vendor(pj.kernel(fn), *args)
    assert result.status == "exact", (result.status, result.sim_error)
    np.testing.assert_array_equal(result.sim[-1].reshape(want.shape), want)


def test_reduce_precision_to_half_flushes_what_rounds_below_its_smallest_normal():
    f = lambda a: lax.reduce_precision(a, exponent_bits=5, mantissa_bits=10)       # noqa: E731
    bits = np.concatenate([np.arange(0x387F0000, 0x38800010, dtype=np.uint32),       # 2**-14 from below
                           np.arange(0x33000000, 0x387F0000, 4099, dtype=np.uint32)])  # the subnormal range
    x = bits.view(np.float32)
    x = np.concatenate([x, -x])
    x = np.resize(x, (-(-x.size // 128), 128))
    want = np.asarray(jax.jit(f)(x))
    for got in (pj.kernel(f)(x), jax.jit(pj.kernel(f))(x)):
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32), want.view(np.uint32))
