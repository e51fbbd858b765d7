"""Dynamic row counts in the real PTO-AS text: one module serves every size of a symbolic leading dim.

A kernel whose symbolic dim ``m`` is the leading (row) dim of its arguments and results is lowered once
at a *template* size (a multiple of every row tile, so no program has a tail); :func:`dynamic_module`
then turns each function of the template's module into its dynamic form, as the real dialect writes it:

* the function takes ``%dyn_m: index`` after its pointers; the GM views (of any rank) of the
  row-carrying arguments are ``!pto.tensor_view<?x…>`` with ``%dyn_m`` as their leading size, or
  ``%dyn_mK = K*%dyn_m`` for a buffer of ``K·m`` rows (``[T·N, 128]``); a matmul's transposed right
  operand, a column-major ``[D, K·m]`` view, takes ``%dyn_mK`` columns where every block is one row;
* a block's rows are ``%dyn_vr = min(T, K*m - T*i)`` (``T`` the row tile, ``i`` the block's row index):
  the windows of those views are ``!pto.partition_tensor_view<?x…>`` with ``%dyn_vr`` leading rows (a
  window of ``c·T`` rows of a ``c·K·m``-row view at ``c·T·i``, each index's ``c`` rows through a flattened
  view: ``c*%dyn_vr``), and every tile that holds the block's rows is ``v_row=?`` (a ``1xT`` row vector:
  ``v_col=?``) allocated with a ``valid_row`` (``valid_col``) operand — ``%dyn_vrN = N*%dyn_vr`` for a
  tile of ``N`` rows per leading index (a ``[T, N, D]`` window); a subset of such a tile has dynamic rows
  too, and a loop over the block's rows (``scf.for`` to ``T`` picking a tile row) stops at ``%dyn_vr``;
  a ``ttrans``'s source and destination, with their subsets, are ``(?, ?)`` (pto-isa's ``TTRANS`` wants
  their types' valid dims mirrored), as is a ``treshape`` that moves the rows to the other dim (with
  ``pto.set_validshape``); the last block of a size that is not a multiple of ``T`` is the tail, the
  others are full. Which tiles hold the rows
  follows them from the loads and stores of those windows, operand to operand along the dims each
  instruction keeps (:func:`_operand_axes`), not from equal numbers: a ``1x64`` bias broadcast down
  the rows of a ``64``-row tile, or a ``(64, 64)`` weight beside it, stays static.
* an ``i32`` constant of a ``K·size`` row count that bounds the indices a gather then reads a
  ``K·m``-row view at (computed offsets) is ``K*%dyn_m`` in ``i32``; an equal bound of a static table stays.

The runtime binds ``m`` from the argument shapes and makes ``ceil(m/T)`` blocks along the rows
(:meth:`DynamicKernel.grid`). A program whose rows it cannot follow (a row index not of the form
``T*i``, a view whose rows are not leading, two row tiles or row counts in one function) is a
:class:`PtoUnsupportedError`.
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
_ROW_WISE = ("pto.tsort32", "pto.tmrgsort", "pto.tconcat")      # rows kept, columns rearranged
_REDUCE = re.compile(r"pto\.t(row|col)(sum|max|min|prod|argmax|argmin)")
_VIEW = re.compile(r"(\s*)(%\w+) = pto\.make_tensor_view (%\w+), shape = \[([^\]]*)\], strides = \[([^\]]*)\]"
                   r"(.*): !pto\.tensor_view<([^>]*)>$")
_PART = re.compile(r"(\s*)(%\w+) = pto\.partition_view (%\w+), offsets = \[([^\]]*)\], sizes = \[([^\]]*)\]"
                   r" : !pto\.tensor_view<([^>]*)> -> !pto\.partition_tensor_view<([^>]*)>$")
_CONST = re.compile(r"\s*(%\w+) = arith\.constant (-?\d+) : index$")
_CONST_I32 = re.compile(r"\s*(%\w+) = arith\.constant (\d+) : i32$")
_MULI = re.compile(r"\s*(%\w+) = arith\.muli (%\w+), (%\w+) : index$")
_ADDI = re.compile(r"\s*(%\w+) = arith\.addi (%\w+), (%\w+) : index$")
_ALLOC = re.compile(r"(\s*)(%\w+) = pto\.alloc_tile (addr = \S+ )?: (!pto\.tile_buf<[^>]*>)$")
_RESHAPE = re.compile(r"(\s*)(%\w+) = pto\.treshape (%\w+) : (!pto\.tile_buf<[^>]*>) -> (!pto\.tile_buf<[^>]*>)$")
_INSTR = re.compile(r"\s*(?:%\w+ = )?(pto\.[\w.]+) ")
_SUBSET = re.compile(r"(\s*)(%\w+) = pto\.subset (%\w+)\[[^\]]*\] sizes \[[^\]]*\] : (!pto\.tile_buf<[^>]*>)$")
_FOR = re.compile(r"\s*scf\.for (%\w+) = (%\w+) to (%\w+) step (%\w+)")


def _err(fn: str, why: str) -> PtoUnsupportedError:
    return PtoUnsupportedError(f"pto dynamic rows: function '{fn}': {why}")


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
    """The ``ins(...)`` / ``outs(...)`` groups of an instruction line: [(start, end, names, types, text)],
    ``text`` the names as written (with an attribute dict such as ``{cmpMode = ...}``), ``names`` without."""
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
        bare = re.sub(r"\s*\{[^}]*\}", "", names)
        found.append((start + len(key), i - 1, [n.strip() for n in bare.split(",")], _split(types), names))
    return found


def _operand_axes(op: str, groups) -> list:
    """``[(name, type, (rows, cols))]`` for the operands of instruction ``op`` (its :func:`_groups`): the
    axis of the instruction's rows-by-columns iteration (0 or 1) that each operand's rows and columns run
    along, None for a dim that is neither (a broadcast row's one row, a reduced dim, a matmul's K). The
    block's rows pass from operand to operand along these axes only, so a ``1xN`` row broadcast down the
    rows of a ``T``-row tile holds none of them, whatever N is."""
    ins = list(zip(*groups[0][2:4])) if groups else []
    outs = list(zip(*groups[1][2:4])) if len(groups) > 1 else []
    wide = _tile_dims(outs[0][1]).get("v_col") if outs else None
    found = []
    for k, (x, ty) in enumerate(ins):
        if op.startswith(_MATMUL):               # left: rows by K; acc: rows by N; right, bias: K (or 1) by N
            axes = (0, None) if "loc=left" in ty else (0, 1) if "loc=acc" in ty else (None, 1)
        elif op == "pto.ttrans":                 # the source, then a scratch of the result's shape
            axes = (0, 1) if k == 0 else (1, 0)
        elif op == "pto.tcolexpand" or (op.startswith("pto.tcolexpand") and k == 1):
            axes = (None, 1)                     # the 1xN row, broadcast down the rows
        elif op == "pto.trowexpand" or (op.startswith("pto.trowexpand") and _tile_dims(ty).get("v_col") != wide):
            axes = (0, None)                     # the Rx1 column, broadcast along the columns
        elif op in _ROW_WISE or (op == "pto.tgather" and k == 0):
            axes = (0, None)                     # each row's columns rearranged
        else:
            axes = (0, 1)
        found.append((x, ty, axes))
    reduce = _REDUCE.fullmatch(op)
    for x, ty in outs:
        if op.startswith(_MATMUL):
            axes = (0, 1) if "loc=acc" in ty else (None, 1)
        elif op == "pto.ttrans":
            axes = (1, 0)
        elif op in _ROW_WISE or (reduce and reduce.group(1) == "row"):
            axes = (0, None)                     # a row reduction: one column of the rows
        elif reduce:                             # a column reduction: one row of the columns
            axes = (None, 1)
        else:
            axes = (0, 1)
        found.append((x, ty, axes))
    return found


def _root(name: str, parent: dict) -> str:
    """The tile ``name`` is a subset of (itself where it is none)."""
    while name in parent:
        name = parent[name]
    return name


def _tile_dims(type_: str) -> dict:
    return {k: v for k, v in re.findall(r"(rows|cols|v_row|v_col)=(\w+)", type_)}


def _dynamic_type(type_: str, kind: str) -> str:
    key = "v_row" if kind == "row" else "v_col"
    return re.sub(rf"\b{key}=\d+", f"{key}=?", type_)


def _typed(type_: str, name: str, kind: dict, both: set) -> str:
    """The dynamic type of tile ``name``: ``?`` where its rows are (both dims for a tile in ``both``)."""
    if name in both:
        return _dynamic_type(_dynamic_type(type_, "row"), "col")
    return _dynamic_type(type_, kind[name][0]) if name in kind else type_


def _first_dim(dims: str) -> str:
    return "?x" + dims.split("x", 1)[1]


def dynamic_function(lines: list[str], name: str, dynamic_args: set, size: int) -> list[str]:
    """One function's lines (``func.func`` to its ``}``) in the dynamic form; ``dynamic_args``: its
    pointer parameters (``%argK``) whose leading dim is the symbol, ``size`` that dim in the template."""
    consts = {m.group(1): int(m.group(2)) for m in map(_CONST.match, lines) if m}
    muls = {m.group(1): (m.group(2), m.group(3)) for m in map(_MULI.match, lines) if m}
    out = list(lines)
    adds = {m.group(1): (m.group(2), m.group(3)) for m in map(_ADDI.match, lines) if m}
    views, parts, windows = {}, {}, []        # windows: (line, the partition_view's groups) of the views
    per_row = {}                              # window -> the tile rows per leading index (its inner sizes)
    columns = {}                              # a transposed view of k·m rows -> (its dims, the dynamic ones)
    reads = {}                                # the pointers and views of k·m rows -> their k
    for n, line in enumerate(lines):
        m = _VIEW.match(line)
        if m and m.group(3) in dynamic_args:
            indent, v, ptr, shape, strides, attrs, dims = m.groups()
            shape, strides = [s.strip() for s in shape.split(",")], [s.strip() for s in strides.split(",")]
            if "dn" in attrs and len(shape) == 2 and (consts.get(shape[1]) or 1) % size == 0:
                k = consts.get(shape[1]) // size          # [D, k·m]: a matmul's transposed right operand
                reads[ptr] = reads[v] = k
                columns[v] = (dims, re.sub(r"^(\d+)x\d+", r"\1x?", dims))
                out[n] = (f"{indent}{v} = pto.make_tensor_view {ptr}, shape = [{shape[0]}, {_rows(k)}], "
                          f"strides = [{', '.join(strides)}]{attrs}: !pto.tensor_view<{columns[v][1]}>")
                continue
            lead = consts.get(shape[0]) or 0
            if lead % size or not lead or "dn" in attrs:
                raise _err(name, f"the view of {ptr} is not k*{size} leading rows of a row-major array")
            k = lead // size
            reads[ptr] = reads[v] = k
            views[v] = (dims, _first_dim(dims), k)
            out[n] = (f"{indent}{v} = pto.make_tensor_view {ptr}, shape = [{', '.join([_rows(k)] + shape[1:])}], "
                      f"strides = [{', '.join(strides)}]{attrs}: !pto.tensor_view<{views[v][1]}>")
            continue
        m = _PART.match(line)
        if m and m.group(3) in columns:
            out[n] = line.replace(f"tensor_view<{columns[m.group(3)][0]}>", f"tensor_view<{columns[m.group(3)][1]}>")
            continue
        if m and m.group(3) in views:
            windows.append((n, m.groups()))
    row, scales = _row_tile(name, windows, views, consts, muls, adds, size)
    for n, (indent, p, v, offsets, sizes, _, pdims) in windows:
        sizes, c = [x.strip() for x in sizes.split(",")], scales[p]
        per_row[p] = c * int(np.prod([consts[x] for x in sizes[1:-1]], dtype=np.int64))
        parts[p] = _first_dim(pdims)
        out[n] = (f"{indent}{p} = pto.partition_view {v}, offsets = [{offsets}], sizes = "
                  f"[{', '.join([_valid(c)] + sizes[1:])}] : !pto.tensor_view<{views[v][1]}> -> "
                  f"!pto.partition_tensor_view<{parts[p]}>")
    first = min([n for n, line in enumerate(lines) if _ALLOC.match(line) or _VIEW.match(line)], default=None)
    indent = re.match(r"\s*", lines[first]).group(0) if first is not None else ""
    prologue = [line for k in sorted(set(reads.values()) - {1}) for line in
                (f"{indent}%dyn_k{k} = arith.constant {k} : index", f"{indent}{_rows(k)} = arith.muli {SYMBOL}, "
                                                                     f"%dyn_k{k} : index")]
    bounds = _row_bounds(out, reads, size, indent)
    if bounds:
        out = [line for line in out if not ((m := _CONST_I32.match(line)) and m.group(1) in bounds)]
        first = min(n for n, line in enumerate(out) if _ALLOC.match(line) or _VIEW.match(line))
        prologue += [line for lines_ in bounds.values() for line in lines_]
    if columns and (row is None or row[2] != 1):
        raise _err(name, f"the transposed views {sorted(columns)} of k*{size} rows need blocks of one row "
                         f"(every block whole), not {row[2] if row else 'no'} row windows")
    if row is None:
        return _live(out[:first] + prologue + out[first:] if prologue else out, size)
    index, tile, t, scale = row
    # which tiles hold the block's rows: seeded by the loads and stores of dynamic windows, then spread
    allocs = {m.group(2): m.group(4) for m in map(_ALLOC.match, lines) if m}
    reshapes = [m.groups()[1:] for m in map(_RESHAPE.match, lines) if m]
    types = dict(allocs)
    types.update({r: rt for r, _, _, rt in reshapes})
    subsets = [m.groups()[1:] for m in map(_SUBSET.match, lines) if m]
    kind: dict = {}           # tile -> ("row" or "col", its rows per valid leading index)

    def mark(tile_name, type_, r=1, want=None):
        """Give ``tile_name`` dynamic rows (``want`` "row") or columns ("col"; None: as its dims say)."""
        if tile_name in kind or tile_name not in types:
            return False
        d = _tile_dims(type_)
        if want != "col" and d.get("v_row") == str(t * r):
            kind[tile_name] = ("row", r)
        elif want != "row" and d.get("v_row") == "1" and d.get("v_col") == str(t * r):
            kind[tile_name] = ("col", r)
        else:
            return False
        return True

    instrs = [(line, _groups(line)) for line in lines if _INSTR.match(line) and "ins(" in line]
    for line, groups in instrs:
        op = _INSTR.match(line).group(1)
        names = [x for g in groups for x in g[2]]
        if op in ("pto.tload", "pto.tstore") and any(x in parts for x in names):
            r = next(per_row[x] for x in names if x in parts)
            for g in groups:
                for x, ty in zip(g[2], g[3]):
                    if x not in parts and not mark(x, ty, r) and kind.get(x, (None, None))[1] != r:
                        raise _err(name, f"tile {x} ({ty}) moves a window of {t}x{r} dynamic rows but does not "
                                         f"hold them as its rows (or a 1x{t * r} row)")
    changed = True
    while changed:
        changed = False
        for line, groups in instrs:         # along the operand dims that follow the block's rows only
            operands = [(x, ty, axes) for x, ty, axes in _operand_axes(_INSTR.match(line).group(1), groups)
                        if x in types]
            along = {(axes[kind[x][0] == "col"], kind[x][1]) for x, _, axes in operands if x in kind}
            for axis, r in sorted(a for a in along if a[0] is not None):
                for x, ty, axes in operands:
                    if axis in axes:
                        changed |= mark(x, ty, r, "row" if axes[0] == axis else "col")
        for r, src, st, rt in reshapes:
            if (src in kind) != (r in kind):
                changed |= mark(r, rt, kind[src][1]) if src in kind else mark(src, st, kind[r][1])
        for res, src, _ in subsets:          # a window of a tile with dynamic rows has them too (PTOAS's ?)
            if src in kind and res not in kind:
                kind[res] = kind[src]
                changed = True
    for line, groups in instrs:             # a transpose turns the block's rows into columns: no ? rows
        if _INSTR.match(line).group(1) == "pto.ttrans" and (groups[0][2][0] in kind) != (groups[-1][2][0] in kind):
            raise _err(name, f"a transpose of the block's {t} dynamic rows (ttrans of {groups[0][2][0]} into "
                             f"{groups[-1][2][0]}: a transpose, or a cumsum along the last axis, which scans down "
                             "the tile's transpose) has no dynamic form; compile it without polymorphic_shapes "
                             "(once per row count)")
    # rewrite: the prologue before the first use, then every typed mention of a dynamic tile
    defined = {m.group(1) for m in (re.match(r"\s*(%\w+) =", line) for line in out[:first]) if m}
    if index not in defined or tile not in defined:
        raise _err(name, f"the row index {index} or tile size {tile} is defined after the first tile")
    prologue += [f"{indent}%dyn_row0 = arith.muli {index}, {tile} : index",
                 f"{indent}%dyn_left = arith.subi {_rows(scale)}, %dyn_row0 : index",
                 f"{indent}{VALID} = arith.minsi %dyn_left, {tile} : index"]
    for r in sorted(({r for _, r in kind.values()} | set(scales.values())) - {1}):  # valid rows at r per index
        prologue += [f"{indent}%dyn_c{r} = arith.constant {r} : index",
                     f"{indent}{_valid(r)} = arith.muli {VALID}, %dyn_c{r} : index"]
    # a treshape that moves the rows to the other dim (an R x 1 column viewed as a 1 x R row), or views a tile
    # of static rows as one of the block's (tinterleave's positions): PTOAS gives a view's ? dim its source's
    # valid dim of the same place, so the view is (?, ?) and set_validshape says which
    moved = {r for r, src, _, _ in reshapes if r in kind and (src not in kind or kind[r][0] != kind[src][0])}
    # a transpose's source and destination: pto-isa's TTRANS wants their types' valid dims mirrored (a ?
    # row for a ? column), so each is (?, ?), with its subsets, a tile allocated with both valid operands
    parent = {res: src for res, src, _ in subsets}
    roots = {_root(x, parent) for line, groups in instrs if _INSTR.match(line).group(1) == "pto.ttrans"
             and groups[0][2][0] in kind for x in (groups[0][2][0], groups[-1][2][0])}
    moved |= {r for r, _, _, _ in reshapes if r in roots}
    both = moved | roots | {res for res, _, _ in subsets if _root(res, parent) in roots}
    # pto-isa's elementwise templates (TSEL, TADD, ...) take one tile type for their tiles: an allocated
    # tile of a (?, ?) operand's static dims and dtype that the same instruction names is (?, ?) too
    changed = True
    while changed:
        changed = False
        for line, groups in instrs:
            tiles = [(x, _tile_dims(ty), ty.split("dtype=")[-1].split(",")[0]) for g in groups
                     for x, ty in zip(g[2], g[3]) if x in kind]
            wide = {(d["rows"], d["cols"], dt) for x, d, dt in tiles if x in both}
            for x, d, dt in tiles:
                if x not in both and x in allocs and (d["rows"], d["cols"], dt) in wide:
                    both.add(x)
                    changed = True
    statics = set()                           # the static valid dims a (?, ?) tile's operands name

    def valid_pair(name, type_):
        """The valid_row and valid_col operands of a (?, ?) tile: the block's rows where they are."""
        (what, r), d = kind[name], _tile_dims(type_)
        static = d["v_col"] if what == "row" else d["v_row"]
        statics.add(static)
        return (_valid(r), f"%dyn_n{static}") if what == "row" else (f"%dyn_n{static}", _valid(r))
    loops = _row_loops(out, kind, consts, t)
    after = {}                                # line -> the line that follows it (a view's set_validshape)
    for n, line in enumerate(out):
        if n in loops:
            out[n] = loops[n]
            continue
        m = _ALLOC.match(line)
        if m and m.group(2) in kind:
            ind, res, addr, ty = m.groups()
            (what, r) = kind[res]
            if res in both:
                rows, cols = valid_pair(res, ty)
                out[n] = f"{ind}{res} = pto.alloc_tile {addr or ''}valid_row = {rows} valid_col = {cols} : " \
                         f"{_typed(ty, res, kind, both)}"
                continue
            valid = f"valid_row = {_valid(r)}" if what == "row" else f"valid_col = {_valid(r)}"
            out[n] = f"{ind}{res} = pto.alloc_tile {addr or ''}{valid} : {_dynamic_type(ty, what)}"
            continue
        m = _RESHAPE.match(line)
        if m and (m.group(2) in kind or m.group(3) in kind):
            ind, res, src, st, rt = m.groups()
            st = _typed(st, src, kind, both)
            rt = _typed(rt, res, kind, both)
            out[n] = f"{ind}{res} = pto.treshape {src} : {st} -> {rt}"
            if res in moved:
                rows, cols = valid_pair(res, m.group(5))
                after[n] = f"{ind}pto.set_validshape {res}, {rows}, {cols} : {rt}"
            continue
        m = _SUBSET.match(line)
        if m and m.group(3) in kind:
            out[n] = line[:m.start(4)] + _typed(m.group(4), m.group(3), kind, both) + line[m.end(4):]
            continue
        if _INSTR.match(line) and "ins(" in line:
            for start, end, names, tys, text in reversed(_groups(line)):
                new = [_typed(ty, x, kind, both) if x in kind else
                       (f"!pto.partition_tensor_view<{parts[x]}>" if x in parts else ty) for x, ty in zip(names, tys)]
                line = line[:start] + text + " : " + ", ".join(new) + line[end:]
            out[n] = line
    prologue += [f"{indent}%dyn_n{v} = arith.constant {v} : index" for v in sorted(statics, key=int)]
    out = [x for n, line in enumerate(out) for x in (line, after.get(n)) if x is not None]
    return _live(out[:first] + prologue + out[first:], size)


