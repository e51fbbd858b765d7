"""Windows of a tile and tiles side by side in a hand-written body (``t[:16]``, ``t[:, 8:16]``,
``pj.ops.view``, ``jnp.concatenate``, a RoPE half swap, ``jnp.roll``): they traced, verified and ran on
``backend="xla"``, then failed in selection ("pto.tview has no selection"). They are ``pto.subset``
windows copied into place: whole rows in one copy, narrower windows row by row — PTOAS's C++ gives a
subset the pitch of its own type, so a window narrower than its parent's rows over several rows reads
the parent's next elements instead (pto-isa's CPU simulator; tests/test_engine.py), which the engine
now refuses. Each case: the simulator equals NumPy, ptoas accepts the text and pto-isa's CPU simulator
computes it bit for bit. Columns that do not start and end on 32 bytes are refused at trace time."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

T = pj.tiles
RNG = np.random.default_rng(0)


def _grid(piece, out_window, out_shape):
    def fn(x):
        def body(i, ins, outs):
            t = T.load(ins[0], i, T.window((32, 32)))
            return [T.store(outs[0], piece(t), i, T.window(out_window))]
        return T.grid(body, (2, 2), x, jax.ShapeDtypeStruct(out_shape, x.dtype))
    return fn


def _blocks(x, piece):
    """``piece`` of each 32x32 block of ``x``, placed as the grid places it (NumPy)."""
    return np.block([[piece(x[r:r + 32, c:c + 32]) for c in (0, 32)] for r in (0, 32)])


CASES = {
    "rows": (lambda t: t[:16], (16, 32)),
    "middle rows": (lambda t: t[8:24], (16, 32)),
    "columns": (lambda t: t[:, 16:], (32, 16)),
    "block": (lambda t: t[8:16, 16:32], (8, 16)),
    "view": (lambda t: pj.ops.view(t, (16, 16), (16, 16)), (16, 16)),
    "RoPE half swap": (lambda t: jnp.concatenate([-t[:, 16:], t[:, :16]], 1), (32, 32)),
    "rows side by side": (lambda t: jnp.concatenate([t[16:], t[:16]], 0), (32, 32)),
    "roll": (lambda t: jnp.roll(t, 16, 1), (32, 32)),
}


@needed
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_windows_of_a_tile_compute_as_numpy_and_as_the_vendor(dtype):
    x = RNG.uniform(-4, 4, (64, 64)).astype(dtype)
    jobs = []
    for name, (piece, window) in CASES.items():
        fn = _grid(piece, window, (2 * window[0], 2 * window[1]))
        got = np.asarray(pj.kernel(fn)(x))
        np.testing.assert_array_equal(got, _blocks(x, lambda b: np.asarray(piece(jnp.asarray(b)))), err_msg=name)
        compiled = pj.kernel(fn).lower(x).compile()
        compiled.ptoas()                                   # the vendor's assembler takes the text
        jobs += xc.jobs_of(compiled.code)
    for result in xc.run(jobs, seed=1):
        assert result.sim_error is None and result.engine_error is None, (result.function, result.sim_error,
                                                                          result.engine_error)
        assert all(e["exact"] for e in result.errors()), (result.function, result.errors())


@pytest.mark.parametrize("dtype,piece,window,columns", [
    (np.float32, lambda t: t[:, 3:11], (32, 8), "3..11"),          # starts 12 bytes into a row
    (np.float16, lambda t: t[:, 16:24], (32, 8), "16..24"),        # 8 f16 columns are 16 bytes
    (np.float32, lambda t: jnp.roll(t, 3, 1), (32, 32), "29..32"),
])
def test_columns_off_32_bytes_are_refused_at_trace_time(dtype, piece, window, columns):
    x = np.ones((64, 64), dtype)
    with pytest.raises(pj.PtoArgumentError, match=rf"pj.tiles.grid 'body': pto.t(view|concat) moves columns "
                                                  rf"{columns} of \d-byte elements: .* must start and end its "
                                                  r"columns on multiples of 32 bytes"):
        pj.lower(_grid(piece, window, (2 * window[0], 2 * window[1])), x)
