"""Train a small MLP with pj.nn: fused dense kernels and a softmax cross-entropy kernel, each a
``jax.custom_vjp`` with forward and backward ptojax kernels, under ``jax.jit(jax.value_and_grad)``.

An optax-free SGD loop on synthetic data: the first ``sim_steps`` steps run the PTO programs on the
simulated A3 (``backend="sim"``), the rest run the same kernels' Tensor-level jaxpr with XLA
(``backend="xla"``). A pure-jnp model trained from the same weights gives the reference loss curve.

Run: ``python examples/train_mlp.py [steps] [sim_steps]``.
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj


def init(key, sizes):
    params = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        k = jax.random.fold_in(key, i)
        params.append((jax.random.normal(k, (n_in, n_out), jnp.float32) / np.sqrt(n_in),
                       jnp.zeros((n_out,), jnp.float32)))
    return params


def data(key, n, d, classes):
    """Synthetic classification: labels from a fixed random linear teacher."""
    kx, kt = jax.random.split(key)
    x = jax.random.normal(kx, (n, d), jnp.float32)
    teacher = jax.random.normal(kt, (d, classes), jnp.float32)
    return x, jnp.argmax(x @ teacher, axis=-1).astype(jnp.int32)


def loss_pj(params, x, y, backend):
    h = x
    for w, b in params[:-1]:
        h = pj.nn.dense(h, w, b, "relu", backend=backend)
    w, b = params[-1]
    return pj.nn.softmax_cross_entropy(pj.nn.dense(h, w, b, None, backend=backend), y, backend=backend)


def loss_jnp(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return jnp.mean(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, y[:, None], -1)[:, 0])


def sgd(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def main(steps=40, sim_steps=4, n=32, sizes=(32, 64, 32, 16), lr=0.5, seed=0, verbose=True):
    """Train ``steps`` SGD steps (the first ``sim_steps`` on the simulator); return
    (the pj.nn loss curve, the pure-jnp model's loss curve), each a list of floats."""
    key = jax.random.PRNGKey(seed)
    x, y = data(jax.random.fold_in(key, 1), n, sizes[0], sizes[-1])
    params = ref = init(key, list(sizes))
    steps_pj = {be: jax.jit(lambda p, x, y, be=be: (lambda l, g: (l, sgd(p, g, lr)))(
        *jax.value_and_grad(loss_pj)(p, x, y, be))) for be in ("sim", "xla")}
    step_ref = jax.jit(lambda p, x, y: (lambda l, g: (l, sgd(p, g, lr)))(*jax.value_and_grad(loss_jnp)(p, x, y)))
    curve, curve_ref = [], []
    for i in range(steps):
        backend = "sim" if i < sim_steps else "xla"
        loss, params = steps_pj[backend](params, x, y)
        loss_r, ref = step_ref(ref, x, y)
        curve.append(float(loss))
        curve_ref.append(float(loss_r))
        if verbose:
            print(f"step {i:3d} [{backend}] loss {curve[-1]:.5f}   jnp {curve_ref[-1]:.5f}")
    return curve, curve_ref


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", nargs="?", type=int, default=40, help="SGD steps (default 40)")
    ap.add_argument("sim_steps", nargs="?", type=int, default=4, help="of which on the simulator (default 4)")
    a = ap.parse_args()
    if not 0 <= a.sim_steps <= a.steps or a.steps < 1:
        ap.error(f"steps {a.steps}, sim_steps {a.sim_steps}: 1 <= steps and 0 <= sim_steps <= steps")
    main(a.steps, a.sim_steps)
