"""Dynamic row counts in the real PTO-AS text: one module serves every size of a symbolic leading dim.

A kernel whose symbolic dim ``m`` is the leading (row) dim of its arguments and results is lowered once
at a *template* size (a multiple of every row tile, so no program has a tail); :func:`dynamic_module`
then turns each function of the template's module into its dynamic form, as the real dialect writes it:

* the function takes ``%dyn_m: index`` after its pointers; the GM views of the row-carrying arguments
  are ``!pto.tensor_view<?x…>`` with ``%dyn_m`` as their leading size;
* a block's rows are ``%dyn_vr = min(T, m - T*i)`` (``T`` the row tile, ``i`` the block's row index):
  the windows of those views are ``!pto.partition_tensor_view<?x…>`` with ``%dyn_vr`` rows, and every
  tile that holds the block's rows is ``v_row=?`` (a ``1xT`` row vector: ``v_col=?``) allocated with
  a ``valid_row`` (``valid_col``) operand; the last block of a size that is not a multiple of ``T``
  is the tail, the others are full.

The runtime binds ``m`` from the argument shapes and makes ``ceil(m/T)`` blocks along the rows
(:func:`blocks`). A program whose rows it cannot follow (a row index not of the form ``T*i``, a view
whose rows are not leading, two row tiles in one function) is a :class:`PtoUnsupportedError`.
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import PtoUnsupportedError
from ..lowering import ir
from . import engine

SYMBOL = "%dyn_m"
VALID = "%dyn_vr"
_MATMUL = ("pto.tmatmul", "pto.tgemv")
_VIEW = re.compile(r"(\s*)(%\w+) = pto\.make_tensor_view (%\w+), shape = \[([^\]]*)\], strides = \[([^\]]*)\]"
                   r"(.*): !pto\.tensor_view<([^>]*)>$")
_PART = re.compile(r"(\s*)(%\w+) = pto\.partition_view (%\w+), offsets = \[([^\]]*)\], sizes = \[([^\]]*)\]"
                   r" : !pto\.tensor_view<([^>]*)> -> !pto\.partition_tensor_view<([^>]*)>$")
_CONST = re.compile(r"\s*(%\w+) = arith\.constant (-?\d+) : index$")
_MULI = re.compile(r"\s*(%\w+) = arith\.muli (%\w+), (%\w+) : index$")
_ALLOC = re.compile(r"(\s*)(%\w+) = pto\.alloc_tile (addr = \S+ )?: (!pto\.tile_buf<[^>]*>)$")
_RESHAPE = re.compile(r"(\s*)(%\w+) = pto\.treshape (%\w+) : (!pto\.tile_buf<[^>]*>) -> (!pto\.tile_buf<[^>]*>)$")
_INSTR = re.compile(r"\s*(pto\.[\w.]+) ")


def _err(fn: str, why: str, kind=PtoUnsupportedError) -> PtoUnsupportedError:
    return kind(f"pto dynamic rows: function '{fn}': {why}")


class TemplateMismatch(PtoUnsupportedError):
    """A row tile that does not divide the template size: another template may suit."""


def _split(text: str) -> list[str]:
    """Top-level comma-separated items (commas inside <...> stay)."""
    out, depth, start = [], 0, 0
    for m in re.finditer(r"[<>,]", text):
        ch = m.group(0)
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            out.append(text[start:m.start()].strip())
            start = m.end()
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _groups(line: str):
    """The ``ins(...)`` / ``outs(...)`` groups of an instruction line: [(start, end, names, types)]."""
    found = []
    for key in ("ins(", "outs("):
        start = line.find(key)
        if start < 0:
            continue
        depth = 1
        for m in re.compile(r"[()]").finditer(line, start + len(key)):
            depth += 1 if m.group(0) == "(" else -1
            if not depth:
                break
        i = m.end()
        body = line[start + len(key):i - 1]
        names, _, types = body.partition(" : ")
        found.append((start + len(key), i - 1, [n.strip() for n in names.split(",")], _split(types)))
    return found


def _tile_dims(type_: str) -> dict:
    return {k: v for k, v in re.findall(r"(rows|cols|v_row|v_col)=(\w+)", type_)}


def _dynamic_type(type_: str, kind: str) -> str:
    key = "v_row" if kind == "row" else "v_col"
    return re.sub(rf"\b{key}=\d+", f"{key}=?", type_)


def _first_dim(dims: str) -> str:
    return "?x" + dims.split("x", 1)[1]


def dynamic_function(lines: list[str], name: str, dynamic_args: set, size: int) -> list[str]:
    """One function's lines (``func.func`` to its ``}``) in the dynamic form; ``dynamic_args``: its
    pointer parameters (``%argK``) whose leading dim is the symbol, ``size`` that dim in the template."""
    consts = {m.group(1): int(m.group(2)) for m in map(_CONST.match, lines) if m}
    muls = {m.group(1): (m.group(2), m.group(3)) for m in map(_MULI.match, lines) if m}
    out = list(lines)
    views, parts, row = {}, {}, None          # row: (index name, tile const name, T)
    for n, line in enumerate(lines):
        m = _VIEW.match(line)
        if m and m.group(3) in dynamic_args:
            indent, v, ptr, shape, strides, attrs, dims = m.groups()
            shape, strides = [s.strip() for s in shape.split(",")], [s.strip() for s in strides.split(",")]
            if consts.get(shape[0]) != size or "dn" in attrs or len(shape) > 2:
                raise _err(name, f"the view of {ptr} is not {size} leading rows of a 1-D or 2-D row-major array")
            views[v] = (dims, _first_dim(dims))
            out[n] = (f"{indent}{v} = pto.make_tensor_view {ptr}, shape = [{', '.join([SYMBOL] + shape[1:])}], "
                      f"strides = [{', '.join(strides)}]{attrs}: !pto.tensor_view<{views[v][1]}>")
            continue
        m = _PART.match(line)
        if m and m.group(3) in views:
            indent, p, v, offsets, sizes, _, pdims = m.groups()
            offsets, sizes = [s.strip() for s in offsets.split(",")], [s.strip() for s in sizes.split(",")]
            index, tile = muls.get(offsets[0], (None, None))
            t = consts.get(sizes[0])
            if index is None or consts.get(tile) != t or t is None or index in consts:
                raise _err(name, f"the rows of window {p} are not one row tile of a block (offset {offsets[0]}, "
                                 f"size {sizes[0]})")
            if row is not None and (row[2] != t or row[0] != index):
                raise _err(name, f"windows of {row[2]} rows by {row[0]} and {t} rows by {index}: one row tile "
                                 "and one row index per function")
            row = (index, tile, t)
            parts[p] = _first_dim(pdims)
            out[n] = (f"{indent}{p} = pto.partition_view {v}, offsets = [{', '.join(offsets)}], sizes = "
                      f"[{', '.join([VALID] + sizes[1:])}] : !pto.tensor_view<{views[v][1]}> -> "
                      f"!pto.partition_tensor_view<{parts[p]}>")
    if row is None:
        return _live(out, size)
    index, tile, t = row
    # which tiles hold the block's rows: seeded by the loads and stores of dynamic windows, then spread
    allocs = {m.group(2): m.group(4) for m in map(_ALLOC.match, lines) if m}
    reshapes = [m.groups()[1:] for m in map(_RESHAPE.match, lines) if m]
    types = dict(allocs)
    types.update({r: rt for r, _, _, rt in reshapes})
    kind: dict = {}

    def mark(tile_name, type_):
        if tile_name in kind or tile_name not in types:
            return False
        d = _tile_dims(type_)
        if d.get("v_row") == str(t):
            kind[tile_name] = "row"
        elif d.get("v_row") == "1" and d.get("v_col") == str(t):
            kind[tile_name] = "col"
        else:
            return False
        return True

    instrs = [(line, _groups(line)) for line in lines if _INSTR.match(line) and "ins(" in line]
    for line, groups in instrs:
        op = _INSTR.match(line).group(1)
        names = [x for g in groups for x in g[2]]
        if op in ("pto.tload", "pto.tstore") and any(x in parts for x in names):
            for g in groups:
                for x, ty in zip(g[2], g[3]):
                    if x not in parts and not mark(x, ty) and x not in kind:
                        raise _err(name, f"tile {x} ({ty}) moves a window of {t} dynamic rows but does not hold "
                                         f"them as its rows (or a 1x{t} row)")
    changed = True
    while changed:
        changed = False
        for line, groups in instrs:
            op = _INSTR.match(line).group(1)
            pairs = [(x, ty) for g in groups for x, ty in zip(g[2], g[3]) if x in types]
            if op.startswith(_MATMUL):       # the rows of left, acc and result; the right operand's are K
                pairs = [(x, ty) for x, ty in pairs if "loc=right" not in ty]
            if any(x in kind for x, _ in pairs):
                for x, ty in pairs:
                    changed |= mark(x, ty)
        for r, src, st, rt in reshapes:
            if (src in kind) != (r in kind):
                changed |= mark(r, rt) if src in kind else mark(src, st)
    # rewrite: the prologue before the first use, then every typed mention of a dynamic tile
    first = min([n for n, line in enumerate(lines) if _ALLOC.match(line) or _VIEW.match(line)], default=None)
    defined = {m.group(1) for m in (re.match(r"\s*(%\w+) =", line) for line in lines[:first]) if m}
    if index not in defined or tile not in defined:
        raise _err(name, f"the row index {index} or tile size {tile} is defined after the first tile")
    indent = re.match(r"\s*", lines[first]).group(0)
    prologue = [f"{indent}%dyn_row0 = arith.muli {index}, {tile} : index",
                f"{indent}%dyn_left = arith.subi {SYMBOL}, %dyn_row0 : index",
                f"{indent}{VALID} = arith.minsi %dyn_left, {tile} : index"]
    for n, line in enumerate(out):
        m = _ALLOC.match(line)
        if m and m.group(2) in kind:
            ind, res, addr, ty = m.groups()
            valid = f"valid_row = {VALID}" if kind[m.group(2)] == "row" else f"valid_col = {VALID}"
            out[n] = f"{ind}{res} = pto.alloc_tile {addr or ''}{valid} : {_dynamic_type(ty, kind[res])}"
            continue
        m = _RESHAPE.match(line)
        if m and (m.group(2) in kind or m.group(3) in kind):
            ind, res, src, st, rt = m.groups()
            st = _dynamic_type(st, kind[src]) if src in kind else st
            rt = _dynamic_type(rt, kind[res]) if res in kind else rt
            out[n] = f"{ind}{res} = pto.treshape {src} : {st} -> {rt}"
            continue
        if _INSTR.match(line) and "ins(" in line:
            for start, end, names, tys in reversed(_groups(line)):
                new = [_dynamic_type(ty, kind[x]) if x in kind else
                       (f"!pto.partition_tensor_view<{parts[x]}>" if x in parts else ty) for x, ty in zip(names, tys)]
                line = line[:start] + ", ".join(names) + " : " + ", ".join(new) + line[end:]
            out[n] = line
    return _live(out[:first] + prologue + out[first:], size)


def _live(lines: list[str], size: int) -> list[str]:
    """``lines`` less the ``size`` constants the rewrite left unused (the template's row count)."""
    dead = {m.group(1) for m in map(_CONST.match, lines) if m and int(m.group(2)) == size}
    for line in lines:
        if not _CONST.match(line):
            dead -= set(re.findall(r"%\w+", line))
    return [line for line in lines if not ((m := _CONST.match(line)) and m.group(1) in dead)]


def dynamic_module(text: str, dynamic_args: dict, size: int) -> str:
    """The template module ``text`` with every function in its dynamic form (:func:`dynamic_function`);
    ``dynamic_args``: function name -> its ``%argK`` pointers whose leading dim is the symbol."""
    lines = text.split("\n")
    out, n = [], 0
    while n < len(lines):
        m = re.match(r"(\s*)func\.func @(\w+)\((.*)\)( attributes .*)? \{$", lines[n])
        if not m:
            out.append(lines[n])
            n += 1
            continue
        indent, name = m.group(1), m.group(2)
        end = next(k for k in range(n + 1, len(lines)) if lines[k] == f"{indent}}}")
        header = f"{indent}func.func @{name}({m.group(3)}, {SYMBOL}: index){m.group(4) or ''} {{"
        body = dynamic_function(lines[n + 1:end], name, dynamic_args.get(name, set()), size)
        out += [header] + body + [lines[end]]
        n = end + 1
    return "\n".join(out)


# ------------------------------------------------------------------------------------- the runtime
def _canonical(text: str) -> list[str]:
    """``text``'s lines, each function's ``index`` constants last and sorted (their order follows first uses)."""
    body, consts, fn = [], [], "?"
    for line in text.split("\n"):
        m = re.match(r"\s*func\.func @(\w+)", line)
        fn = m.group(1) if m else fn
        (consts if _CONST.match(line) else body).append(f"{fn}: {line.strip()}" if _CONST.match(line) else line)
    return body + sorted(consts)


def _twin_err(name: str, s1: int, s2: int, what: str) -> PtoUnsupportedError:
    return PtoUnsupportedError(f"pj.kernel '{name}': lowered at {s1} and at {s2} rows, {what}; a symbolic row "
                               "count needs one program for every size, with the rows as its leading dim only")


def _aval(v) -> str:
    return f"{np.dtype(v.aval.dtype).name}[{','.join(map(str, v.aval.shape))}]"


def row_vars(name: str, first, second) -> tuple[set, set]:
    """The row-carrying variables of two template lowerings ``first`` and ``second`` (each a
    ``(lowering, size)``) of kernel ``name``: those whose leading dim is the template size in both, at
    the same place of the same Block graph. A dim equal to a size by coincidence stays static; graphs
    that differ other than in those dims are a :class:`PtoUnsupportedError` naming what differs."""
    (low1, s1), (low2, s2) = first, second
    j1, j2 = low1.block.jaxpr, low2.block.jaxpr
    rows1, rows2 = set(), set()

    def pair(v1, v2, what):
        if hasattr(v1, "val") or hasattr(v2, "val"):
            if not (hasattr(v1, "val") and hasattr(v2, "val") and np.array_equal(v1.val, v2.val)):
                raise _twin_err(name, s1, s2, f"{what} differs")
            return
        a, b = v1.aval.shape, v2.aval.shape
        if len(a) != len(b) or v1.aval.dtype != v2.aval.dtype or any(
                x != y and not (axis == 0 and x == s1 and y == s2) for axis, (x, y) in enumerate(zip(a, b))):
            raise _twin_err(name, s1, s2, f"{what} is {_aval(v1)} at {s1} rows but {_aval(v2)} at {s2} (a dim "
                                          "that changes other than as the leading dim equal to the row count)")
        if a and a[0] != b[0]:
            rows1.add(v1)
            rows2.add(v2)

    for i, (v1, v2) in enumerate(zip(j1.invars, j2.invars)):
        pair(v1, v2, f"argument {i}")
    for i, (v1, v2) in enumerate(zip(j1.constvars, j2.constvars)):
        pair(v1, v2, f"constant {i}")
        if v1 in rows1 or not np.array_equal(low1.block.consts[i], low2.block.consts[i]):
            raise _twin_err(name, s1, s2, f"constant {i} ({_aval(v1)}) changes with the row count")
    if len(j1.eqns) != len(j2.eqns):
        raise _twin_err(name, s1, s2, f"the Block graph has {len(j1.eqns)} steps at {s1} rows but "
                                      f"{len(j2.eqns)} at {s2}")
    for k, (e1, e2) in enumerate(zip(j1.eqns, j2.eqns)):
        progs = [f"[{', '.join(p.program.name for p in e.params['spec'].parts)}]"
                 if e.primitive is ir.block_call_p else "" for e in (e1, e2)]
        if (e1.primitive, len(e1.invars), len(e1.outvars), progs[0]) != \
                (e2.primitive, len(e2.invars), len(e2.outvars), progs[1]):
            raise _twin_err(name, s1, s2, f"step {k} is {e1.primitive}{progs[0]} at {s1} rows but "
                                          f"{e2.primitive}{progs[1]} at {s2}")
        for i, (v1, v2) in enumerate(zip(e1.invars, e2.invars)):
            pair(v1, v2, f"operand {i} of step {k} ({e1.primitive}{progs[0]})")
        for i, (v1, v2) in enumerate(zip(e1.outvars, e2.outvars)):
            pair(v1, v2, f"result {i} of step {k} ({e1.primitive}{progs[0]})")
    for i, (v1, v2) in enumerate(zip(j1.outvars, j2.outvars)):
        pair(v1, v2, f"result {i}")
    return rows1, rows2


class DynamicKernel:
    """A kernel's template lowering (leading dim ``size`` in its ``rows`` variables, :func:`row_vars`),
    its compiled programs and the dynamic module of them; :meth:`run` binds the symbol and runs the
    blocks a size needs, each one a call of its function in the dynamic text (:mod:`~ptojax.ascend.engine`)."""

    def __init__(self, lowering, compiled, size: int, rows: set, arch: str = "a3"):
        if compiled.tasks:
            raise PtoUnsupportedError("pto dynamic rows: blocks of several tiles (tiles_per_block > 1) are not "
                                      "supported with a symbolic row count")
        self.lowering, self.compiled, self.size, self.row_vars = lowering, compiled, size, rows
        names = [n for n, _ in compiled.entries()]
        self.names = dict(zip(compiled.kernels, names))
        dynamic = {}
        for eqn in lowering.block.jaxpr.eqns:
            if eqn.primitive is not ir.block_call_p:
                raise PtoUnsupportedError(f"pto dynamic rows: the Block graph has a {eqn.primitive} step; only "
                                          "block calls take a symbolic row count")
            args = {f"%arg{k}" for k, v in enumerate(eqn.invars + eqn.outvars) if self._rows(v)}
            for part in eqn.params["spec"].parts:
                fn = self.names[(part.program.name, tuple(part.shape))]
                if dynamic.setdefault(fn, args) != args:
                    raise _err(fn, f"called with the rows in {sorted(dynamic[fn])} and in {sorted(args)}")
        self.text = dynamic_module(compiled.pto(arch), dynamic, size)
        self.rows = {}            # function -> its row tile (None: no dynamic rows)
        for fn in dynamic:
            m = re.search(rf"func\.func @{fn}\(.*?\n(.*?)\n  }}", self.text, re.S)
            tile = re.search(rf"{VALID} = arith\.minsi %dyn_left, (%\w+) : index", m.group(1)) if m else None
            index = re.search(r"%dyn_row0 = arith\.muli (%\w+), ", m.group(1)) if m else None
            if tile is None:
                self.rows[fn] = None
                continue
            t = int(re.search(rf"{tile.group(1)} = arith\.constant (\d+) : index", m.group(1)).group(1))
            if index.group(1) != "%i0":
                raise _err(fn, f"the rows are grid axis {index.group(1)}, not the leading one")
            self.rows[fn] = t
        for eqn in lowering.block.jaxpr.eqns:
            for part in eqn.params["spec"].parts:
                fn = self.names[(part.program.name, tuple(part.shape))]
                t = self.rows[fn]
                if t is not None and part.shape[0] * t != size:
                    raise _err(fn, f"{part.shape[0]} blocks of {t} rows do not tile the template's {size} rows",
                               TemplateMismatch)
        self._module = None

    def _rows(self, v) -> bool:
        return not hasattr(v, "val") and v in self.row_vars

    def check_twin(self, name: str, other: "DynamicKernel"):
        """:class:`PtoUnsupportedError` unless ``other``, the same kernel at a second template size, made
        the same dynamic module, row tiles and grids: nothing else in it follows the template size."""
        s1, s2 = self.size, other.size
        a, b = _canonical(self.text), _canonical(other.text)
        if a != b:
            n = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            const = re.match(r"(\w+): %", a[n]) if n < len(a) else None
            fn = const.group(1) if const else next(
                (m.group(1) for line in reversed(a[:n + 1]) if (m := re.match(r"\s*func\.func @(\w+)", line))), "?")
            raise _twin_err(name, s1, s2, f"the dynamic PTO-AS of function '{fn}' differs: "
                                          f"{(a[n] if n < len(a) else '<end>').strip()!r} vs "
                                          f"{(b[n] if n < len(b) else '<end>').strip()!r}")
        if self.rows != other.rows:
            raise _twin_err(name, s1, s2, f"the row tiles differ: {self.rows} vs {other.rows}")
        for e1, e2 in zip(self.lowering.block.jaxpr.eqns, other.lowering.block.jaxpr.eqns):
            for p1, p2 in zip(e1.params["spec"].parts, e2.params["spec"].parts):
                if self.grid(p1, s2) != tuple(p2.shape):
                    raise _twin_err(name, s1, s2, f"program {p1.program.name} has the grid {tuple(p1.shape)} at "
                                                  f"{s1} rows and {tuple(p2.shape)} at {s2}, not "
                                                  f"{self.grid(p1, s2)}")

    @property
    def module(self):
        if self._module is None:
            self._module = engine.parse(self.text)
        return self._module

    def grid(self, part, m: int) -> tuple:
        """The grid of ``part`` at ``m`` rows: ``ceil(m/T)`` blocks along the rows."""
        t = self.rows[self.names[(part.program.name, tuple(part.shape))]]
        return tuple(part.shape) if t is None else (-(-m // t),) + tuple(part.shape[1:])

    def shape(self, v, m: int) -> tuple:
        return (m,) + tuple(v.aval.shape[1:]) if self._rows(v) else tuple(v.aval.shape)

    def run(self, arrays, m: int) -> list:
        """The kernel's flat outputs on ``arrays`` (flat inputs, ``m`` rows where the symbol is)."""
        jaxpr = self.lowering.block.jaxpr
        env = dict(zip(jaxpr.invars, [np.ascontiguousarray(a) for a in arrays]))
        env.update(zip(jaxpr.constvars, self.lowering.block.consts))
        for eqn in jaxpr.eqns:
            spec = eqn.params["spec"]
            inputs = [env[v] for v in eqn.invars]
            outputs = [inputs[o.alias].copy() if o.alias is not None else
                       np.full(self.shape(v, m), o.fill, v.aval.dtype) for o, v in zip(spec.outputs, eqn.outvars)]
            args = inputs + outputs
            for part in spec.parts:
                fn = self.names[(part.program.name, tuple(part.shape))]
                for b in range(int(np.prod(self.grid(part, m)))):
                    engine.run(self.module, fn, args + [m], b)
            env.update(zip(eqn.outvars, outputs))
        return [env[v] if not hasattr(v, "val") else np.asarray(v.val) for v in jaxpr.outvars]
