"""One small float32 call per op of the catalogue: used to check jaxprs and gradients for every op."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import ptojax as pj

O = pj.ops
_rng = np.random.default_rng(42)


def _normal(*shape):
    return jnp.asarray(_rng.standard_normal(shape), jnp.float32)


def _positive(*shape):
    return jnp.asarray(_rng.uniform(0.5, 2.0, shape), jnp.float32)


X, Y, ROW, P = _normal(3, 4), _normal(3, 4), _normal(4), _positive(3, 4)
MASK = np.asarray(X > 0)
Q = jnp.asarray(_rng.integers(-128, 128, (3, 4)), jnp.int8)
IDX = jnp.array([2, 0, -1, 2], jnp.int32)
SLOTS = jnp.array([1, 3, -1], jnp.int32)
LISTS = np.arange(12, dtype=np.int32).reshape(3, 4)

# name -> (function, arguments); the function calls exactly that one op.
CASES = {
    "add": (lambda a, b: O.add(a, b), (X, ROW)),
    "sub": (lambda a, b: O.sub(a, b), (X, ROW)),
    "mul": (lambda a, b: O.mul(a, b), (X, ROW)),
    "div": (lambda a, b: O.div(a, b), (X, P)),
    "maximum": (lambda a, b: O.maximum(a, b), (X, Y)),
    "minimum": (lambda a, b: O.minimum(a, b), (X, Y)),
    "pow": (lambda a, b: O.pow(a, b), (P, X)),
    "fmod": (lambda a, b: O.fmod(a, b), (X, P)),
    "exp": (O.exp, (X,)),
    "log": (O.log, (P,)),
    "sqrt": (O.sqrt, (P,)),
    "rsqrt": (O.rsqrt, (P,)),
    "reciprocal": (O.reciprocal, (P,)),
    "tanh": (O.tanh, (X,)),
    "sigmoid": (O.sigmoid, (X,)),
    "silu": (O.silu, (X,)),
    "gelu": (lambda a: O.gelu(a, approximate=False), (X,)),
    "abs": (O.abs, (X,)),
    "neg": (O.neg, (X,)),
    "relu": (O.relu, (X,)),
    "round": (O.round, (X,)),
    "clip": (lambda a: O.clip(a, -0.5, 0.7), (X,)),
    "where": (lambda a, b: O.where(MASK, a, b), (X, Y)),
    "eq": (lambda a: O.eq(a, 0.5), (X,)),
    "ne": (lambda a: O.ne(a, 0.5), (X,)),
    "lt": (lambda a: O.lt(a, 0.5), (X,)),
    "le": (lambda a: O.le(a, 0.5), (X,)),
    "gt": (lambda a: O.gt(a, 0.5), (X,)),
    "ge": (lambda a: O.ge(a, 0.5), (X,)),
    "logical_and": (lambda a, b: O.logical_and(a, b), (X > 0, Y > 0)),
    "logical_or": (lambda a, b: O.logical_or(a, b), (X > 0, Y > 0)),
    "logical_not": (lambda a: O.logical_not(a), (X > 0,)),
    "bitwise_and": (lambda a, b: O.bitwise_and(a, b), (Q, Q.T.reshape(3, 4))),
    "bitwise_or": (lambda a, b: O.bitwise_or(a, b), (Q, Q.T.reshape(3, 4))),
    "bitwise_xor": (lambda a, b: O.bitwise_xor(a, b), (Q, Q.T.reshape(3, 4))),
    "bitwise_not": (O.bitwise_not, (Q,)),
    "shift_left": (lambda a: O.shift_left(a, 3), (Q,)),
    "shift_right": (lambda a: O.shift_right(a, 3), (Q,)),
    "cast": (lambda a: O.cast(a, jnp.float16), (X,)),
    "sum": (lambda a: O.sum(a, 1), (X,)),
    "prod": (lambda a: O.prod(a, 0, keepdims=True), (X,)),
    "amax": (lambda a: O.amax(a, -1), (X,)),
    "amin": (lambda a: O.amin(a, None), (X,)),
    "argmax": (lambda a: O.argmax(a, 1), (X,)),
    "argmin": (lambda a: O.argmin(a, 0), (X,)),
    "cumsum": (lambda a: O.cumsum(a, 1), (X,)),
    "matmul": (lambda a, b, c: O.matmul(a, b, transpose_b=True, bias=c), (X, Y, _normal(3))),
    "reshape": (lambda a: O.reshape(a, (2, 6)), (X,)),
    "bitcast": (lambda a: O.bitcast(a, jnp.int32), (X,)),
    "transpose": (lambda a: O.transpose(a, 0, 1), (X,)),
    "expand": (lambda a: O.expand(a, (2, 3, 4)), (X,)),
    "concat": (lambda a, b: O.concat([a, b], 1), (X, Y)),
    "view": (lambda a: O.view(a, (2, 3), (1, 1), valid_shape=(2, 2)), (X,)),
    "assemble": (lambda a, b: O.assemble(a, (1, 2), b), (_normal(2, 2), Y)),
    "pad": (lambda a: O.pad(a, [(1, 0), (0, 2)], 1.5), (X,)),
    "gather": (lambda a: O.gather(a, IDX, 1), (X,)),
    "index_add": (lambda a, s: O.index_add(a, IDX, s, 1), (X, _normal(3, 4))),
    "scatter_update": (lambda a, u: O.scatter_update(a, SLOTS, u, 1), (X, _normal(3, 3))),
    "topk": (lambda a: O.topk(a, 6)[0], (X,)),
    "sort": (lambda a: O.sort(a, 0, descending=True)[0], (X,)),
    "merge_topk": (lambda a: O.merge_topk(a, LISTS, 5)[0], (X,)),
    "softmax": (lambda a: O.softmax(a, 0), (X,)),
    "rms_norm": (lambda a, g: O.rms_norm(a, g), (X, ROW)),
    "layer_norm": (lambda a, g, b: O.layer_norm(a, g, b), (X, ROW, _normal(4))),
    "quantize": (lambda a: O.quantize(a)[1], (X,)),
    "dequantize": (lambda s: O.dequantize(Q, s), (_positive(3, 1),)),
}
