"""Fusion as PyPTO partitions: row kernels written as a user would, against the same math fused by hand.

Per kernel it prints the programs and tasks of the automatic partition, its predicted makespan on the
simulated A3 (``profile(compute=False)``) against the same math written by hand with ``pj.tiles`` as
one program per row block, and the makespan with a ``vec`` tile half the row wide (the row then loops
inside the program) against the whole-row tile; then a matmul with a row epilogue and a batched
M = 1 matmul against its merged form; then greedy decoding's ``argmax`` over vocabulary rows against
``jnp.max`` of the same rows (the row's extremum, then the first index holding it: two passes); then a
RoPE of interleaved pairs (``x.reshape(..., d / 2, 2)``, written back by ``jnp.stack``) against the same
rotation of the half-split layout; then a ``cumsum`` along rows longer than one tile scans against a
``sum`` of the same rows (a loop over the row's column chunks per row block; a few very long rows stage).

Run: ``python benchmarks/fusion.py [--rows 48] [--cols 1024] [--block 8]``; the exit status is 1 when
a target fails: automatic <= 1.10x hand-fused, half-row tile <= 1.25x whole-row, batched M = 1 matmul
<= 1.10x its merged form, argmax <= 2.0x max, interleaved RoPE <= 1.10x half-split, a long-row cumsum over
48 rows or more <= 3.0x a sum. Ratios come from one run of the cost model.
"""
from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj

FUSED_TARGET, HALF_ROW_TARGET, MERGED_TARGET, ARGMAX_TARGET, ROPE_TARGET = 1.10, 1.25, 1.10, 2.0, 1.10
SCAN_TARGET, SCAN_ROWS = 3.0, 48     # a long-row cumsum against a sum, where there are this many rows
EPS = 1e-5


# ------------------------------------------------------------------------------ as a user writes them
def softmax_nn(x):
    return jax.nn.softmax(x, axis=-1)


def softmax(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def layer_norm(x, gamma, beta):
    centred = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(centred * centred, axis=-1, keepdims=True)
    return centred * jax.lax.rsqrt(var + EPS) * gamma + beta


def rms_norm(x, weight):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS) * weight


def logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1)


ROW_KERNELS = {"jax.nn.softmax": softmax_nn, "softmax (max/exp/sum)": softmax, "layer norm": layer_norm,
               "RMS norm": rms_norm, "logsumexp": logsumexp}


def tiled(fn, vec):
    """``fn`` with every op under ``pj.tile(vec=vec)``."""
    def kernel(*args):
        with pj.tile(vec=vec):
            return fn(*args)
    kernel.__name__ = fn.__name__
    return kernel


def row_args(name, rows, cols, dtype=np.float32, seed=0):
    """Inputs of row kernel ``name``: x, and the norms' per-column weights."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    weights = {"layer norm": 2, "RMS norm": 1}.get(name, 0)
    return [x] + [(1.0 + 0.1 * rng.standard_normal(cols)).astype(dtype) for _ in range(weights)]


# ------------------------------------------------------------------------------------ fused by hand
def _row_grid(body, x, block, out_cols=None):
    rows, cols = x.shape[0], x.shape[1]
    out = jax.ShapeDtypeStruct((rows, out_cols or cols), x.dtype)
    return lambda *ins: pj.tiles.grid(body, (rows // block, 1), list(ins), out, name="hand")


def hand_fused(name, args, block):
    """``name``'s math as one hand-written ``pj.tiles`` program per row block of ``block`` whole rows."""
    x = args[0]
    n = x.shape[1]
    w = pj.tiles.window((block, n))
    col = pj.tiles.window((n,), index=(1,))
    T = pj.tiles

    def load(ins, index):
        return T.load(ins[0], index, w)

    def softmax_body(index, ins, outs):
        t = load(ins, index)
        e = T.exp(T.sub(t, T.rowmax(t)))
        return [T.store(outs[0], T.div(e, T.rowsum(e)), index, w)]

    # The norms load x again for the output: a row reduction's tmp tile, its source and x would be
    # three 64 KiB tiles at 16 x 1024 f32, more than the UB holds.
    def layer_norm_body(index, ins, outs):
        t = load(ins, index)
        mean = T.mul(T.rowsum(t), 1.0 / n)
        centred = T.sub(t, mean)
        inv = T.rsqrt(T.add(T.mul(T.rowsum(T.mul(centred, centred)), 1.0 / n), EPS))
        y = T.mul(T.mul(T.sub(load(ins, index), mean), inv), T.load(ins[1], index, col))
        y = T.add(y, T.load(ins[2], index, col))
        return [T.store(outs[0], y, index, w)]

    def rms_norm_body(index, ins, outs):
        t = load(ins, index)
        inv = T.rsqrt(T.add(T.mul(T.rowsum(T.mul(t, t)), 1.0 / n), EPS))
        return [T.store(outs[0], T.mul(T.mul(load(ins, index), inv), T.load(ins[1], index, col)), index, w)]

    def logsumexp_body(index, ins, outs):
        t = load(ins, index)
        m = T.rowmax(t)
        y = T.add(T.log(T.rowsum(T.exp(T.sub(t, m)))), m)
        return [T.store(outs[0], y, index, pj.tiles.window((block, 1)))]

    if name == "logsumexp":
        grid = _row_grid(logsumexp_body, x, block, out_cols=1)
        return lambda x: grid(x).reshape(x.shape[0])
    body = {"jax.nn.softmax": softmax_body, "softmax (max/exp/sum)": softmax_body, "layer norm": layer_norm_body,
            "RMS norm": rms_norm_body}[name]
    return _row_grid(body, x, block)


