"""Re-tracing jaxprs: evaluate a jaxpr eqn by eqn under a new trace, keeping each eqn's name stack
and source traceback (a later pass's error names the user's line).

Every pass is such a re-trace (``jax.make_jaxpr`` of an interpreter), so its output is again a jaxpr
JAX can evaluate. Name stacks carry tile configurations and labels (see ``scope.py``); re-entering
them as ``jax.named_scope`` keeps them on the eqns the pass emits.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Callable

import jax
import numpy as np
from jax import lax

from .._jax import ClosedJaxpr, Literal, Var, traced_at
from ..errors import PtoUnsupportedError
from .scope import components


def read(env: dict, v):
    return v.val if isinstance(v, Literal) else env[v]


@contextlib.contextmanager
def scopes(name_stack):
    """Re-enter the named scopes of ``name_stack`` (relative to the current one)."""
    with contextlib.ExitStack() as stack:
        for part in components(name_stack):
            stack.enter_context(jax.named_scope(part))
        yield


def interpret(jaxpr, consts, args, rule: Callable, prefix: str = ""):
    """Evaluate ``jaxpr``; ``rule(eqn, invals, stack)`` returns the eqn's outputs as a list.

    ``stack`` is the eqn's full name stack: ``prefix`` (the enclosing eqn's stack, for the body of a
    loop or call) joined with the eqn's own.
    """
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        invals = [read(env, v) for v in eqn.invars]
        own = str(eqn.source_info.name_stack)
        with scopes(own), traced_at(eqn.source_info.traceback):
            outs = rule(eqn, invals, "/".join(p for p in (prefix, own) if p))
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(env, v) for v in jaxpr.outvars]


def retrace(closed: ClosedJaxpr, rule: Callable) -> ClosedJaxpr:
    """A new closed jaxpr: ``closed`` interpreted with ``rule`` on abstract inputs of the same avals."""
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *args: interpret(closed.jaxpr, closed.consts, args, rule))(*avals)


def live(jaxpr, only=None):
    """``jaxpr`` without the eqns whose results nothing reads (a transpose that a matmul loads
    transposed instead; ``lambda x: (x.T, x + 1)[1]``'s), effects kept, or only those of the primitives
    named in ``only``; its inputs unchanged."""
    used = {v for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any(v in used for v in eqn.outvars) or (only is not None and eqn.primitive.name not in only):
            kept.append(eqn)
            used.update(v for v in eqn.invars if isinstance(v, Var))
    return jaxpr if len(kept) == len(jaxpr.eqns) else jaxpr.replace(eqns=kept[::-1])


class Memo:
    """``value -> data`` for the values of a trace, keyed by identity and holding each value weakly: an
    entry goes with its value, and a tracer with its trace, so a table kept across nested traces (a
    loop's body) holds none past its end (``jax.checking_leaks``). A value that cannot be weakly
    referenced (a Python number) is held."""

    def __init__(self):
        self._entries: dict = {}

    def __setitem__(self, value, data) -> None:
        key, entries = id(value), self._entries
        try:
            ref = weakref.ref(value, lambda _, key=key: entries.pop(key, None))
        except TypeError:
            ref = lambda value=value: value         # noqa: E731
        entries[key] = (ref, data)

    def get(self, value, default=None):
        entry = self._entries.get(id(value))
        return entry[1] if entry is not None and entry[0]() is value else default

    def __contains__(self, value) -> bool:
        return self.get(value, self) is not self

    def clear(self) -> None:
        self._entries.clear()


def is_const(x) -> bool:
    """Whether a value is known at trace time (not a tracer)."""
    return not isinstance(x, jax.core.Tracer)


CONTROL = ("scan", "while", "cond")


def body_of(jaxpr):
    """A sub-jaxpr param (ClosedJaxpr or Jaxpr) as ``(jaxpr, consts)``."""
    return (jaxpr.jaxpr, jaxpr.consts) if isinstance(jaxpr, ClosedJaxpr) else (jaxpr, ())


def control_sources(eqn, ins, walk_body, srcs):
    """The sets each output of a ``scan``/``while``/``cond`` eqn derives from, given ``ins`` (one set per
    input): each body walked by ``walk_body(body, env)`` from its inputs' sets, a carried output joining
    its initial value; ``srcs(env, var)`` reads a body output's set. A ``while``'s condition is walked
    first (its block calls run before each trip); it makes no output."""
    p, name = eqn.params, eqn.primitive.name
    if name == "while":
        cond, nc = body_of(p["cond_jaxpr"])[0], p["cond_nconsts"]
        walk_body(cond, {v: set(s) for v, s in zip(cond.invars, ins[:nc] + ins[nc + p["body_nconsts"]:])})
    if name == "scan":
        bodies = [(body_of(p["jaxpr"])[0], ins)]
        carry_in = ins[p["num_consts"]:p["num_consts"] + p["num_carry"]]
    elif name == "while":
        bodies = [(body_of(p["body_jaxpr"])[0], ins[p["cond_nconsts"]:])]
        carry_in = ins[p["cond_nconsts"] + p["body_nconsts"]:]
    else:
        bodies = [(body_of(b)[0], ins[1:]) for b in p["branches"]]
        carry_in = [set() for _ in eqn.outvars]
    outs = [set(c) for c in carry_in] + [set() for _ in range(len(eqn.outvars) - len(carry_in))]
    for body, inner in bodies:
        env = {v: set(s) for v, s in zip(body.invars, inner)}
        walk_body(body, env)
        for j, v in enumerate(body.outvars[:len(eqn.outvars)]):
            outs[j] |= srcs(env, v)
    return outs


def by_rule(rule):
    """A body runner for :func:`control` that interprets each body eqn by eqn with ``rule``."""
    return lambda jaxpr, consts, args, stack: interpret(jaxpr, consts, args, rule, stack)


def control(eqn, invals, stack, run_body):
    """Re-emit a ``scan``/``while``/``cond`` eqn; ``run_body(jaxpr, consts, args, stack)`` re-traces
    each body."""
    p = eqn.params
    if eqn.primitive.name == "scan":
        body, consts = body_of(p["jaxpr"])
        nc, ncarry = p["num_consts"], p["num_carry"]
        fixed, init, xs = invals[:nc], invals[nc:nc + ncarry], invals[nc + ncarry:]

        def step(carry, x):
            out = run_body(body, consts, [*fixed, *carry, *x], stack)
            return out[:ncarry], out[ncarry:]

        carry, ys = lax.scan(step, list(init), list(xs), length=p["length"], reverse=p["reverse"], unroll=p["unroll"])
        return [*carry, *ys]
    if eqn.primitive.name == "while":
        cond, cconsts = body_of(p["cond_jaxpr"])
        body, bconsts = body_of(p["body_jaxpr"])
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cfix, bfix, init = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]

        def predicate(c):
            keep = run_body(cond, cconsts, [*cfix, *c], stack)[0]
            if np.shape(keep):                 # jax.vmap of a loop whose bound is batched: one per element
                raise PtoUnsupportedError(f"pto lowering: a while / fori_loop whose condition is {np.shape(keep)} "
                                          "values (a loop bound batched by jax.vmap); kernels take loops whose "
                                          "trip count is one scalar: loop to the largest bound and mask")
            return keep
        return lax.while_loop(predicate, lambda c: run_body(body, bconsts, [*bfix, *c], stack), list(init))
    index, *args = invals
    branches = [body_of(b) for b in p["branches"]]
    return lax.switch(index, [lambda *a, b=b: run_body(b[0], b[1], a, stack) for b in branches], *args)


def counted_loop(eqn):
    """The start value of a ``fori_loop``-shaped ``scan`` (an int32 counter from a literal first in
    the carry, stepped by one, no stacked inputs, forward), or None for any other loop."""
    p = eqn.params
    nc, ncarry = p["num_consts"], p["num_carry"]
    carry = eqn.invars[nc:nc + ncarry]
    if (ncarry < 1 or len(eqn.invars) != nc + ncarry or not isinstance(carry[0], Literal)
            or carry[0].aval.shape or p["reverse"] or not _steps_by_one(body_of(p["jaxpr"])[0], nc)):
        return None
    return int(np.asarray(carry[0].val))


def _steps_by_one(body, nc) -> bool:
    """Whether a scan body's first carry comes out as itself plus one (a ``fori_loop``'s counter)."""
    counter, out = body.invars[nc], body.outvars[0]
    step = next((e for e in body.eqns if out in e.outvars), None)
    if step is None or step.primitive.name not in ("add", "pto.add"):
        return False
    a, b = step.invars
    one = b if a is counter else a if b is counter else None
    return isinstance(one, Literal) and not np.shape(one.val) and int(np.asarray(one.val)) == 1
