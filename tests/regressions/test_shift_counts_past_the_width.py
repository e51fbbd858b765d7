"""Shifts by a constant count outside ``[0, bits)``: ``x << -1`` selected ``pto.tshls`` with the immediate
-1, which ptoas refuses ("expects tshls scalar to be non-negative"). Such a count now selects XLA's
result directly: 0 for a left shift, the sign's fill for an arithmetic right shift."""
import os

import jax
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.ascend.ptoas import assemble, find_ptoas

needs_ptoas = pytest.mark.skipif(not find_ptoas() and os.environ.get("CI") != "true",
                                 reason="no ptoas: set PTOAS to Huawei's PTO assembler (hw-native-sys/PTOAS)")
SHIFTS = {"left": lax.shift_left, "right_arithmetic": lax.shift_right_arithmetic,
          "right_logical": lax.shift_right_logical}


@pytest.mark.parametrize("dtype", [np.int32, np.int8])
@pytest.mark.parametrize("name", sorted(SHIFTS))
def test_constant_counts_past_the_width_match_xla(dtype, name):
    x = (np.arange(-128, 128, dtype=np.int32).reshape(8, 32) * 12345).astype(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    for count in (-5, 0, bits - 1, bits + 1):
        def fn(a, count=count):
            return SHIFTS[name](a, np.asarray(count, dtype))
        want = np.asarray(jax.jit(fn)(x))
        kernel = pj.kernel(fn)
        np.testing.assert_array_equal(np.asarray(kernel(x)), want, err_msg=f"{name} by {count}")
        np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), want, err_msg=f"{name} by {count} under jit")


@needs_ptoas
@pytest.mark.parametrize("count", [-1, -7, 33])
def test_ptoas_accepts_the_text_of_a_left_shift_past_the_width(count):
    fn = lambda a: lax.shift_left(a, np.int32(count))      # noqa: E731
    assemble(pj.kernel(fn).lower(np.zeros((8, 32), np.int32)).as_text("pto"))   # raises PtoasError if refused