# ------------------------------------------------------------------------------------------ matmuls
def matmul_epilogue(x, w, bias):
    """A linear layer's row epilogue: bias, ReLU, a row softmax of the scores."""
    with pj.tile(cube=(32, 128, 128), vec=(32, 128)):
        return jax.nn.softmax(jax.nn.relu(pj.ops.matmul(x, w) + bias) * 0.5, axis=-1)


def matmul_epilogue_hand(x, w, bias):
    """The same with the epilogue written as one ``pj.tiles`` program per 32-row output tile."""
    with pj.tile(cube=(32, 128, 128)):
        y = pj.ops.matmul(x, w)
    n = y.shape[1]
    win, col = pj.tiles.window((32, n)), pj.tiles.window((n,), index=(1,))
    T = pj.tiles

    def body(index, ins, outs):
        s = T.mul(T.relu(T.add(T.load(ins[0], index, win), T.load(ins[1], index, col))), 0.5)
        e = T.exp(T.sub(s, T.rowmax(s)))
        return [T.store(outs[0], T.div(e, T.rowsum(e)), index, win)]

    return T.grid(body, (y.shape[0] // 32, 1), [y, bias], jax.ShapeDtypeStruct(y.shape, y.dtype), name="epilogue")


def batched_m1(a, w):
    """A batched matmul whose M (1) is below the cube tile's m, its right operand shared."""
    with pj.tile(cube=(16, 256, 128)):
        return pj.ops.matmul(a, w)


def batched_m1_merged(a, w):
    """The same written by hand as one matmul of M = batch."""
    with pj.tile(cube=(16, 256, 128)):
        return pj.ops.matmul(a.reshape(a.shape[0], a.shape[-1]), w).reshape(a.shape[0], 1, w.shape[-1])


# --------------------------------------------------------------------------------------------- RoPE
def rope_interleaved(x, cos, sin):
    """RoPE on pairs ``(x[2i], x[2i+1])`` (DeepSeek's MLA layout), rotated in float32."""
    pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return jnp.stack([a * cos - b * sin, a * sin + b * cos], -1).reshape(x.shape).astype(x.dtype)


def rope_half_split(x, cos, sin):
    """The same rotation on the halves ``(x[i], x[i + d/2])``."""
    half = x.shape[-1] // 2
    a, b = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], -1).astype(x.dtype)


