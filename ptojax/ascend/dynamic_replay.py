"""A dynamic PTO-AS module (:mod:`~ptojax.ascend.dynamic`) replayed as a shape-polymorphic JAX function.

What ``jax.export`` of a ``backend="sim"`` kernel with a symbolic row count ``m`` inlines. The Block
graph's steps run in order on JAX arrays whose leading dim is ``m``; a function of the module with
the row tile ``T`` runs as the engine runs it, block by block, but with a symbolic number of blocks:
its row-carrying arguments are padded with zeros to ``ceil(m/T)·T`` rows and reshaped to one ``T``-row
slice per block, the function is walked once (:func:`~ptojax.ascend.replay_graph.call`, its other grid
axes batched) on a slice with the block's row index 0 and ``%dyn_m = T`` — the full-block path of the
text — and ``jax.vmap`` maps it over the blocks; the results are sliced back to ``m`` rows. The rows
past ``m`` of the last block are padding that never reaches a valid row: the module's functions
read and write the rows of their own block only (:mod:`~ptojax.ascend.dynamic` checks the windows),
and a function that writes an argument without the rows, reads an argument of the rows at computed
offsets (``load_scalar``: a block may need any row), or has no dynamic rows but touches an argument
that has them, is a :class:`PtoUnsupportedError` at export.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import PtoUnsupportedError
from ..lowering import ir
from .dynamic import SYMBOL, DynamicKernel
from .engine_parse import Arith, For, Function, If, Instr, Scalar, View
from .replay_graph import call


def _gm(x):
    """``x`` as a GM array: booleans as int8 (the text's ``i8`` pointers)."""
    x = jnp.asarray(x)
    return x.astype(jnp.int8) if x.dtype == jnp.bool_ else x


def _blocks(x, m, t: int):
    """``x`` ((m, ...)) zero-padded to ``ceil(m/t)·t`` rows, one flat ``t``-row slice per block."""
    nb = -(-m // t)
    pad = jnp.zeros((nb * t - m,) + x.shape[1:], x.dtype)
    return jnp.concatenate([x, pad]).reshape(nb, -1)


def _pointers(func: Function, used) -> set:
    """The pointer parameters of ``func`` behind the names ``used(stmt)`` gives (through its views)."""
    src, names = {}, set()

    def scan(body):
        for s in body:
            if isinstance(s, View):
                src[s.result] = s.src
            names.update(used(s))
            if isinstance(s, For):
                scan(s.body)
            elif isinstance(s, If):
                scan(s.then)
                scan(s.orelse)

    scan(func.body)
    params = {name for name, _ in func.params}
    found = set()
    for name in names:
        while name in src:
            name = src[name]
        if name in params:
            found.add(name)
    return found


def written(func: Function) -> set:
    """The pointer parameters ``func`` stores into (through its views)."""
    return _pointers(func, lambda s: s.outs if isinstance(s, Instr) else ())


def _indexed(func: Function) -> set:
    """The pointer parameters ``func`` reads element by element at computed offsets (``load_scalar``)."""
    return _pointers(func, lambda s: (s.src,) if isinstance(s, Scalar) and s.op == "load_scalar" else ())


def _uses_row_index(func: Function):
    """The first statement of ``func`` that computes with its block's row index ``%i0`` other than as a GM
    offset or through the valid rows (``%dyn_*``): an iota of the rows (``tci`` from ``i0 * T``), a
    loop bound, a branch; None where none does."""
    derived = {"%i0"}

    def scan(body):
        for s in body:
            if isinstance(s, Arith) and derived & set(s.operands):
                if not s.result.startswith("%dyn_"):
                    derived.add(s.result)
            elif (isinstance(s, Instr) and derived & set(s.ins) or isinstance(s, Scalar) and s.offset in derived
                  or isinstance(s, For) and derived & {s.lo, s.hi, s.step} or isinstance(s, If) and s.cond in derived):
                return s
            elif isinstance(s, (For, If)):
                found = scan(s.body) if isinstance(s, For) else scan(s.then) or scan(s.orelse)
                if found:
                    return found
        return None
    return scan(func.body)


def check_replayable(dk: DynamicKernel, name: str) -> None:
    """:class:`PtoUnsupportedError` where a function of kernel ``name``'s module cannot run for a
    symbolic row count: it touches an argument's rows without a row tile, or writes an argument
    without rows from blocks that would then not be independent."""
    for eqn in dk.calls():
        row = [dk._rows(v) for v in eqn.invars + eqn.outvars]
        for part in eqn.params["spec"].parts:
            fn = dk.names[(part.program.name, tuple(part.shape))]
            t, func = dk.rows[fn], dk.module.function(fn)
            if t is None:
                if any(row):
                    raise PtoUnsupportedError(f"pj.kernel '{name}': function '{fn}' reads or writes the rows of "
                                              f"argument {row.index(True)} without a row tile; it cannot run "
                                              "for a symbolic row count")
                continue
            pointers = [p for p, _ in func.params if p != SYMBOL]
            variables = eqn.invars + eqn.outvars
            read = [k for k, r in enumerate(row) if r and pointers[k] in _indexed(func)]
            if read:
                raise PtoUnsupportedError(f"pj.kernel '{name}': function '{fn}' reads argument {read[0]} "
                                          f"({dk.row_vars[variables[read[0]]]}*m rows) at computed offsets: a "
                                          "block may read any of its rows, not only its own, so it cannot run "
                                          "for a symbolic row count")
            scales = {dk.row_vars[v] for v in variables if dk._rows(v)}
            if scales != {dk.scales[fn]} or t % dk.scales[fn]:
                raise PtoUnsupportedError(f"pj.kernel '{name}': function '{fn}' tiles {dk.scales[fn]}*m rows by "
                                          f"{t} with arguments of {sorted(scales)}*m rows; the replay takes one "
                                          "row count per function, a multiple of its scale per block")
            shared = sorted(k for k, r in enumerate(row) if not r and pointers[k] in written(func))
            if shared:
                raise PtoUnsupportedError(f"pj.kernel '{name}': function '{fn}' writes argument {shared[0]}, which "
                                          f"has no rows: its blocks of {t} rows are not independent, so it cannot "
                                          "run for a symbolic row count")
    for fn, t in dk.rows.items():
        uses = _uses_row_index(dk.module.function(fn)) if t is not None else None
        if uses is not None:
            raise PtoUnsupportedError(f"pj.kernel '{name}': function '{fn}' computes with its block's row index "
                                      f"(line {uses.line}: {uses.text.strip()[:60]}), and the replay walks every "
                                      "block as the first, so it cannot run for a symbolic row count")


def polymorphic_function(dk: DynamicKernel, name: str):
    """``fn(*flat) -> flat outputs`` of kernel ``name``'s dynamic module: the flat arguments' row-carrying
    leading dim may be a ``jax.export`` symbolic dimension (:func:`check_replayable` first)."""
    check_replayable(dk, name)
    jaxpr = dk.lowering.block.jaxpr
    functions = {fn: dk.module.function(fn) for fn in dk.rows}

    def part_call(fn, part, args, row):
        """``args`` (flat GM arrays in the function's parameter order) after every block of ``part``."""
        t, func = dk.rows[fn], functions[fn]
        shapes = [a.shape for a in args]
        if t is None:
            gm = call(func, {k: a.reshape(-1) for k, a in enumerate(args)}, tuple(range(len(args))),
                      np.arange(int(np.prod(part.shape)), dtype=np.int64), {SYMBOL: 0})
            return [gm[k].reshape(s) for k, s in enumerate(shapes)]
        m = next(s[0] for s, r in zip(shapes, row) if r)
        keys = tuple(range(len(args)))
        points = np.arange(int(np.prod(part.shape[1:])), dtype=np.int64)     # row index 0, every other axis
        fixed = {k: a.reshape(-1) for k, (a, r) in enumerate(zip(args, row)) if not r}

        def block(*slices):
            gm = dict(fixed)
            gm.update({k: x for k, x in zip([k for k, r in enumerate(row) if r], slices)})
            out = call(func, gm, keys, points, {SYMBOL: t // dk.scales[fn]})     # k·m = t: a full block
            return [out[k] for k, r in enumerate(row) if r]

        blocked = jax.vmap(block)(*[_blocks(a, m, t) for a, r in zip(args, row) if r])
        rows = iter(b.reshape((-1,) + s[1:])[:m] for b, s in zip(blocked, [s for s, r in zip(shapes, row) if r]))
        return [next(rows) if r else a for a, r in zip(args, row)]

    def replay(*flat):
        rows = [x.shape[0] // dk.row_vars[v] for x, v in zip(flat, jaxpr.invars) if dk._rows(v)]
        m = rows[0] if rows else None
        env = dict(zip(jaxpr.invars, [_gm(x) for x in flat]))
        env.update(zip(jaxpr.constvars, [_gm(c) for c in dk.lowering.block.consts]))
        for eqn in jaxpr.eqns:
            inputs = [env[v] if not hasattr(v, "val") else _gm(v.val) for v in eqn.invars]
            if eqn.primitive is not ir.block_call_p:       # a reshape step (DynamicKernel.calls admits only these)
                env[eqn.outvars[0]] = inputs[0].reshape(dk.shape(eqn.outvars[0], m))
                continue
            spec = eqn.params["spec"]
            outputs = [inputs[o.alias] if o.alias is not None else
                       _gm(jnp.full(dk.shape(v, m), o.fill, v.aval.dtype))
                       for o, v in zip(spec.outputs, eqn.outvars)]
            args, row = inputs + outputs, [dk._rows(v) for v in eqn.invars + eqn.outvars]
            for part in spec.parts:
                args = part_call(dk.names[(part.program.name, tuple(part.shape))], part, args, row)
            env.update(zip(eqn.outvars, args[len(inputs):]))
        return [(env[v] if not hasattr(v, "val") else jnp.asarray(v.val)).astype(v.aval.dtype) for v in jaxpr.outvars]

    return replay


__all__ = ["check_replayable", "polymorphic_function"]