def _row_tile(fn: str, windows: list, views: dict, consts: dict, muls: dict, adds: dict, size: int):
    """(The row tile ``(index, tile, T, k)``, each window's ``c``) of a function's windows of the views of
    ``k·size`` rows: each one row tile of a block, ``T`` rows of a ``k·m``-row view at ``index * tile``
    (``T = tile``), or ``c·T`` rows of a ``c·k·m``-row view at ``c·T`` times the same index (the ``c``
    rows of each leading index through a flattened view: an f16 rank-3 reduction's store); the
    smallest ``k`` is the row tile's. A :class:`PtoUnsupportedError` where a window is neither."""
    found = []
    for _, (_, p, v, offsets, sizes, _, _) in windows:
        offsets, sizes = [s.strip() for s in offsets.split(",")], [s.strip() for s in sizes.split(",")]
        t, k = consts.get(sizes[0]), views[v][2]
        index, tile = muls.get(offsets[0], (offsets[0], sizes[0]) if t == 1 else (None, None))  # 1 row: i
        if index is None or consts.get(tile) != t or t is None or index in consts:
            index = tile = None                  # a scaled window's offset: matched against the row tile
        if None in [consts.get(x) for x in sizes[1:-1]]:
            index = t = None
        found.append((p, offsets[0], sizes[0], t, k, index, tile))
    if not found:
        return None, {}
    plain = [f for f in found if f[5] is not None]
    base = min(plain, key=lambda f: f[4]) if plain else found[0]
    index, tile, t, k = base[5], base[6], base[3], base[4]
    at = _linear(index, consts, muls, adds) if index is not None else None
    scales = {}
    for p, offset, rows, t2, k2, index2, _ in found:
        if index2 is not None and (t2, k2, index2) == (t, k, index):
            scales[p] = 1
            continue
        c = k2 // k if k and t2 is not None and k2 % k == 0 else 0
        if at is not None and c > 1 and t2 == c * t and _linear(offset, consts, muls, adds) == (at[0], at[1] * t2):
            scales[p] = c
            continue
        if index2 is None or at is None:
            whole = " (one block reads every row: a reduction or scan along the symbolic row axis)" \
                if t2 is not None and t2 == size * k2 else ""
            raise _err(fn, f"the rows of window {p} are not one row tile of a block (offset {offset}, size {rows})"
                           f"{whole}")
        raise _err(fn, f"windows of {t} rows by {index} of {_rows(k)} and {t2} rows by {index2} of {_rows(k2)}: "
                       "one row tile, one row index and one row count per function")
    return (index, tile, t, k), scales


