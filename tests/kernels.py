"""The kernels tests share: the seed's worked example, one kernel per op family (``KERNELS``), and
edits of the seed's compiled programs that break them on purpose."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj
from helpers import BF16, F16, rand
from ptojax.ascend import asm
from ptojax.ascend.program import compile_kernel

O = pj.ops


def seed_kernel(a, b, w):
    """``rowsum((A * c + B) @ W)`` with the seed's tiles: vec (32, 32), matmul untiled."""
    with pj.tile(vec=(32, 32)):
        x = a * 2.0 + b
    with pj.tile(cube=(64, 64, 32)), jax.named_scope("Linear"):
        y = O.matmul(x, w)
    with pj.tile(vec=(32, 32)):
        return jnp.sum(y, axis=-1)


def _kernels():
    """(name, kernel, args): every op family, tails, size-1 dims, int8/fp16/bf16, a fori_loop."""
    f32 = lambda *s, seed=0: rand(s, np.float32, seed)  # noqa: E731
    idx = np.array([3, 1, -1, 36, 5, 5, 0, 2, 9, 10, 11], np.int32)

    def tiled(vec=None, cube=None):
        def wrap(fn):
            def kernel(*args):
                with pj.tile(**{k: v for k, v in (("vec", vec), ("cube", cube)) if v is not None}):
                    return fn(*args)
            return kernel
        return wrap

    return [
        ("elementwise-tails", tiled((16, 16))(lambda x: jnp.exp(x) * 2 + jax.nn.relu(x) - x[0]), (f32(37, 50),)),
        ("unary-chain", tiled((8, 32))(lambda x: O.silu(O.tanh(x)) / (1 + O.abs(x)) + O.rsqrt(O.abs(x) + 1)),
         (f32(33, 70),)),
        ("size-one-dims", tiled((1, 8))(lambda x, y: O.maximum(x, y) * O.minimum(x, 1.5)), (f32(1, 1, 9), f32(5, 1, 9))),
        ("compare-where-clip", tiled((8, 8))(lambda x: O.where(x > 0, O.clip(x, -1, 1), O.pow(O.abs(x) + 1, 0.5))),
         (f32(19, 23),)),
        ("fp16-chain", tiled((16, 16))(lambda x, y: O.sigmoid(x) * y + O.gelu(y)), (rand((40, 48), F16), rand((40, 48), F16, 1))),
        ("bf16-cast", tiled((16, 16))(lambda x: O.cast(O.exp(O.cast(x, jnp.float32)), jnp.bfloat16) + x),
         (rand((17, 32), BF16),)),
        ("int8-arith", tiled((8, 32))(lambda x, y: O.add(x, y) * 3 - O.neg(x)), (rand((20, 64), np.int8), rand((20, 64), np.int8, 1))),
        ("int32-compare", tiled((4, 8))(lambda x: O.where(O.gt(x, 0), x, O.mul(x, -2))), (rand((9, 13), np.int32),)),
        ("cast-int", tiled((8, 32))(lambda x: O.cast(x * 40, jnp.int8, rounding="floor")), (f32(11, 45),)),
        ("reductions", tiled((8, 16))(lambda x: (jnp.max(x, 1), jnp.sum(x, 0), O.prod(x * 0.1 + 1, 1, keepdims=True),
                                                  jnp.argmax(x, 0), O.amin(x, (0, 1)))), (f32(37, 50),)),
        ("cumsum-sort-topk", tiled((8, 16))(lambda x: (jnp.cumsum(x, 1), O.sort(x, 0)[0], O.topk(x, 5)[1])), (f32(21, 30),)),
        ("softmax-norms", tiled((8, 16))(lambda x, g: (jax.nn.softmax(x), O.rms_norm(x, g), O.layer_norm(x, g, g))),
         (f32(37, 50), f32(50, seed=1))),
        ("quantize", tiled((4, 64))(lambda x: O.dequantize(*O.quantize(x))), (rand((10, 3, 64), F16),)),
        ("matmul-tails", tiled(cube=(16, 32, 16))(lambda a, b: O.matmul(a, b, transpose_b=True, bias=jnp.ones(20))),
         (rand((37, 70), F16), rand((20, 70), F16, 1))),
        ("matmul-batched", tiled(cube=(16, 16, 16))(lambda a, b: jnp.einsum("bmk,kn->bmn", a, b)), (f32(3, 20, 24), f32(24, 18, seed=1))),
        ("matmul-int8", lambda a, b: O.matmul(a, b), (rand((33, 64), np.int8), rand((64, 48), np.int8, 1))),
        ("matmul-fp16-out", tiled(cube=(32, 32, 32))(lambda a, b: O.matmul(a, b, out_dtype=jnp.float16, transpose_a=True)),
         (rand((64, 40), F16), rand((64, 48), F16, 1))),
        ("layout", tiled((8, 8))(lambda x: (x.T, jnp.concatenate([x, x], 0), O.view(x, (10, 10), (3, 4), valid_shape=(7, 10)),
                                            O.pad(x, [(1, 2), (3, 0)], 2.0), O.assemble(x[:5, :5], (2, 3), x),
                                            jnp.broadcast_to(x[:, :1], (37, 50)), x.reshape(50, 37))), (f32(37, 50),)),
        ("indexing", tiled((8,))(lambda x, i, u: (O.gather(x, i, 0), O.scatter_update(x, i, u, 0), O.index_add(x, i, u, 0),
                                                 jnp.take(x, jnp.abs(i), axis=0))), (f32(37, 50), idx, f32(11, 50, seed=1))),
        ("fori-loop", tiled((8, 16))(lambda x: jax.lax.fori_loop(0, 3, lambda k, c: c * 0.5 + x, x)), (f32(37, 50),)),
        ("mlp-block", lambda x, w1, w2: _mlp(x, w1, w2), (rand((24, 64), F16), rand((64, 96), F16, 1), rand((96, 32), F16, 2))),
    ]


