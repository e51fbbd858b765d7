"""The fusion view: the Tile level's ops (one tile grid per tensor op, before partition) and the block
each was merged into, as the partitioner decided.

The partition pass keeps no per-op record in the :class:`~ptojax.lowering.pipeline.Lowering`, so
:func:`fusion` runs the pass again on the lowering's own Tile level with a recorder that notes each
group of grids the partitioner turns into blocks (fallbacks included: row loops, splits of groups that
overfill a buffer). Its blocks are the Block level's block calls, in the same order.
"""
from __future__ import annotations

import jax

from .._jax import Literal, Var
from ..lowering import partition
from ..lowering.block_graph import add_outputs, desc, nbytes
from ..lowering.walk import control_sources


class _Recorder(partition._Partitioner):
    """The partitioner, noting per jaxpr the (group, blocks made) of its last plan attempt."""

    def __init__(self, memory, options):
        super().__init__(memory, options)
        self.plans: dict = {}

    def row_loops(self, jaxpr, plan):
        self.plans[id(jaxpr)] = []              # a new plan for this jaxpr (the first, or the fallback)
        return super().row_loops(jaxpr, plan)

    def blocks(self, jaxpr, group, split=True):
        made = super().blocks(jaxpr, group, split)
        self.plans[id(jaxpr)].append((list(group), made))
        return made


def _segments(group, made):
    """The member grids of each block in ``made`` (a group split into consecutive segments: each
    block's last member is the last grid writing one of its outputs)."""
    if len(made) == 1:
        return [list(group)]
    out, start = [], 0
    for _, _, outputs in made:
        outs = set(outputs)
        end = max(i for i, e in enumerate(group) if outs & set(e.outvars))
        out.append(list(group[start:end + 1]))
        start = end + 1
    return out


def fusion(lowering, memory, options) -> dict:
    """The ops before partition and the blocks after: ``{"nodes", "edges", "blocks"}``.

    ``nodes``: kernel inputs, one ``op`` node per tile grid (``op``, ``label``, ``core``, ``grid``, ``block``)
    and outputs; ``edges``: the tensors between them (``fused``: both ends in one block, the tile stays on
    chip); ``blocks``: per block call, its programs, core kind, label, the ops merged into it, instances and
    the GM bytes it reads and writes. ``memory`` and ``options`` are the ones the kernel was lowered with.
    """
    tile = lowering.tile
    recorder = _Recorder(memory, partition.Options.make(options))
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in tile.jaxpr.invars]
    jax.make_jaxpr(lambda *args: recorder.run(tile.jaxpr, tile.consts, args))(*avals)
    nodes, edges, blocks = [], {}, []

    def add_edge(src, dst, aval):
        fused = nodes[src]["kind"] == "op" and nodes[dst]["kind"] == "op" and nodes[src]["block"] == nodes[dst]["block"]
        e = edges.setdefault((src, dst), {"src": src, "dst": dst, "tensors": [], "bytes": 0, "fused": fused})
        if desc(aval) not in e["tensors"]:
            e["tensors"].append(desc(aval))
            e["bytes"] += nbytes(aval)

    def srcs(env, v):
        return set() if isinstance(v, Literal) else env.get(v, set())

    top: dict = {}
    for i, v in enumerate(tile.jaxpr.invars):
        nodes.append({"id": len(nodes), "kind": "input", "title": f"input {i}", "detail": desc(v.aval)})
        top[v] = {nodes[-1]["id"]}

    def block_of(env, members, made_block, loop):
        block, inputs, outputs = made_block
        b = len(blocks)
        progs = [p.program for p in block.parts]
        ids = []
        for eqn in members:
            spec = eqn.params["spec"]
            nid = len(nodes)
            nodes.append({"id": nid, "kind": "op", "op": spec.name, "label": spec.label, "title": spec.name,
                          "core": partition.CORE[spec.kind], "grid": [list(p.shape) for p in spec.parts],
                          "block": b, "loop": loop, "detail": ", ".join(desc(v.aval) for v in eqn.outvars)})
            for v in eqn.invars:
                for src in srcs(env, v):
                    add_edge(src, nid, v.aval)
            for v in eqn.outvars:
                env[v] = {nid}
            ids.append(nid)
        ins = list(dict.fromkeys(v for v in inputs if isinstance(v, Var)))
        blocks.append({"id": b, "label": progs[0].label, "core": progs[0].core,
                       "programs": list(dict.fromkeys(p.name for p in progs)),
                       "ops": [nodes[i]["op"] for i in ids], "op_ids": ids,
                       "instances": sum(p.instances for p in block.parts), "loop": loop,
                       "gm_in_bytes": sum(nbytes(v.aval) for v in ins), "gm_out_bytes": sum(nbytes(v.aval) for v in outputs),
                       "inputs": [desc(v.aval) for v in ins], "outputs": [desc(v.aval) for v in outputs],
                       "note": "; ".join(dict.fromkeys(p.note for p in progs if p.note))})

    def walk(jaxpr, env, loop):
        for group, made in recorder.plans.get(id(jaxpr), []):
            if made is not None:
                for members, made_block in zip(_segments(group, made), made):
                    block_of(env, members, made_block, loop)
                continue
            eqn = group[0]
            ins = [srcs(env, v) for v in eqn.invars]
            name = eqn.primitive.name
            if name not in ("scan", "while", "cond"):       # a reshape (a GM view) or scalar work on the host
                union = set().union(*ins) if ins else set()
                env.update((v, set(union)) for v in eqn.outvars)
                continue
            tag = f"{loop + ' / ' if loop else ''}{name}"
            outs = control_sources(eqn, ins, lambda body, sub: walk(body, sub, tag), srcs)
            env.update(zip(eqn.outvars, outs))

    walk(tile.jaxpr, top, "")
    add_outputs(nodes, tile.jaxpr.outvars, top, add_edge)
    return {"nodes": nodes, "edges": list(edges.values()), "blocks": blocks}


__all__ = ["fusion"]
