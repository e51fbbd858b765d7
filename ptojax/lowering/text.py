"""Readable dumps of the Tensor, Tile and Block levels: one line per op, bodies indented under them."""
from __future__ import annotations

import numpy as np

from .._jax import Literal
from . import ir
from .scope import read
from .walk import body_of

_DTYPE = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "i8", "int32": "i32", "bool": "bool"}


class _Names:
    def __init__(self):
        self.names = {}

    def __call__(self, v) -> str:
        if isinstance(v, Literal):
            val = np.asarray(v.val)
            return str(val.item()) if val.ndim == 0 else f"const{list(val.shape)}"
        if v not in self.names:
            self.names[v] = f"%{len(self.names)}"
        return self.names[v]

    def typed(self, v) -> str:
        aval = v.aval
        dtype = _DTYPE.get(np.dtype(aval.dtype).name, np.dtype(aval.dtype).name)
        return f"{self(v)}:{dtype}[{','.join(map(str, aval.shape))}]"


def _param(value) -> str:
    if isinstance(value, np.dtype) or isinstance(value, type):
        return np.dtype(value).name
    return str(value)


def _params(eqn, skip=()) -> str:
    shown = {k: v for k, v in eqn.params.items() if k not in skip and not k.endswith("jaxpr") and k != "spec"}
    return ("[" + " ".join(f"{k}={_param(v)}" for k, v in shown.items()) + "]") if shown else ""


def _annotation(stack: str) -> str:
    config, label = read(stack)
    parts = []
    if config.vec:
        parts.append("vec=" + "x".join(map(str, config.vec)))
    if config.cube:
        parts.append("cube=" + "x".join(map(str, config.cube)))
    if label:
        parts.append(f"label={label}")
    return ("    # " + " ".join(parts)) if parts else ""


def _jaxpr_lines(jaxpr, names, indent, stack="", annotate=False, describe=None):
    pad = "  " * indent
    lines = []
    for eqn in jaxpr.eqns:
        own = str(eqn.source_info.name_stack)
        full = "/".join(p for p in (stack, own) if p)
        outs = ", ".join(names.typed(v) for v in eqn.outvars)
        ins = ", ".join(names(v) for v in eqn.invars)
        head = f"{pad}{outs} = {eqn.primitive.name}{_params(eqn)}({ins})"
        if describe and "spec" in eqn.params:
            head = f"{pad}{outs} = {describe(eqn.params['spec'])}({ins})"
        lines.append(head + (_annotation(full) if annotate else ""))
        for key, value in eqn.params.items():
            if key.endswith("jaxpr") and value is not None:
                sub, _ = body_of(value)
                lines.append(f"{pad}  {key}({', '.join(names.typed(v) for v in sub.invars)}):")
                lines += _jaxpr_lines(sub, names, indent + 2, full, annotate, describe)
                lines.append(f"{pad}    return {', '.join(names(v) for v in sub.outvars)}")
        if "spec" in eqn.params and describe is _describe_grid:
            spec = eqn.params["spec"]
            for k, part in enumerate(spec.parts):
                body = part.body.jaxpr
                n = len(part.shape)
                index = ", ".join(names(v) for v in body.invars[:n])
                rest = ", ".join(names.typed(v) for v in body.invars[n:])
                lines.append(f"{pad}  part {k}: grid {_shape(part.shape)} index ({index}) buffers ({rest}):")
                lines += _jaxpr_lines(body, names, indent + 2)
                lines.append(f"{pad}    return {', '.join(names(v) for v in body.outvars)}")
    return lines


def _shape(shape):
    return "x".join(map(str, shape)) or "1"


def _describe_grid(spec: ir.Grid) -> str:
    label = f" label={spec.label}" if spec.label else ""
    return f"tile_grid[{spec.kind} {spec.name}{label} parts={'+'.join(_shape(p.shape) for p in spec.parts)}]"


def _describe_block(spec) -> str:
    return "block_call[" + ", ".join(f"{p.program.name}<{p.program.core}> x{p.instances}"
                                    + ("" if p.tiles_per_block else " tiles, auto per task") for p in spec.parts) + "]"


def _constants(closed, names, pad="  "):
    """A line per constant of the trace (a mask, a fill): its value where it is one number."""
    lines = []
    for var, value in zip(closed.jaxpr.constvars, closed.consts):
        value = np.asarray(value)
        shown = f"({value.item()})" if value.size == 1 else ""
        lines.append(f"{pad}{names.typed(var)} = constant{shown}")
    return lines


def _header(closed, names):
    ins = ", ".join(names.typed(v) for v in closed.jaxpr.invars)
    return [f"kernel({ins}):"] + _constants(closed, names)


def _footer(closed, names):
    return [f"  return {', '.join(names(v) for v in closed.jaxpr.outvars)}"]


def tensor_text(closed) -> str:
    names = _Names()
    return "\n".join(_header(closed, names) + _jaxpr_lines(closed.jaxpr, names, 1, annotate=True)
                     + _footer(closed, names))


def tile_text(closed) -> str:
    names = _Names()
    return "\n".join(_header(closed, names) + _jaxpr_lines(closed.jaxpr, names, 1, describe=_describe_grid)
                     + _footer(closed, names))


def block_text(closed, programs) -> str:
    lines = []
    for program in programs:
        names = _Names()
        body = program.body.jaxpr
        footprint = ", ".join(f"{loc}={b}B" for loc, b in program.footprint)
        label = f" label={program.label}" if program.label else ""
        lines.append(f"program {program.name} <{program.core}>{label} footprint({footprint})"
                     f" ({', '.join(names.typed(v) for v in body.invars)}):")
        if program.note:
            lines.append(f"  # {program.note}")
        lines += _constants(program.body, names) + _jaxpr_lines(body, names, 1)
        lines.append(f"  return {', '.join(names(v) for v in body.outvars)}")
        lines.append("")
    names = _Names()
    lines += _header(closed, names) + _jaxpr_lines(closed.jaxpr, names, 1, describe=_describe_block) + _footer(closed, names)
    return "\n".join(lines)
