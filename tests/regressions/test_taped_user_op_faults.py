"""A registered op's fault in a replayed tape (a run of the same blocks recorded before, one task per
batch with ``workers=8``) names the function, line and instruction as the interpreter does: it came
back as the op's bare exception, or a bare error of the tile's writer for a result of the wrong shape."""
import jax
import numpy as np
import pytest

import ptojax as pj

T = pj.tiles
W = T.window((16, 32))
GOOD = np.ones((32, 32), np.float32)
BAD = GOOD.copy()
BAD[20, 3] = 500.0


def _raises(v):
    if (v > 100).any():
        raise ValueError("value above 100")
    return v


def _shrinks(v):
    return v[..., :8, :] if (v > 100).any() else v


@pytest.mark.parametrize("numpy, what", [(_raises, r"pto.tprobe_taped failed: ValueError: value above 100"),
                                         (_shrinks, r"pto.tprobe_taped failed: ValueError: pto.tprobe_taped gave "
                                                    r"float32\[8, 32\] for a destination of float32\[16, 32\]")], ids=["raises", "wrong-shape"])
@pytest.mark.parametrize("workers", [1, 8])
def test_a_taped_user_op_fault_names_function_line_and_instruction(numpy, what, workers):
    op = T.register_op("tprobe_taped", reference=lambda v: v, numpy=numpy)
    try:
        def f(x):
            body = lambda i, ins, outs: [T.store(outs[0], op(T.load(ins[0], i, W)), i, W)]
            return T.grid(body, (2, 1), x, jax.ShapeDtypeStruct(x.shape, x.dtype))
        k = pj.kernel(f, executor="threads", workers=workers)
        np.testing.assert_array_equal(k(GOOD), GOOD)              # records the tape
        with pytest.raises(pj.PtoTaskError, match=r"PtoExecutionError: pto engine: function 'lambda' line \d+: " + what):
            k(BAD)
        np.testing.assert_array_equal(k(GOOD), GOOD)
    finally:
        T.unregister_op("tprobe_taped")