def _linear(name: str, consts: dict, muls: dict, adds: dict):
    """Index value ``name`` as ``(var, coefficient)``, ``var * coefficient`` (var None: a constant), through
    multiplications and additions of constants; None where it is not of that form."""
    if name in consts:
        return None, consts[name]
    if name not in muls and name not in adds:
        return name, 1
    a, b = (_linear(x, consts, muls, adds) for x in (muls.get(name) or adds[name]))
    if a is None or b is None:
        return None
    if name in muls:
        return (b[0], a[1] * b[1]) if a[0] is None else (a[0], a[1] * b[1]) if b[0] is None else None
    return b if a == (None, 0) else a if b == (None, 0) else None


def _row_bounds(lines: list[str], reads: dict, size: int, indent: str) -> dict:
    """{name: its lines} for the ``i32`` constants of a ``k·size`` row count that bound an index into the
    rows of a ``k·m``-row argument (``reads``: its pointers and views, each with its ``k``): a gather's
    ``cmpi ult`` of the index it then reads at (``load_scalar``, or a window's leading offset, through
    an ``index_cast``). They become ``k·m`` in ``i32`` (``%dyn_m`` cast, times ``k`` in ``i32``: ``ptoas``
    cannot emit a cast of the ``index`` product). A constant that only equals such a count, as the
    bound of a static table of ``size`` rows, stays."""
    consts = {m.group(1): int(m.group(2)) for m in map(_CONST_I32.match, lines) if m}
    rows = {}                                 # an index into the rows of a k·m-row argument -> k
    for line in lines:
        if (m := re.search(r"pto\.load_scalar (%\w+)\[(%\w+)\]", line)) and m.group(1) in reads:
            rows[m.group(2)] = reads[m.group(1)]
        elif (m := _PART.match(line)) and m.group(3) in reads:
            rows[m.group(4).split(",")[0].strip()] = reads[m.group(3)]
    for line in reversed(lines):              # back through the casts to the i32 index compared
        m = re.match(r"\s*(%\w+) = arith\.index_cast (%\w+) : i32 to index$", line)
        if m and m.group(1) in rows:
            rows.setdefault(m.group(2), rows[m.group(1)])
    found = {}
    for line in lines:
        m = re.match(r"\s*%\w+ = arith\.cmpi \w+, (%\w+), (%\w+) : i32$", line)
        for index, bound in ((m.group(1), m.group(2)), (m.group(2), m.group(1))) if m else ():
            k = rows.get(index)
            if k is None or consts.get(bound) != k * size or bound in found:
                continue
            if k == 1:
                found[bound] = [f"{indent}{bound} = arith.index_cast {SYMBOL} : index to i32"]
            else:
                found[bound] = [f"{indent}{bound}_m = arith.index_cast {SYMBOL} : index to i32",
                                f"{indent}{bound}_k = arith.constant {k} : i32",
                                f"{indent}{bound} = arith.muli {bound}_m, {bound}_k : i32"]
    return found


