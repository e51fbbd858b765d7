"""The demo kernels ``ptojax demo`` runs: the seed's worked example and a few kernels of each kind.

Each entry is ``(name, function, make_args)``; the function is an ordinary JAX function with tile
scopes, compiled with ``pj.kernel``. The demo checks every result against the function run by XLA.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import ops
from .lowering import tile


def seed_example(a, b, w):
    """rowsum((A * c + B) @ W): the seed article's tiling example (A, B 64x64, W 64x32)."""
    with tile(vec=(32, 32)), jax.named_scope("MulS_Add"):
        x = a * 2.0 + b
    with tile(cube=(64, 64, 32)), jax.named_scope("Matmul"):
        y = ops.matmul(x, w)
    with tile(vec=(32, 32)), jax.named_scope("RowSum"):
        return jnp.sum(y, axis=-1)


def softmax_rows(x):
    with tile(vec=(16, 512)), jax.named_scope("Softmax"):
        return jax.nn.softmax(x, axis=-1)


def int8_linear(x, w, x_scale, w_scale):
    """W8A8: int8 x int8 -> int32 on the cube, dequantised per token and per channel on the vector cores."""
    with tile(cube=(16, 256, 128)), jax.named_scope("QMatmul"):
        acc = ops.matmul(x, w)
    with tile(vec=(16, 256)), jax.named_scope("Dequant"):
        return ops.cast(ops.dequantize(acc, x_scale * w_scale), jnp.float16)


def rms_norm_gated(x, gamma, gate):
    with tile(vec=(8, 256)), jax.named_scope("RMSNorm"):
        y = ops.rms_norm(x, gamma)
    with tile(vec=(8, 256)), jax.named_scope("Gate"):
        return y * ops.silu(gate)


def quantize_rows(x):
    with tile(vec=(16, 128)), jax.named_scope("DynamicQuant"):
        return ops.quantize(x, axis=-1)


def _rand(shape, dtype, seed, low=-1.0, high=1.0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.int8:
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.uniform(low, high, shape).astype(dtype)


DEMOS = [
    ("seed_example", seed_example, lambda: (_rand((64, 64), np.float16, 0), _rand((64, 64), np.float16, 1),
                                            _rand((64, 32), np.float16, 2))),
    ("softmax_rows", softmax_rows, lambda: (_rand((48, 1000), np.float32, 3, -4, 4),)),
    ("int8_linear", int8_linear, lambda: (_rand((40, 512), np.int8, 4), _rand((512, 384), np.int8, 5),
                                          _rand((40, 1), np.float32, 6, 0.001, 0.01),
                                          _rand((1, 384), np.float32, 7, 0.001, 0.01))),
    ("rms_norm_gated", rms_norm_gated, lambda: (_rand((30, 768), np.float32, 8), _rand((768,), np.float32, 9),
                                                _rand((30, 768), np.float32, 10))),
    ("quantize_rows", quantize_rows, lambda: (_rand((64, 128), np.float16, 11, -8, 8),)),
]