def _mlp(x, w1, w2):
    with pj.tile(cube=(16, 32, 32)), jax.named_scope("up"):
        h = O.matmul(x, w1)
    with pj.tile(vec=(8, 32)), jax.named_scope("act"):
        h = O.cast(O.silu(h), jnp.float16)
    with pj.tile(cube=(16, 32, 32)), jax.named_scope("down"):
        y = O.matmul(h, w2)
    with pj.tile(vec=(8, 32)):
        return O.rms_norm(y)


KERNELS = _kernels()


def scatter_rows(cache, rows, slots):
    """Rows written into a cache at ``slots`` (-1: skipped); the cache is the donated argument."""
    with pj.tile(vec=(4,)):
        return pj.ops.scatter_update(cache, slots, rows, 0)


def seed_program(key, edit):
    """The seed kernel's program ``key`` with ``edit`` applied to each statement, and its core memory."""
    args = rand((64, 64), F16, 1), rand((64, 64), F16, 2), rand((64, 32), F16, 3)
    compiled = compile_kernel(pj.lower(seed_kernel, *args))
    kernel = compiled.kernels[key]
    return dataclasses.replace(kernel, body=tuple(edit(s) for s in kernel.body)), compiled.memory


def wide_window(s):
    """A ``seed_program`` edit: ``%p3`` grows to 64x32 windows (past the tensor at some grid points)."""
    return dataclasses.replace(s, sizes=("%c64", "%c32")) if isinstance(s, asm.PartitionView) and s.name == "%p3" else s


def short_view(s):
    """A ``seed_program`` edit: the tensor view ``%v0`` is declared 32x32, smaller than its GM array."""
    return dataclasses.replace(s, shape=("%c32", "%c32")) if isinstance(s, asm.MakeView) and s.name == "%v0" else s
