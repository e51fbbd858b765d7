"""Regression: a top-k of int8 values passed ptoas and ptojax's engine, but pto-isa's CPU simulator did
not compile ptoas's C++ (``TRESHAPE: Element types must be compatible``). int8 rows sort in f32; the
f32 staging tiles (a 32-byte row of f32: 8 values) were moved into the int8 destination's row pitch
(32 values) through i32 views of their float bits before the ``tcvt`` back, and pto-isa's TRESHAPE
refuses a float <-> integer view. Selection now stages in the destination's buffer shape and widens the
source in its own, so each conversion is one ``tcvt``. pto-isa's simulator runs these kernels in
tests/test_vendor_sim.py (the "top-k i8" families); here the rule it enforces is checked on the text."""
import numpy as np
import pytest

import ptojax as pj
from vendor_tools import PTOAS, assert_no_float_int_views

O = pj.ops


def _i8(*shape):
    return np.random.default_rng(sum(shape)).integers(-128, 128, shape).astype(np.int8)


# name: (input, k, axis, largest, vec tile)
CASES = {
    "k4 of 32": (_i8(4, 32), 4, -1, True, (4, 32)),
    "k1 (a column)": (_i8(4, 32), 1, -1, True, (4, 32)),
    "smallest k5 of 40 in a 64-wide tile": (_i8(3, 40), 5, -1, False, (3, 64)),
    "along axis 0": (_i8(32, 4), 3, 0, True, (32, 32)),
    "staged: two chunks and a merge_topk": (_i8(2, 64), 2, -1, True, (2, 32)),
}


def reference(x, k, axis, largest):
    """NumPy's stable sort: ties keep the lower index first."""
    xs = np.moveaxis(x.astype(np.int64), axis, -1)
    order = np.argsort(-xs if largest else xs, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(xs, order, -1).astype(x.dtype)
    return np.moveaxis(values, -1, axis), np.moveaxis(order, -1, axis).astype(np.int32)


@pytest.mark.parametrize("name", list(CASES))
def test_int8_topk_text_is_what_the_vendor_simulator_compiles(name):
    x, k, axis, largest, tile = CASES[name]

    def fn(a):
        with pj.tile(vec=tile):
            return O.topk(a, k, axis, largest=largest)

    compiled = pj.kernel(fn).lower(x).compile()
    assert_no_float_int_views(compiled.code.pto())
    values, indices = compiled(x)
    want_values, want_indices = reference(x, k, axis, largest)
    np.testing.assert_array_equal(np.asarray(values), want_values)
    np.testing.assert_array_equal(np.asarray(indices), want_indices)
    if PTOAS:
        compiled.ptoas()
