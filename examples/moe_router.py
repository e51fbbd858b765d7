"""A mixture-of-experts layer with run-time routing, in the style of GLM-4.5's expert selector.

One kernel, compiled once, for every routing outcome:

1. ``Router`` — gating logits ``x @ W_router`` on the cube;
2. ``Route`` — sigmoid scores; the top-k experts per token chosen on ``scores + bias`` (GLM-4.5's
   ``e_score_correction_bias``), their weights the unbiased scores normalised and scaled by
   ``ROUTED_SCALING``; the token count of every expert and each (token, choice)'s slot in a
   per-expert row block;
3. ``Dispatch`` — the tokens' rows copied into those slots (expert ``e`` owns rows ``[e*T, (e+1)*T)``);
4. per expert, a loop over its ``ceil(count / ROWS)`` tiles of ``ROWS`` rows: the bound is device
   data (``Count`` copies each expert's bound out of the ``Route`` results), which the orchestrator
   reads from GM — it synchronises, like PyPTO's AICPU control thread — so only the tiles the counts
   need become tasks: ``Gather`` the rows, ``ExpertFFN`` (SwiGLU: gate and up matmuls, silu(gate) * up,
   the down matmul), ``Scatter`` the results back;
5. ``Combine`` — every token's k expert outputs gathered from their slots and weighted.

:func:`reference` computes the same layer independently: every expert densely on every token, masked
by the routing. Run: ``python examples/moe_router.py`` (a few seconds): it runs several routings
through one compiled kernel and prints the counts, the error against the reference and the tasks.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ptojax as pj  # noqa: E402

O = pj.ops
TOKENS, HIDDEN, EXPERTS, TOP_K, FFN = 32, 64, 8, 2, 64
ROWS = 16                      # rows per expert tile (the cube's m)
ROUTED_SCALING = 2.5           # GLM-4.5's routed_scaling_factor


def _check(x, w_router, bias, w_gate, w_up, w_down):
    """The shape rules the layer's grouping relies on (a PtoShapeError naming the values otherwise)."""
    def fail(message):
        raise pj.PtoShapeError(f"moe_router: {message}")

    if len(x.shape) != 2 or len(w_router.shape) != 2 or w_router.shape[0] != x.shape[1]:
        fail(f"x {tuple(x.shape)} and w_router {tuple(w_router.shape)} must be (T, D) and (D, E)")
    t, e_n = x.shape[0], w_router.shape[1]
    if t == 0 or t % ROWS:
        fail(f"{t} tokens is not a positive multiple of the expert tile's {ROWS} rows")
    if e_n < TOP_K:
        fail(f"{e_n} experts are fewer than the top-{TOP_K} each token picks")
    if tuple(bias.shape) != (e_n,):
        fail(f"bias {tuple(bias.shape)} must be ({e_n},), one per expert")
    if not len(w_gate) == len(w_up) == len(w_down) == e_n:
        fail(f"{len(w_gate)} gate, {len(w_up)} up and {len(w_down)} down weights for {e_n} experts")
    d, f = x.shape[1], (w_gate[0].shape[-1] if w_gate[0].shape else None)
    for name, ws, want in (("w_gate", w_gate, (d, f)), ("w_up", w_up, (d, f)), ("w_down", w_down, (f, d))):
        for e, w in enumerate(ws):
            if tuple(w.shape) != want:
                fail(f"{name}[{e}] has shape {tuple(w.shape)}; expected {want} (D={d}, F={f} from w_gate[0])")


