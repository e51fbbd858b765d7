"""The seed's fused example written with pj.ops: ``rowsum((A * c + B) @ W)``, checked against NumPy.

Run: ``python examples/fused_ops.py``. It prints the jaxpr (one eqn per PyPTO op), the result's
agreement with a float64 NumPy golden, and the same function under jit, vmap and grad.
"""
import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj


def fused(a, b, w, c=2.0):
    x = pj.ops.add(pj.ops.mul(a, c), b)       # MulS + Add on the vector cores
    y = pj.ops.matmul(x, w)                   # Matmul on the cube (fp16 in, fp32 accumulate)
    return pj.ops.sum(y, axis=-1)             # RowSum


def main():
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float16) for _ in range(2))
    w = rng.uniform(-1, 1, (64, 32)).astype(np.float16)

    print(jax.make_jaxpr(fused)(a, b, w))
    out = jax.jit(fused)(a, b, w)
    x = (a.astype(np.float64) * 2.0 + b).astype(np.float16).astype(np.float64)
    golden = (x @ w.astype(np.float64)).sum(-1)
    err = float(np.max(np.abs(np.asarray(out, np.float64) - golden) / (np.abs(golden) + 1)))
    print(f"max relative error vs float64 NumPy: {err:.2e} (dtype {out.dtype}, shape {out.shape})")

    batched = jax.vmap(fused, in_axes=(0, 0, None))(np.stack([a, -a]), np.stack([b, b]), w)
    grad = jax.grad(lambda w: fused(a, b, w).astype(jnp.float32).sum())(w.astype(np.float32).astype(np.float16))
    print(f"vmap: {batched.shape}, grad wrt W: {grad.shape} {grad.dtype}")
    return err


if __name__ == "__main__":
    main()
