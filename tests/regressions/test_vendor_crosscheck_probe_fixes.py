"""Regressions from a crosscheck campaign of the engine against pto-isa's CPU simulator.

- A float32 ``tmatmul`` runs the exact NumPy fma chain where its operands may make subnormals (XLA:CPU
  flushes them), else XLA; the engine decided once per instruction, on the first run's data: after a
  run on ordinary data, subnormal data went to XLA (0 and NaN where the simulator keeps 5.98e-39).
  The condition is asked on every run now.
- An int8 matmul with ``transpose_a`` and an M tail allocated its transposed (zN) L1 tile with 16 rows;
  pto-isa's Tile wants whole 32-byte inner boxes (32 int8 rows), so g++ refused the text.
- A polymorphic kernel's NaN-aware row max ended in a ``tsel`` whose sources were typed ``(?, ?)`` and
  its destination ``(?, 8)``; pto-isa's ``TSEL`` takes one tile type, so g++ found no overload.
"""
import jax.numpy as jnp
import numpy as np

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from vendor_tools import needed, tools  # noqa: F401 - tools: autouse fixture

O = pj.ops


def _zeros(job):
    return [np.zeros(n, dt) for _, dt, n in xc.pointer_params(xc.functions(job[0])[job[1]])[2:]]


def test_a_matmul_on_subnormal_data_after_ordinary_data_keeps_the_subnormals():
    r = np.random.default_rng(3)
    a = (r.standard_normal((16, 40)) * 1e-20).astype(np.float32)      # shapes of this test alone: the
    b = (r.standard_normal((40, 16)) * 1e-20).astype(np.float32)      # engine's first run of the text is here
    a[0, 0], b[0, :3] = 1e-40, [1e30, -np.inf, 2.0]
    ok_a, ok_b = r.standard_normal((16, 40)).astype(np.float32), r.standard_normal((40, 16)).astype(np.float32)
    (job,) = xc.jobs_of(pj.kernel(lambda x, y: O.matmul(x, y)).lower(a, b).compile().code)
    xc.run([job], inputs=[[ok_a.ravel(), ok_b.ravel()] + _zeros(job)], sim=False)      # the engine's first run
    (res,) = xc.run([job], inputs=[[a.ravel(), b.ravel()] + _zeros(job)])
    assert res.status == "exact", res.sim_error or res.engine_error or res.errors()
    assert np.count_nonzero(np.abs(res.sim[2]) < np.finfo(np.float32).tiny) > 100       # subnormals, kept


def test_int8_matmul_of_a_transposed_operand_with_an_m_tail_builds_in_the_simulator():
    r = np.random.default_rng(4)
    a = r.integers(-128, 128, (64, 33)).astype(np.int8)
    b = r.integers(-128, 128, (64, 48)).astype(np.int8)

    def fn(a, b):
        with pj.tile(cube=(32, 32, 32)):
            return O.matmul(a, b, transpose_a=True)

    results = xc.crosscheck(pj.kernel(fn).lower(a, b).compile().code)
    assert len(results) == 4 and all(res.status == "exact" for res in results), xc.table(results)
    assert np.array_equal(np.asarray(pj.kernel(fn)(a, b)), a.T.astype(np.int32) @ b.astype(np.int32))


def test_a_dynamic_row_max_selects_between_tiles_of_one_type():
    def fn(x):
        with pj.tile(vec=(4, 8, 16)):
            return jnp.max(x, -1)

    dyn = pj.kernel(fn, polymorphic_shapes=("m, 8, 16",)).compiled_for(np.zeros((16, 8, 16), np.float32)).dynamic
    (name,) = xc.functions(dyn.text)
    m = 7
    x = np.random.default_rng(7).standard_normal((m, 8, 16)).astype(np.float32)
    ((_, outs, err),) = xc.simulate([(xc.single(dyn.text, name), name,
                                      [x.reshape(-1).copy(), np.zeros(m * 8, np.float32), np.array(m, np.int32)], 2)])
    assert err is None
    assert np.array_equal(outs[1].reshape(m, 8), x.max(-1))