def moe_router(x, w_router, bias, w_gate, w_up, w_down):
    """``x`` (T, D) f16, ``w_router`` (D, E) f16, ``bias`` (E,) f32; ``w_gate``, ``w_up`` (E lists of
    (D, F) f16) and ``w_down`` (E of (F, D) f16): (the layer's output (T, D) f32, tokens per expert (E,) i32)."""
    _check(x, w_router, bias, w_gate, w_up, w_down)
    t, d = x.shape
    e_n, k = w_router.shape[1], TOP_K
    with pj.tile(cube=(32, 64, 16)), jax.named_scope("Router"):
        logits = O.matmul(x, w_router)                                            # (T, E) f32
    with pj.tile(vec=(16, e_n)), jax.named_scope("Route"):
        scores = O.sigmoid(logits)
        _, choice = O.topk(scores + bias, k)                                      # (T, K) expert ids
    with pj.tile(vec=(16, k, e_n)), jax.named_scope("Route"):
        onehot = O.cast(O.eq(choice[:, :, None], np.arange(e_n, dtype=np.int32)), jnp.float32)   # (T, K, E)
        weight = O.sum(onehot * scores[:, None, :], axis=-1)                     # (T, K)
    with pj.tile(vec=(16, k)), jax.named_scope("Route"):
        weight = weight / O.sum(weight, axis=-1, keepdims=True) * ROUTED_SCALING
    with pj.tile(vec=(16, e_n)), jax.named_scope("Route"):
        flat = O.reshape(onehot, (t * k, e_n))                                   # (token, choice) -> expert
        counts = O.sum(flat, axis=0)
        before = O.cumsum(flat, axis=0) - flat                                   # earlier rows of that expert
        slot = O.cast(O.sum(flat * (before + np.arange(e_n, dtype=np.float32) * t), axis=-1), jnp.int32)
    with pj.tile(vec=(t // ROWS, e_n)), jax.named_scope("Route"):
        starts = np.arange(0, t, ROWS, dtype=np.float32)[:, None]                # ceil(count / ROWS) tiles:
        tiles = O.cast(O.sum(O.cast(starts < counts, jnp.float32), axis=0), jnp.int32)   # the starts below count
        counts = O.cast(counts, jnp.int32)
    with pj.tile(vec=(16, d)), jax.named_scope("Dispatch"):
        rows = O.gather(x, np.arange(t * k, dtype=np.int32) // k)
        grouped = O.scatter_update(jnp.zeros((e_n * t, d), x.dtype), slot, rows)
        out = jnp.zeros((e_n * t, d), jnp.float32)

    with pj.tile(vec=(1,)), jax.named_scope("Count"):
        bounds = [tiles[e] for e in range(e_n)]                                  # read by the host below

    for e in range(e_n):
        def tile(r, out, e=e):
            with pj.tile(vec=(ROWS,)), jax.named_scope("Gather"):
                idx = np.arange(ROWS, dtype=np.int32) + (e * t + r * ROWS)
            with pj.tile(vec=(ROWS, d)), jax.named_scope("Gather"):
                xt = O.gather(grouped, idx)
            with pj.tile(cube=(ROWS, 64, 64)), jax.named_scope("ExpertFFN"):
                gate, up = O.matmul(xt, w_gate[e]), O.matmul(xt, w_up[e])
            with pj.tile(vec=(ROWS, 64)), jax.named_scope("ExpertFFN"):
                h = O.cast(O.silu(gate) * up, x.dtype)
            with pj.tile(cube=(ROWS, 64, 64)), jax.named_scope("ExpertFFN"):
                y = O.matmul(h, w_down[e])
            with pj.tile(vec=(ROWS, d)), jax.named_scope("Scatter"):
                return O.scatter_update(out, idx, y)

        out = jax.lax.fori_loop(0, bounds[e], tile, out)                         # only the tiles expert e needs

    with pj.tile(vec=(16, k, d)), jax.named_scope("Combine"):
        picked = O.reshape(O.gather(out, slot), (t, k, d))
        return O.sum(picked * weight[:, :, None], axis=1), counts


def reference(x, w_router, bias, w_gate, w_up, w_down):
    """The same layer without grouping: every expert on every token, masked by the routing (NumPy
    routing, JAX matmuls in f32 from the f16 operands; ``h`` rounded to f16 like the kernel)."""
    logits = np.asarray(jnp.dot(x, w_router, preferred_element_type=jnp.float32))
    scores = 1.0 / (1.0 + np.exp(-logits))
    choice = np.argsort(-(scores + bias), axis=-1, kind="stable")[:, :TOP_K]
    chosen = np.zeros_like(scores, dtype=bool)
    np.put_along_axis(chosen, choice, True, axis=-1)
    weight = np.where(chosen, scores, 0.0)
    weight = weight / weight.sum(-1, keepdims=True) * ROUTED_SCALING            # (T, E), 0 where not chosen
    out = np.zeros(x.shape, np.float32)
    for e in range(w_router.shape[1]):
        gate = jnp.dot(x, w_gate[e], preferred_element_type=jnp.float32)
        up = jnp.dot(x, w_up[e], preferred_element_type=jnp.float32)
        h = (jax.nn.silu(gate) * up).astype(x.dtype)
        out += weight[:, e:e + 1] * np.asarray(jnp.dot(h, w_down[e], preferred_element_type=jnp.float32))
    return out, chosen.sum(0).astype(np.int32)


def inputs(seed=0, bias=None):
    """Random f16 activations and weights at the example's shapes; ``bias`` (E,) steers the routing."""
    rng = np.random.default_rng(seed)

    def f16(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    return (f16(TOKENS, HIDDEN), f16(HIDDEN, EXPERTS, scale=0.3),
            np.zeros(EXPERTS, np.float32) if bias is None else np.asarray(bias, np.float32),
            [f16(HIDDEN, FFN, scale=0.1) for _ in range(EXPERTS)],
            [f16(HIDDEN, FFN, scale=0.1) for _ in range(EXPERTS)],
            [f16(FFN, HIDDEN, scale=0.1) for _ in range(EXPERTS)])


def routing_bias(favour=(), avoid=()):
    """A bias that puts experts ``favour`` in every token's top-k and keeps ``avoid`` out of all."""
    bias = np.zeros(EXPERTS, np.float32)
    bias[list(favour)] = 4.0            # sigmoid scores lie in (0, 1)
    bias[list(avoid)] = -4.0
    return bias


ROUTINGS = {
    "learned": routing_bias(),
    "expert 0 takes all, expert 3 none": routing_bias(favour=[0], avoid=[3]),
    "experts 6 and 7 only": routing_bias(favour=[6, 7]),
}


def tasks_per_label(trace) -> dict[str, int]:
    return dict(collections.Counter(r.title for r in trace.records))


def main():
    kernel = pj.kernel(moe_router)
    base = inputs()
    compiled = kernel.lower(*base).compile()
    for name, bias in ROUTINGS.items():
        args = (*base[:2], bias, *base[3:])
        (out, counts), trace = compiled.run(*args)
        want, want_counts = reference(*args)
        err = float(np.max(np.abs(out - want) / (np.abs(want) + 1)))
        tiles = int(np.sum(-(-counts // ROWS)))
        labels = tasks_per_label(trace)
        print(f"{name:36s} counts {counts.tolist()} (reference {'agrees' if np.array_equal(counts, want_counts) else 'DIFFERS'})"
              f", {tiles} expert tiles, error {err:.1e}, {len(trace.records)} tasks (ExpertFFN {labels['ExpertFFN']}), "
              f"makespan {trace.profile().makespan_us:.1f} us")
    print(f"compiles: {kernel.compiles}")


if __name__ == "__main__":
    main()
