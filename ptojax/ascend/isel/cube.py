"""Cube rules: matmuls on tiles whose physical shapes agree (left M×K, right K×N, accumulator
M×N), a transposed operand loaded through a ``dn`` view of its GM tensor, the bias row through the
bias table (``tmatmul.bias``), and the accumulator converted on its way out (FIXPIPE).

Also the ``tload`` / ``tstore`` rule of every transfer, so the GM windows are planned here: besides
the ``dn`` windows, a column tile's window whose rows are not along the second-to-last dim alone (a
``(32, 4, 1)`` window of a ``keepdims`` row sum, a ``(7, 1, 1)`` tensor) goes through a 2-D twin view
of its tensor: pto-isa's ``TLOAD`` into a column-major tile takes the rows from the window's
second-to-last dim alone (``CheckTileData``: ``DIM_3 == ValidRow``) and aborted on the multi-dim
window; its ``TSTORE`` wrote them as one run, wrong where they lie apart. One run of the flattened
rows is the window of a ``rows x cols`` twin; runs the same distance apart (a ``(2, 16, 1)`` window
of a ``(2, 32, 1)`` concatenation) move as a row-major alias of the column, one run per row, through
a ``(…) x R`` twin; others run by run (:func:`_column_form`)."""
from __future__ import annotations

import math

from ...errors import PtoUnsupportedError
from .. import asm
from .rules import rule


