"""pj.nn: training ops, each a ``jax.custom_vjp`` whose forward and backward are ptojax kernels."""
from ._dense import dense, swiglu
from ._norms import layer_norm, rms_norm
from ._attention import flash_attention
from ._softmax import softmax, softmax_cross_entropy

__all__ = ["dense", "flash_attention", "layer_norm", "rms_norm", "softmax", "softmax_cross_entropy", "swiglu"]
