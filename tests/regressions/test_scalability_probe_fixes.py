"""Regressions from probes of first-call scalability and of ``tiles_per_block="auto"``.

- An eager matmul loaded each operand's windows through an int64 index of every element of every grid
  point (points x 128 x 64 per load and K step, kept by the run's closures): M·N·K/8 bytes, 8.6 GB for
  4096³ f16. Windows whose offsets form a grid of points (a step along a row of points, another
  between rows) are strided views now.
- The partition pass looked for a row loop from every block call, each time over the rest of the plan:
  4 096 alike calls took 15 s in ``partition._run`` (quadratic); a run of one grid shape that reaches
  the plan's end is looked at once. The report's layered layout collected each layer's nodes by a
  walk of all of them (quadratic in the depth).
- ``tiles_per_block="auto"`` never tried fewer tasks than cores, so a dispatch-bound epilogue after a
  matmul profiled at 31.5 µs against 25.8 µs with 8 tiles per task; it tries a half and a quarter of
  the cores, judged with reads from L2 and from HBM (the worse of the two: fewer tasks than cores win
  only where dispatches bind).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import engine
from ptojax.lowering import partition
from ptojax.report import markup


def _gm(offsets, shape, strides):
    return engine._Gm(0, None, np.asarray(offsets, np.int64), shape, strides)


@pytest.mark.parametrize("rows,per_row,steps", [(4, 3, (4096, 64)), (1, 5, (0, 64)), (3, 1, (640, 0)), (2, 4, (0, 0))])
def test_windows_of_a_grid_of_points_load_and_store_without_an_index(monkeypatch, rows, per_row, steps):
    shape, strides = (8, 16), (128, 1)
    offsets = [7 + i * steps[0] + j * steps[1] for i in range(rows) for j in range(per_row)]
    gm = _gm(offsets, shape, strides)
    flat = np.arange(20000, dtype=np.float32)
    want = flat[gm._index()]
    monkeypatch.setattr(engine._Gm, "_index", lambda self: pytest.fail("an index of every element was built"))
    np.testing.assert_array_equal(gm.loader(len(offsets))(flat), want)
    if engine._distinct((rows, per_row, *shape), (*steps, *strides)):
        values = np.random.default_rng(0).normal(size=want.shape).astype(np.float32)
        gm.storer(len(offsets))(flat, values)
        np.testing.assert_array_equal(flat[_gm(offsets, shape, strides)._index()], values)


def test_an_eager_matmul_equals_xla_with_its_operands_as_grid_views():
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((384, 320), (320, 512)))
    np.testing.assert_allclose(np.asarray(pj.kernel(pj.ops.matmul)(a, b), np.float32),
                               np.asarray(jax.jit(pj.ops.matmul)(a, b), np.float32), rtol=2e-3, atol=2e-3)


def test_alike_block_calls_are_looked_at_for_a_row_loop_once(monkeypatch):
    calls = []
    run = partition._run
    monkeypatch.setattr(partition, "_run", lambda *a: calls.append(1) or run(*a))

    def chain(x):
        with pj.tile(vec=(32, 64)):
            for _ in range(64):
                x = jnp.transpose(x) * 0.99 + 0.01
        return x

    x = np.random.default_rng(2).normal(size=(64, 64)).astype(np.float32)
    kernel = pj.kernel(chain)
    kernel.lower(x)
    assert len(calls) == 1
    np.testing.assert_allclose(kernel(x), jax.jit(chain)(x), rtol=1e-5, atol=1e-5)      # XLA fuses fmas


def test_the_layout_puts_every_node_in_its_layer_once():
    n = 300
    nodes = [{"id": i, "kind": "input" if i == 0 else "op"} for i in range(n)]
    edges = [{"src": i - 1, "dst": i} for i in range(1, n)]
    lay = markup.layout_graph({"nodes": nodes, "edges": edges})
    assert sorted(y for _, y in lay["xy"].values()) == [20 + d * (50 + 64) for d in range(n)]


def test_auto_tiles_per_block_beats_every_uniform_count_on_a_dispatch_bound_epilogue():
    def mm_ep(a, b):
        with pj.tile(cube=(64, 128, 128)), jax.named_scope("MM"):
            y = pj.ops.matmul(a, b)
        with pj.tile(vec=(32, 128)), jax.named_scope("EP"):
            return jax.nn.relu(y) * 2.0

    specs = [jax.ShapeDtypeStruct((1000, 512), jnp.float16), jax.ShapeDtypeStruct((512, 768), jnp.float16)]

    def makespan(n):
        return pj.kernel(mm_ep, options={"tiles_per_block": n}).lower(*specs).compile().profile(
            compute=False).makespan_us

    auto = makespan("auto")
    assert all(auto <= makespan(n) for n in (1, 2, 4, 8, 16)), auto