class CubePlan:
    """The cube tiles of a kernel as the real matmul wants them: a transposed operand is loaded
    through a ``dn`` view of its GM tensor into ``zn`` tiles of the transposed shape, and the
    physical shapes of left (M×K), right (K×N) and accumulator (M×N) tiles agree."""

    def __init__(self, body):
        self.types: dict = {}                   # tile name -> its real TileBuf where it differs
        self.dn_views: dict = {}                # nd view name -> its dn twin's name
        self.transposed_windows: dict = {}      # partition name -> its dn (or rows x cols) twin's name
        self.row_views: dict = {}               # nd view name -> its 2-D rows x cols twin's name
        self.run_views: dict = {}               # nd view (…, R, 1) name -> its 2-D (…) x R twin's name
        self.run_windows: dict = {}             # twin partition moved run by run -> (view, offsets, sizes, row dims)
        self.column_windows: dict = {}          # a column tile's partition -> its form (_column_form)
        loads, movs, matmuls, views, transfers = {}, {}, [], {}, []
        for stmt in _walk(body):
            if isinstance(stmt, asm.PartitionView):
                views[stmt.name] = stmt
            elif isinstance(stmt, asm.Instr) and stmt.op == "tload":
                loads[stmt.outs[0].name] = (stmt.ins[0].name, stmt.outs[0].type)
                transfers.append((stmt.ins[0].name, stmt.outs[0].type))
            elif isinstance(stmt, asm.Instr) and stmt.op == "tstore":
                transfers.append((stmt.outs[0].name, stmt.ins[0].type))
            elif isinstance(stmt, asm.Instr) and stmt.op == "tmov":
                movs[stmt.outs[0].name] = (stmt.ins[0].name, stmt.ins[0].type)
            elif isinstance(stmt, asm.Instr) and stmt.op in ("tmatmul", "tmatmul_acc"):
                matmuls.append(stmt)
        for mm in matmuls:
            if mm.op == "tmatmul" and len(mm.ins) == 3:
                b = mm.ins[2].type
                self.types[mm.ins[2].name] = asm.TileBuf(b.loc, b.dtype, 1, _up(b.v_col, 16), 1, b.v_col,
                                                         "row_major", "none_box")
            tiles = [o for o in mm.ins if o.type.loc in ("left", "right")]
            acc = mm.outs[0].type
            (left, lt), (right, rt) = ((o.name, o.type) for o in tiles)
            ta, tb = mm.attr("transpose_a"), mm.attr("transpose_b")
            m, k = (lt.v_col, lt.v_row) if ta else (lt.v_row, lt.v_col)
            n = rt.v_row if tb else rt.v_col
            item = max(lt.np_dtype.itemsize, rt.np_dtype.itemsize)
            # a transposed (zN) L1 tile's rows are whole inner boxes of 32 bytes (pto-isa's Tile: 32 int8 rows)
            mp = _up(m, max(16, 32 // lt.np_dtype.itemsize) if ta else 16)
            kp, np_ = _up(k, max(16, 32 // item)), _up(n, max(16, 32 // rt.np_dtype.itemsize))
            self.types[mm.outs[0].name] = _cube_tile(acc, mp, np_, m, n)
            for name, t, shape, flip in ((left, lt, (mp, kp, m, k), ta), (right, rt, (kp, np_, k, n), tb)):
                self.types[name] = _cube_tile(t, *shape)
                src = movs.get(name)
                if src is None:
                    continue
                mat, mt = src
                self.types[mat] = _cube_tile(mt, *shape, zn=flip)
                if flip and mat in loads:
                    window = loads[mat][0]
                    view = views[window].view
                    self.dn_views[view] = view + "_dn"
                    self.transposed_windows[window] = window + "_t"
        for window, t in transfers:
            p = views.get(window)
            if p is None or not _column(t):
                continue
            form = _column_form(p.type.shape, p.source.shape, t.np_dtype.itemsize)
            if form is None:
                continue
            twins = self.run_views if form[0] == "runs" else self.row_views
            twins[p.view] = p.view + ("_runs" if form[0] == "runs" else "_rows")
            self.dn_views.setdefault(p.view, None)         # (the selector prints a view's twins here)
            self.transposed_windows[window] = window + "_c"
            self.column_windows[window] = form


def _column(t) -> bool:
    """Whether selection types codegen's tile ``t`` as a column (``R x 1``, column-major)."""
    return (isinstance(t, asm.TileBuf) and t.loc == "vec" and t.v_col == 1
            and (t.rows == t.v_row or t.blayout == "col_major"))


def _one_run(window, shape) -> bool:
    """Whether a window's elements along ``shape``'s dims are one run of them flattened: every dim
    after the first the window takes more than one of is taken whole."""
    spread = [i for i, n in enumerate(window) if n != 1]
    return not spread or all(window[j] == shape[j] for j in range(spread[0] + 1, len(window)))


def _column_form(window, shape, item: int) -> tuple | None:
    """How a column tile's window moves when its rows (all dims but the last) are not along the
    second-to-last dim alone, as pto-isa's ``TLOAD``/``TSTORE`` of a column-major tile take them
    (``CheckTileData``: ``DIM_3 == ValidRow``); None where they are. ``("run", rows)``: one run of the
    tensor's flattened rows, a window of its ``rows x cols`` twin; ``("runs", runs, rows)``: runs of the
    second-to-last dim the same distance apart in a tensor of one column, a window of its ``(…) x R``
    twin moved as a row-major alias of the column (one run per row, whose rows take a multiple of 32
    bytes); ``("each", runs, rows)``: any other, run by run (:func:`_run_by_run`)."""
    lead, dims = tuple(window[:-1]), tuple(shape[:-1])
    if len(lead) < 2 or all(n == 1 for n in lead[:-1]):
        return None
    if _one_run(lead, dims):
        return "run", math.prod(lead)
    runs, rows = math.prod(lead[:-1]), lead[-1]
    if shape[-1] == 1 and _one_run(lead[:-1], dims[:-1]) and rows * item % 32 == 0:
        return "runs", runs, rows
    return "each", runs, rows


def _walk(body):
    for stmt in body:
        if isinstance(stmt, asm.For):
            yield from _walk(stmt.body)
        else:
            yield stmt


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def _cube_tile(t: asm.TileBuf, rows, cols, v_row, v_col, zn=False) -> asm.TileBuf:
    blayout, slayout = ("row_major", "col_major") if zn else (t.blayout, t.slayout)
    return asm.TileBuf(t.loc, t.dtype, rows, cols, v_row, v_col, blayout, slayout, t.fractal, t.pad)


@rule("tload", "tstore")
def transfer(sel, s, ins, outs):
    """A load or store, through the window's twin where it has one (a column tile's window:
    :func:`_column_form`)."""
    window, tile = (ins[0], outs[0]) if s.op == "tload" else (outs[0], ins[0])
    if window in sel.cube.transposed_windows:
        form = sel.cube.column_windows.get(window, ("run",))
        if form[0] == "each":
            return _run_by_run(sel, s.op, sel.cube.transposed_windows[window], tile, *form[1:])
        if form[0] == "runs":
            t = sel.types[tile]
            tile = sel.reshape(tile, asm.TileBuf("vec", t.dtype, *form[1:], *form[1:], "row_major", "none_box"))
        window = sel.cube.transposed_windows[window]
        ins, outs = ([window], [tile]) if s.op == "tload" else ([tile], [window])
    sel.print(s.op, ins, outs)


def _run_by_run(sel, op: str, window: str, column: str, runs: int, rows: int):
    """A column tile's window of ``runs`` runs of ``rows`` rows each, run by run (an ``scf.for``): a run
    is a ``rows x 1`` window of its tensor's ``rows x cols`` twin, moved through a row-major work tile
    of one value per 32-byte row, its values copied to or from the column one by one (``tgetval`` /
    ``tsetval``)."""
    view, offsets, sizes, dims = sel.cube.run_windows[window]
    t = sel.types[column]
    pitch = 32 // t.np_dtype.itemsize
    work = sel.alloc(asm.TileBuf("vec", t.dtype, rows, pitch, rows, 1, "row_major", "none_box"))
    wt, part = sel.types[work], asm.ViewType((rows, 1), t.dtype, True)
    index = lambda value: sel.const(int(value), "index")         # noqa: E731
    body: list = []

    def arith(op_, a, b):
        name = sel.fresh("o")
        body.append(f"{name} = arith.{op_} {a}, {b} : index")
        return name

    j = sel.fresh("j")
    along, rest = [], j                           # the run's index along each leading dim of the window
    for size in reversed(sizes[1:-2]):
        along.insert(0, arith("remsi", rest, index(size)))
        rest = arith("divsi", rest, index(size))
    along.insert(0, rest)
    row = arith("addi", offsets[0], along[0])     # the run's first row among the twin's (flattened) rows
    for d in range(1, len(dims)):
        here = arith("addi", offsets[d], along[d]) if d < len(along) else offsets[d]
        row = arith("addi", arith("muli", row, index(dims[d])), here)
    run = sel.fresh("run")
    sel.types[run] = part
    body.append(f"{run} = pto.partition_view {view}, offsets = [{row}, {offsets[-1]}], sizes = [{index(rows)}, "
                f"{index(1)}] : {sel.types[view]} -> {part}")
    if op == "tload":
        body.append(f"pto.tload ins({run} : {part}) outs({work} : {wt})")
    first, r = arith("muli", j, index(rows)), sel.fresh("r")
    outer, body = body, []
    q, w = arith("addi", first, r), arith("muli", r, index(pitch))
    value = sel.fresh("v")
    sel.types[value] = t.dtype
    (src, ts, i), (dst, td, o) = ((work, wt, w), (column, t, q))[:: 1 if op == "tload" else -1]
    body += [f"{value} = pto.tgetval ins({src}, {i} : {ts}, index) outs : {t.dtype}",
             f"pto.tsetval ins({o}, {value} : index, {t.dtype}) outs({dst} : {td})"]
    outer += [f"scf.for {r} = {index(0)} to {index(rows)} step {index(1)} {{"] + ["  " + b for b in body] + ["}"]
    if op == "tstore":
        outer.append(f"pto.tstore ins({work} : {wt}) outs({run} : {part})")
    sel.lines += [f"scf.for {j} = {index(0)} to {index(runs)} step {index(1)} {{"] + ["  " + b for b in outer] + ["}"]


@rule('tmatmul')
def matmul(sel, s, ins, outs):
    if len(ins) == 3:
        # The bias row moves to the bias table first, as a whole row: ptoas prints a partly valid bias
        # tile as an alias ``uint64_t v = full.data()``, which pto-isa's Bias TileDType (float*) does not
        # convert to. tmatmul.bias reads the first N (the product's valid columns) of the row.
        row, t = ins[2], sel.types[ins[2]]
        if t.v_col != t.cols:
            row = sel.reshape(row, _cube_tile(t, t.rows, t.cols, t.v_row, t.cols))
        bias = sel.alloc(asm.TileBuf("bias", t.dtype, 1, t.cols, 1, t.cols, "row_major", "none_box"))
        sel.print("tmov", [row], [bias])
        return sel.print("tmatmul.bias", [ins[0], ins[1], bias], outs)
    sel.print("tmatmul", ins, outs)


@rule('tmatmul_acc')
def matmul_acc(sel, s, ins, outs):
    sel.print("tmatmul.acc", ins, outs)


def dn_view(sel, s: asm.MakeView):
    """The twins of a GM tensor's view (…, R, C) that selection reads through: its (…·R) × C rows (a
    column tile's window), and its column-major (``dn``) view, the C × (…·R) transpose of its rows, for
    a transposed operand (a batch's rows follow the previous batch's)."""
    *lead, cols = s.type.shape
    rows = math.prod(lead)
    if s.name in sel.cube.run_views:
        name, outer = sel.cube.run_views[s.name], math.prod(lead[:-1])
        t = asm.ViewType((outer, lead[-1]), s.type.dtype)
        sel.types[name] = t
        sel.lines.append(f"{name} = pto.make_tensor_view {s.ptr}, shape = [{sel.const(outer, 'index')}, "
                         f"{s.shape[-2]}], strides = [{s.shape[-2]}, {sel.const(1, 'index')}] : {t}")
    if s.name in sel.cube.row_views:
        name = sel.cube.row_views[s.name]
        t = asm.ViewType((rows, cols), s.type.dtype)
        sel.types[name] = t
        sel.lines.append(f"{name} = pto.make_tensor_view {s.ptr}, shape = [{sel.const(rows, 'index')}, "
                         f"{s.shape[-1]}], strides = [{s.shape[-1]}, {sel.const(1, 'index')}] : {t}")
    name = sel.cube.dn_views[s.name]
    if name is None:
        return
    t = asm.ViewType((cols, rows), s.type.dtype)
    sel.types[name] = t
    sel.lines.append(f"{name} = pto.make_tensor_view {s.ptr}, shape = [{s.shape[-1]}, {sel.const(rows, 'index')}], "
                      f"strides = [{sel.const(1, 'index')}, {s.shape[-1]}] {{layout = #pto.layout<dn>}} : {t}")


def dn_partition(sel, s: asm.PartitionView):
    """The window of a transposed operand in the ``dn`` view: (cols, rows) of the flattened rows; a
    column tile's window in the rows x cols view: its rows, one run of the flattened rows."""
    if s.name in sel.cube.column_windows:
        return _rows_partition(sel, s)
    *lead, _ = s.source.shape
    *lead_sizes, rows, cols = s.type.shape
    if any(n != 1 for n in lead_sizes):
        raise PtoUnsupportedError(f"pto realize: a transposed matmul operand window {list(s.type.shape)} spans "
                                  "several batches")
    row = _flat_row(sel, s.offsets[:-1], lead)
    name = sel.cube.transposed_windows[s.name]
    t = asm.ViewType((cols, rows), s.type.dtype, True)
    sel.types[name] = t
    sel.lines.append(f"{name} = pto.partition_view {sel.cube.dn_views[s.view]}, offsets = "
                      f"[{s.offsets[-1]}, {row}], sizes = [{s.sizes[-1]}, {s.sizes[-2]}] : "
                      f"{sel.types[sel.cube.dn_views[s.view]]} -> {t}")


def _flat_row(sel, offsets, extents) -> str:
    """The flattened row ``((o0 * d1 + o1) * d2 + ...)`` of per-dim row offsets (index SSA names)."""
    row = offsets[0]
    for offset, extent in zip(offsets[1:], extents[1:]):
        scaled = sel.fresh("o")
        sel.lines.append(f"{scaled} = arith.muli {row}, {sel.const(extent, 'index')} : index")
        row = sel.fresh("o")
        sel.lines.append(f"{row} = arith.addi {scaled}, {offset} : index")
    return row


def _rows_partition(sel, s: asm.PartitionView):
    """A column tile's window (:func:`_column_form`) in its twin view: one run as a window of the
    ``rows x cols`` twin, runs the same distance apart as a ``(runs, rows)`` window of the ``(…) x R``
    twin; run by run, each run's in the loop that moves it (its offsets kept here)."""
    *lead, _ = s.source.shape
    form = sel.cube.column_windows[s.name]
    name = sel.cube.transposed_windows[s.name]
    if form[0] == "each":
        sel.cube.run_windows[name] = (sel.cube.row_views[s.view], s.offsets, s.type.shape, tuple(lead))
        return
    if form[0] == "run":
        view, offsets = sel.cube.row_views[s.view], (_flat_row(sel, s.offsets[:-1], lead), s.offsets[-1])
        shape = (form[1], s.type.shape[-1])
    else:
        view, offsets = sel.cube.run_views[s.view], (_flat_row(sel, s.offsets[:-2], lead[:-1]), s.offsets[-2])
        shape = form[1:]
    t = asm.ViewType(shape, s.type.dtype, True)
    sel.types[name] = t
    sel.lines.append(f"{name} = pto.partition_view {view}, offsets = [{offsets[0]}, {offsets[1]}], sizes = "
                     f"[{sel.const(shape[0], 'index')}, {sel.const(shape[1], 'index')}] : {sel.types[view]} -> {t}")