def _rows(k: int) -> str:
    """The name of the ``k·m`` row count (``%dyn_m`` itself for k = 1)."""
    return SYMBOL if k == 1 else f"{SYMBOL}{k}"


def _valid(r: int) -> str:
    """The name of a tile's valid rows at ``r`` rows per valid leading index (``%dyn_vr`` for r = 1)."""
    return VALID if r == 1 else f"{VALID}{r}"


def _row_loops(lines: list[str], kind: dict, consts: dict, t: int) -> dict:
    """{line: its rewrite} for the ``scf.for`` loops over the ``t`` rows of a tile with dynamic rows (a
    loop to ``t`` whose index picks a row of such a tile): they stop at the block's valid rows, so a
    tail block reads and writes no row past ``m``."""
    found = {}
    for n, line in enumerate(lines):
        m = _FOR.match(line)
        if not m or consts.get(m.group(3)) != t:
            continue
        depth, body = 0, []
        for inner in lines[n:]:
            depth += inner.count("{") - inner.count("}")
            body.append(inner)
            if depth <= 0:
                break
        iv = re.escape(m.group(1))
        picks = {x.group(1) for b in body for x in re.finditer(rf"(%\w+)\[{iv}\s*,", b)}
        picks |= {x.group(1) for b in body for x in re.finditer(rf"pto\.tgetval ins\((%\w+), {iv}\b", b)}
        if any(kind.get(x, ("", 0))[1] == 1 for x in picks):
            found[n] = line[:m.start(3)] + VALID + line[m.end(3):]
    return found


