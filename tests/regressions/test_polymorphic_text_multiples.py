"""A polymorphic kernel's Block and Tile text with an intermediate of k·m rows (a [m, 4, 128] input
reshaped to [4m, 128] for a matmul): printed as ``4*m`` rows with ``ceil(4*m/64)`` blocks, the tasks the
runtime makes, where it printed the template's 2048 rows and ``x4*ceil(m/64)`` calls."""
import collections

import numpy as np

import ptojax as pj


def _rows_matmul(x, h):
    with pj.tile(vec=(2, 4, 128)):
        y = x * 2.0
    y = pj.ops.reshape(y, (x.shape[0] * 4, 128))
    with pj.tile(cube=(64, 128, 128)):
        z = pj.ops.matmul(y, h)
    return pj.ops.reshape(z, (x.shape[0], 4, 128))


def test_k_times_m_rows_print_as_the_runtime_runs_them():
    f = pj.kernel(_rows_matmul, polymorphic_shapes=("m, 4, 128", None))
    h = np.eye(128, dtype=np.float32)
    compiled = f.compiled_for(np.ones((5, 4, 128), np.float32), h)
    assert compiled.as_text("block").split("\n\n")[-1] == (
        "kernel(%0:f32[m,4,128], %1:f32[128,128]):\n"
        "  %2:f32[m,4,128] = block_call[mul<AIV> xceil(m/2)](%0)\n"
        "  %3:f32[4*m,128] = pto.reshape[new_shape=(4*m, 128)](%2)\n"
        "  %4:f32[4*m,128] = block_call[matmul<AIC> xceil(4*m/64)](%3, %1)\n"
        "  %5:f32[m,4,128] = pto.reshape[new_shape=(m, 4, 128)](%4)\n"
        "  return %5")
    tile = compiled.as_text("tile")
    assert "tile_grid[cube matmul parts=ceil(4*m/64)x1]" in tile
    assert "pto.tload[window=[64*i0:+min(64, 4*m-64*i0), 128*i2:+128] loc=mat]" in tile
    for m in (5, 100):
        x = np.random.default_rng(m).uniform(-1, 1, (m, 4, 128)).astype(np.float32)
        out, trace = compiled.run(x, h)
        np.testing.assert_allclose(np.asarray(out), x * 2.0, rtol=1e-6)
        tasks = collections.Counter(r.title for r in trace.records)
        assert tasks == {"mul": -(-m // 2), "matmul": -(-4 * m // 64)}
