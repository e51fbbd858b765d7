"""PyPTO's operation catalogue: ``import ptojax as pj; pj.ops.matmul(a, b)``.

Each function binds one JAX primitive named ``pto.<name>``; see :data:`ptojax.primitives.OPS` for
the registry (family, dtypes, differentiability).
"""
from .primitives.cast import cast
from .primitives.composite import dequantize, layer_norm, quantize, rms_norm, softmax
from .primitives.elementwise import (abs, add, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, clip, div, eq,
                                     exp, fmod, ge, gelu, gt, le, log, logical_and, logical_not, logical_or, lt,
                                     maximum, minimum, mul, ne, neg, pow, reciprocal, relu, round, rsqrt, shift_left,
                                     shift_right, sigmoid, silu, sqrt, sub, tanh, where)
from .primitives.indexing import gather, index_add, merge_topk, scatter_update, sort, topk
from .primitives.layout import assemble, bitcast, concat, expand, pad, permute, reshape, transpose, view
from .primitives.matmul import matmul
from .primitives.reduce import amax, amin, argmax, argmin, cumsum, prod, sum

__all__ = [
    "abs", "add", "amax", "amin", "argmax", "argmin", "assemble", "bitcast", "bitwise_and", "bitwise_not", "bitwise_or",
    "bitwise_xor", "cast", "clip", "concat", "cumsum", "dequantize", "div", "eq", "exp", "expand", "fmod",
    "gather", "ge", "gelu", "gt", "index_add", "layer_norm", "le", "log", "logical_and", "logical_not",
    "logical_or", "lt", "matmul", "maximum", "merge_topk", "minimum", "mul", "ne", "neg", "pad", "permute",
    "pow", "prod", "quantize", "reciprocal", "relu", "reshape", "rms_norm", "round", "rsqrt", "scatter_update",
    "shift_left", "shift_right", "sigmoid", "silu", "softmax", "sort", "sqrt", "sub", "sum", "tanh", "topk",
    "transpose", "view", "where",
]