# ---------------------------------------------------------------------------------------- measuring
def measure(fn, args):
    """(vector programs, all programs, tasks, makespan us) of ``fn`` on the simulated A3."""
    compiled = pj.kernel(fn).lower(*args).compile()
    prof = compiled.profile(*args, compute=False)
    programs = compiled.lowering.programs
    return sum(p.core == "AIV" for p in programs), len(programs), prof.tasks, prof.makespan_us


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--block", type=int, default=8, help="rows per tile")
    ap.add_argument("--vocab", type=int, default=128256, help="columns of the argmax rows")
    a = ap.parse_args(argv)
    whole, half = (a.block, a.cols), (a.block, a.cols // 2)
    blocks = -(-a.rows // a.block)
    failed = []
    print(f"row kernels on f32[{a.rows},{a.cols}], vec={whole} (whole rows) and vec={half} (half rows); "
          f"{blocks} row blocks; makespans in us on the a3 model\n")
    print("| kernel | programs | tasks | automatic | hand-fused | ratio | half-row programs | tasks | half-row | "
          "half / whole |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, fn in ROW_KERNELS.items():
        args = row_args(name, a.rows, a.cols)
        _, programs, tasks, auto = measure(tiled(fn, whole), args)
        *_, hand = measure(hand_fused(name, args, a.block), args)
        _, half_programs, half_tasks, long = measure(tiled(fn, half), args)
        fused, rows = auto / hand, long / auto
        print(f"| {name} | {programs} | {tasks} | {auto:.1f} | {hand:.1f} | {fused:.2f} | {half_programs} | "
              f"{half_tasks} | {long:.1f} | {rows:.2f} |")
        if fused > FUSED_TARGET:
            failed.append(f"{name}: automatic {fused:.2f}x hand-fused (target <= {FUSED_TARGET})")
        if rows > HALF_ROW_TARGET:
            failed.append(f"{name}: half-row tile {rows:.2f}x whole-row (target <= {HALF_ROW_TARGET})")

    rng = np.random.default_rng(1)
    x = rng.standard_normal((96, 256)).astype(np.float16)
    w = rng.standard_normal((256, 128)).astype(np.float16)
    bias = rng.standard_normal(128).astype(np.float32)
    vec, programs, tasks, auto = measure(matmul_epilogue, [x, w, bias])
    *_, hand = measure(matmul_epilogue_hand, [x, w, bias])
    print(f"\nmatmul (96x256 @ 256x128 fp16, cube 32x128x128) + bias, ReLU, row softmax: {programs} programs "
          f"({vec} vector), {tasks} tasks, {auto:.1f} us; epilogue fused by hand {hand:.1f} us ({auto / hand:.2f}x)")
    if auto / hand > FUSED_TARGET:
        failed.append(f"matmul epilogue: automatic {auto / hand:.2f}x hand-fused (target <= {FUSED_TARGET})")

    a3 = rng.standard_normal((32, 1, 1024)).astype(np.float16)
    w3 = rng.standard_normal((1024, 128)).astype(np.float16)
    _, _, tasks, auto = measure(batched_m1, [a3, w3])
    _, _, merged_tasks, merged = measure(batched_m1_merged, [a3, w3])
    print(f"batched (32,1,1024) @ (1024,128) fp16, cube 16x256x128: {tasks} tasks, {auto:.1f} us; merged by hand "
          f"{merged_tasks} tasks, {merged:.1f} us ({auto / merged:.2f}x)")
    if auto / merged > MERGED_TARGET:
        failed.append(f"batched M=1 matmul: {auto / merged:.2f}x its merged form (target <= {MERGED_TARGET})")

    print(f"\nargmax over f32[rows,{a.vocab}] logits against jnp.max of the same rows:")
    for rows in (1, 4, 16, 128):
        logits = [jax.ShapeDtypeStruct((rows, a.vocab), jnp.float32)]
        _, _, tasks, arg = measure(lambda v: jnp.argmax(v, -1), logits)
        *_, top = measure(lambda v: jnp.max(v, -1), logits)
        print(f"  {rows} rows: argmax {tasks} tasks, {arg:.1f} us; max {top:.1f} us ({arg / top:.2f}x)")
        if arg / top > ARGMAX_TARGET:
            failed.append(f"argmax over {rows} rows: {arg / top:.2f}x max (target <= {ARGMAX_TARGET})")
    print("\nRoPE of interleaved pairs against the half-split layout (the same rotation):")
    for tokens, heads, dim, dtype in ((77, 6, 128, np.float32), (512, 8, 64, jnp.bfloat16), (33, 16, 128, np.float16)):
        args = [jax.ShapeDtypeStruct((tokens, heads, dim), dtype)] + [
            jax.ShapeDtypeStruct((tokens, heads, dim // 2), jnp.float32)] * 2
        _, _, tasks, pairs = measure(rope_interleaved, args)
        _, _, split_tasks, split = measure(rope_half_split, args)
        print(f"  {np.dtype(dtype).name}[{tokens},{heads},{dim}]: interleaved {tasks} tasks, {pairs:.1f} us; "
              f"half-split {split_tasks} tasks, {split:.1f} us ({pairs / split:.2f}x)")
        if pairs / split > ROPE_TARGET:
            failed.append(f"interleaved RoPE {np.dtype(dtype).name}[{tokens},{heads},{dim}]: {pairs / split:.2f}x "
                          f"half-split (target <= {ROPE_TARGET})")
    print("\ncumsum along long f32 rows against jnp.sum of the same rows:")
    for shape in ((256, 4096), (64, 16384), (1024, 8192), (16, 32768), (4, 128256)):
        rows = [jax.ShapeDtypeStruct(shape, jnp.float32)]
        _, _, tasks, scan = measure(lambda v: jnp.cumsum(v, -1), rows)
        _, _, sum_tasks, total = measure(lambda v: jnp.sum(v, -1), rows)
        print(f"  {list(shape)}: cumsum {tasks} tasks, {scan:.1f} us; sum {sum_tasks} tasks, {total:.1f} us "
              f"({scan / total:.2f}x)")
        if shape[0] >= SCAN_ROWS and scan / total > SCAN_TARGET:
            failed.append(f"cumsum of {list(shape)}: {scan / total:.2f}x sum (target <= {SCAN_TARGET})")
    if failed:
        print("\nFAIL: " + "; ".join(failed))
        return 1
    print("\nall targets met")
    return 0


if __name__ == "__main__":
    jax.config.update("jax_platforms", "cpu")
    sys.exit(main())