def _live(lines: list[str], size: int) -> list[str]:
    """``lines`` less the constants of ``k·size`` the rewrite left unused (the template's row counts)."""
    dead = {m.group(1) for m in map(_CONST.match, lines) if m and int(m.group(2)) % size == 0 and int(m.group(2))}
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


def row_vars(name: str, first, second) -> tuple[dict, dict]:
    """The row-carrying variables of two template lowerings ``first`` and ``second`` (each a
    ``(lowering, size)``) of kernel ``name``, each with its ``k``: those whose leading dim is ``k`` times
    the template size in both (``k`` a static int: ``[T·N, 128]``), at the same place of the same Block
    graph. A dim equal to a size by coincidence stays static; graphs that differ other than in those
    dims are a :class:`PtoUnsupportedError` naming what differs."""
    (low1, s1), (low2, s2) = first, second
    j1, j2 = low1.block.jaxpr, low2.block.jaxpr
    rows1, rows2 = {}, {}

    def pair(v1, v2, what):
        if hasattr(v1, "val") or hasattr(v2, "val"):
            if not (hasattr(v1, "val") and hasattr(v2, "val") and np.array_equal(v1.val, v2.val)):
                raise _twin_err(name, s1, s2, f"{what} differs")
            return
        a, b = v1.aval.shape, v2.aval.shape
        if len(a) != len(b) or v1.aval.dtype != v2.aval.dtype or any(
                x != y and not (axis == 0 and x % s1 == 0 and x * s2 == y * s1)
                for axis, (x, y) in enumerate(zip(a, b))):
            chunked = "pto.reshape" in what and len(a) == len(b) > 2      # the rows staged in chunks
            raise _twin_err(name, s1, s2, f"{what} is {_aval(v1)} at {s1} rows but {_aval(v2)} at {s2} (a dim "
                                          "that changes other than as the leading dim, k times the row count"
                                          + ("; the rows cut into chunks: a reduction or scan along the row "
                                             "axis, staged" if chunked else "") + ")")
        if a and a[0] != b[0]:
            rows1[v1] = rows2[v2] = a[0] // s1

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
    """A kernel's template lowering (leading dim ``k·size`` in its ``rows`` variables, :func:`row_vars`),
    its compiled programs and the dynamic module of them; :meth:`run` binds the symbol and runs the
    blocks a size needs, each one a call of its function in the dynamic text (:mod:`~ptojax.ascend.engine`)."""

    def __init__(self, lowering, compiled, size: int, rows: dict, arch: str = "a3"):
        several = sorted({p.program.name for e in lowering.block.jaxpr.eqns if e.primitive is ir.block_call_p
                          for p in e.params["spec"].parts if p.tiles_per_block > 1})
        if compiled.tasks or several:                  # "auto" (0) is one tile per task (DynamicBackend)
            raise PtoUnsupportedError("pto dynamic rows: blocks of several tiles (tiles_per_block > 1"
                                      f"{': ' + ', '.join(several) if several else ''}) are not supported with a "
                                      "symbolic row count")
        self.lowering, self.compiled, self.size, self.row_vars = lowering, compiled, size, rows
        names = [n for n, _ in compiled.entries()]
        self.names = dict(zip(compiled.kernels, names))
        dynamic = {}
        for eqn in self.calls():
            args = {f"%arg{k}" for k, v in enumerate(eqn.invars + eqn.outvars) if self._rows(v)}
            for part in eqn.params["spec"].parts:
                fn = self.names[(part.program.name, tuple(part.shape))]
                if dynamic.setdefault(fn, args) != args:
                    raise _err(fn, f"called with the rows in {sorted(dynamic[fn])} and in {sorted(args)}")
        self.text = dynamic_module(compiled.pto(arch), dynamic, size)
        self.rows = {}            # function -> its row tile (None: no dynamic rows)
        self.scales = {}          # function -> the k of its k·m rows
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
            scale = re.search(r"%dyn_left = arith\.subi %dyn_m(\d*), ", m.group(1)).group(1)
            self.scales[fn] = int(scale or 1)
        for eqn in self.calls():
            for part in eqn.params["spec"].parts:
                fn = self.names[(part.program.name, tuple(part.shape))]
                t = self.rows[fn]
                if t is not None and part.shape[0] * t != self.row_count(fn, size):
                    raise _err(fn, f"{part.shape[0]} blocks of {t} rows do not tile the template's "
                                   f"{self.row_count(fn, size)} rows")
        self._module = None

    def _rows(self, v) -> bool:
        return not hasattr(v, "val") and v in self.row_vars

    def calls(self):
        """The Block graph's block calls; a ``pto.reshape`` step (a view of a GM tensor: of a static one,
        or of rows that stay its leading dim, as :func:`row_vars` checked) is skipped, any other step is a
        :class:`PtoUnsupportedError`."""
        eqns = self.lowering.block.jaxpr.eqns
        control = [e.primitive.name for e in eqns if e.primitive.name in ("scan", "while", "cond")]
        for eqn in eqns:
            if eqn.primitive is ir.block_call_p:
                yield eqn
            elif eqn.primitive.name != "pto.reshape":
                what = (f"control flow on the host: a jax.lax.fori_loop, while_loop, scan or cond around the kernel's "
                        f"ops ({', '.join(sorted(set(control)))} in the Block graph)" if control
                        else "a step on the host")
                raise PtoUnsupportedError(f"pto dynamic rows: the Block graph has a {eqn.primitive} step ({what}); "
                                          "only block calls and reshapes take a symbolic row count")

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
        for e1, e2 in zip(self.calls(), other.calls()):
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

    def row_count(self, fn: str, m: int) -> int:
        """The rows function ``fn`` tiles at ``m``: ``k·m`` (its views of ``[k·m, ...]``)."""
        return self.scales.get(fn, 1) * m

    def grid(self, part, m: int) -> tuple:
        """The grid of ``part`` at ``m`` rows: ``ceil(k·m/T)`` blocks along the rows."""
        fn = self.names[(part.program.name, tuple(part.shape))]
        t = self.rows[fn]
        return tuple(part.shape) if t is None else (-(-self.row_count(fn, m) // t),) + tuple(part.shape[1:])

    def shape(self, v, m: int) -> tuple:
        return (self.row_vars[v] * m,) + tuple(v.aval.shape[1:]) if self._rows(v) else tuple(v.aval.shape)

    def run(self, arrays, m: int) -> list:
        """The kernel's flat outputs on ``arrays`` (flat inputs, ``m`` rows where the symbol is)."""
        jaxpr = self.lowering.block.jaxpr
        env = dict(zip(jaxpr.invars, [np.ascontiguousarray(a) for a in arrays]))
        env.update(zip(jaxpr.constvars, self.lowering.block.consts))
        for eqn in jaxpr.eqns:
            if eqn.primitive is not ir.block_call_p:         # a reshape (calls() admitted it)
                env[eqn.outvars[0]] = env[eqn.invars[0]].reshape(self.shape(eqn.outvars[0], m))
                continue
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
