"""The Block graph as a picture's data: kernel inputs, block calls and outputs as nodes, the GM
tensors between them as edges (what the report draws)."""
from __future__ import annotations

import math

from .._jax import Literal, Var
from ..errors import PtoArgumentError
from . import ir
from .walk import control_sources


def desc(aval) -> str:
    """A tensor as a node or edge names it: ``f32[64, 32]``."""
    return f"{aval.dtype.name}{list(aval.shape)}"


def nbytes(aval) -> int:
    return int(math.prod(aval.shape)) * aval.dtype.itemsize


def add_outputs(nodes: list, outvars, sources: dict, add_edge) -> None:
    """An output node per jaxpr result, with an edge from each node ``sources`` says it comes from."""
    for i, v in enumerate(outvars):
        nid = len(nodes)
        nodes.append({"id": nid, "kind": "output", "title": f"output {i}",
                      "detail": desc(v.aval) if isinstance(v, Var) else "constant"})
        for src in (sources.get(v, set()) if isinstance(v, Var) else set()):
            add_edge(src, nid, v.aval)


def call_sites(jaxpr) -> dict:
    """``id(eqn)`` -> place of each block call of a block-level jaxpr, in the order :func:`block_graph`
    makes their nodes: pre-order, a loop's or branch's body at the loop (a while's condition first)."""
    sites: dict = {}

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive is ir.block_call_p:
                sites[id(eqn)] = len(sites)
            elif eqn.primitive.name in ("scan", "while", "cond"):
                control_sources(eqn, [set()] * len(eqn.invars), lambda body, _: walk(body), lambda env, v: set())

    walk(jaxpr)
    return sites


def block_graph(lowering) -> dict:
    """The Block graph as nodes and GM edges: kernel inputs, block calls (programs, core kinds,
    instances), outputs; reshapes are followed through, block calls inside loops keep the loop."""
    nodes, edges = [], {}

    def add_edge(src, dst, aval):
        key = (src, dst)
        e = edges.setdefault(key, {"src": src, "dst": dst, "tensors": [], "bytes": 0})
        d = desc(aval)
        if d not in e["tensors"]:
            e["tensors"].append(d)
            e["bytes"] += nbytes(aval)

    closed = getattr(lowering, "block", None)
    if closed is None:
        raise PtoArgumentError(f"pj.report.block_graph: takes a Lowering (pj.lower(fn, *args)), not "
                               f"{type(lowering).__name__}")
    env: dict = {}
    for i, v in enumerate(closed.jaxpr.invars):
        nodes.append({"id": len(nodes), "kind": "input", "title": f"input {i}", "detail": desc(v.aval)})
        env[v] = {nodes[-1]["id"]}

    def srcs(env, v):
        return set() if isinstance(v, Literal) else env.get(v, set())

    def walk(jaxpr, env, loop):
        for eqn in jaxpr.eqns:
            ins = [srcs(env, v) for v in eqn.invars]
            name = eqn.primitive.name
            if eqn.primitive is ir.block_call_p:
                spec = eqn.params["spec"]
                progs = [p.program for p in spec.parts]
                parts = [{"program": p.program.name, "core": p.program.core, "grid": list(p.shape),
                          "tiles_per_block": p.tiles_per_block, "instances": p.instances} for p in spec.parts]
                label = progs[0].label
                nid = len(nodes)
                nodes.append({"id": nid, "kind": "block", "title": label or progs[0].name, "label": label,
                              "core": progs[0].core, "parts": parts, "loop": loop,
                              "instances": sum(p["instances"] for p in parts),
                              "detail": ", ".join(desc(v.aval) for v in eqn.outvars)})
                for v, s in zip(eqn.invars, ins):
                    for src in s:
                        add_edge(src, nid, v.aval)
                for v in eqn.outvars:
                    env[v] = {nid}
            elif name in ("scan", "while", "cond"):
                tag = f"{loop + ' / ' if loop else ''}{name}"
                outs = control_sources(eqn, ins, lambda body, sub: walk(body, sub, tag), srcs)
                env.update(zip(eqn.outvars, outs))
            else:                                   # reshape (a GM view) or scalar work on the host
                union = set().union(*ins) if ins else set()
                for v in eqn.outvars:
                    env[v] = set(union)

    walk(closed.jaxpr, env, "")
    add_outputs(nodes, closed.jaxpr.outvars, env, add_edge)
    return {"nodes": nodes, "edges": list(edges.values())}


__all__ = ["block_graph", "call_sites"]
