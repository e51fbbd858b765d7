"""A lowered kernel compiled for Ascend: PTO-AS text for every block program, and a sequential run.

``compile_kernel(lowering, memory)`` generates each block program's kernel, prints it, parses the
text back and verifies it — the parsed kernels are what runs, so what is emitted is what executes.
``run_sequential`` executes the Block graph on one simulated core, block instance after block
instance in program order: the reference the MPMD runtime's schedules are checked against.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .._jax import Literal
from ..lowering import ir
from ..lowering.memory import ASCEND_CORE, CoreMemory
from ..lowering.pipeline import Lowering
from ..lowering.walk import body_of
from . import asm, isa
from .codegen import codegen
from .interpreter import Core, run


@dataclasses.dataclass(frozen=True, eq=False)
class AscendKernel:
    """PTO-AS kernels of a lowering: ``kernels[(program name, part grid)]`` parsed from ``text``."""

    lowering: Lowering
    memory: CoreMemory
    kernels: dict
    text: str

    def kernel(self, part) -> asm.Kernel:
        return self.kernels[(part.program.name, tuple(part.shape))]


def _block_calls(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive is ir.block_call_p:
            yield eqn
        for key, value in eqn.params.items():
            if key.endswith("jaxpr") and value is not None:
                yield from _block_calls(body_of(value)[0])
            elif key == "branches":
                for branch in value:
                    yield from _block_calls(body_of(branch)[0])


def compile_kernel(lowering: Lowering, memory: CoreMemory = ASCEND_CORE) -> AscendKernel:
    kernels, texts = {}, []
    pids = {id(p): i for i, p in enumerate(lowering.programs)}
    for eqn in _block_calls(lowering.block.jaxpr):
        for part in eqn.params["spec"].parts:
            key = (part.program.name, tuple(part.shape))
            if key in kernels:
                continue
            text = asm.emit(codegen(part.program, part.shape, memory, pids[id(part.program)]))
            (parsed,) = asm.parse(text)
            isa.verify(parsed)
            kernels[key] = parsed
            texts.append(text)
    return AscendKernel(lowering, memory, kernels, "\n".join(texts))


def run_sequential(compiled: AscendKernel, *args):
    """The kernel's outputs, every block instance interpreted from its parsed PTO-AS text."""
    flat, tree = jax.tree.flatten(args)
    if tree != compiled.lowering.in_tree:
        raise ValueError(f"pto run: arguments {tree} do not match the compiled signature {compiled.lowering.in_tree}")
    core = Core(compiled.memory)
    block = compiled.lowering.block
    outs = _evaluate(compiled, core, block.jaxpr, [np.asarray(c) for c in block.consts], [np.asarray(x) for x in flat])
    return jax.tree.unflatten(compiled.lowering.out_tree, outs)


def _evaluate(compiled, core, jaxpr, consts, args):
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    read = lambda v: np.asarray(v.val) if isinstance(v, Literal) else env[v]  # noqa: E731
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        if eqn.primitive is ir.block_call_p:
            outs = _block(compiled, core, eqn.params["spec"], invals)
        elif eqn.primitive.name in ("scan", "while", "cond"):
            outs = _control(compiled, core, eqn, invals)
        else:
            out = eqn.primitive.bind(*invals, **eqn.params)
            outs = [np.asarray(o) for o in (out if eqn.primitive.multiple_results else [out])]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _block(compiled, core, spec, inputs):
    avals = [v.aval for v in spec.parts[0].body.jaxpr.outvars]
    outputs = [np.array(inputs[o.alias], copy=True) if o.alias is not None else np.full(a.shape, o.fill, a.dtype)
               for o, a in zip(spec.outputs, avals)]
    for part in spec.parts:
        kernel = compiled.kernel(part)
        for index in np.ndindex(*part.shape):
            run(kernel, index, [*inputs, *outputs], core)
    return outputs


def _control(compiled, core, eqn, invals):
    p = eqn.params
    name = eqn.primitive.name
    if name == "scan":
        body, consts = body_of(p["jaxpr"])
        nc, ncarry = p["num_consts"], p["num_carry"]
        fixed, carry, xs = invals[:nc], list(invals[nc:nc + ncarry]), invals[nc + ncarry:]
        ys = []
        steps = range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])
        for t in steps:
            out = _evaluate(compiled, core, body, [np.asarray(c) for c in consts], [*fixed, *carry, *(x[t] for x in xs)])
            carry, y = out[:ncarry], out[ncarry:]
            ys.append(y)
        if p["reverse"]:
            ys.reverse()
        stacked = [np.stack(col) for col in zip(*ys)] if ys and ys[0] else [np.zeros((0,) + v.aval.shape[1:], v.aval.dtype)
                                                                           for v in eqn.outvars[ncarry:]]
        return [*carry, *stacked]
    if name == "while":
        cond, cconsts = body_of(p["cond_jaxpr"])
        body, bconsts = body_of(p["body_jaxpr"])
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cfix, bfix, carry = invals[:cn], invals[cn:cn + bn], list(invals[cn + bn:])
        while bool(_evaluate(compiled, core, cond, list(cconsts), [*cfix, *carry])[0]):
            carry = _evaluate(compiled, core, body, list(bconsts), [*bfix, *carry])
        return carry
    index, *args = invals
    branches = p["branches"]
    branch, consts = body_of(branches[int(np.clip(index, 0, len(branches) - 1))])
    return _evaluate(compiled, core, branch, list(consts), args)


class AscendBackend:
    """Runs block instances on the MPMD runtime: the parsed kernels, the interpreter and the cost model.

    (The runtime's Backend protocol, met structurally: the Ascend layer does not import the runtime.)
    """

    def __init__(self, compiled: AscendKernel, target):
        from .cost import kernel_time

        self.compiled, self.target = compiled, target
        self._cost = {key: kernel_time(kernel, target) for key, kernel in compiled.kernels.items()}

    def task(self, part, tiles, arrays):
        key = (part.program.name, tuple(part.shape))
        kernel, cost = self.compiled.kernels[key], self._cost[key]

        def work(core):
            for index in tiles:
                run(kernel, index, arrays, core)

        return work, cost.seconds * len(tiles), int(cost.bytes_in + cost.bytes_out) * len(tiles)

    def copy_cost(self, nbytes: int) -> float:
        return self.target.gm_read_latency / self.target.clock_hz + nbytes / self.target.hbm_bytes_per_s

    def worker(self) -> Core:
        return Core(self.compiled.memory)
