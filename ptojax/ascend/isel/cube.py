"""Cube rules: matmuls on tiles whose physical shapes agree (left M×K, right K×N, accumulator
M×N), a transposed operand loaded through a ``dn`` view of its GM tensor, the bias row through the
bias table (``tmatmul.bias``), and the accumulator converted on its way out (FIXPIPE).

Also the ``tload`` rule of every load, so the GM windows it reads are planned here: besides the
``dn`` windows, a column tile's window whose rows span several GM dims (a ``(32, 4, 1)`` window of
a ``keepdims`` row sum) is read through a 2-D ``rows x cols`` twin view of its tensor: pto-isa's
``TLOAD`` into a column-major tile takes the rows from the window's second-to-last dim alone
(``CheckTileData``: ``DIM_3 == ValidRow``), and aborted on the multi-dim window."""
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
        self.column_windows: set = set()        # partitions read through a rows x cols twin
        loads, movs, matmuls, views = {}, {}, [], {}
        for stmt in _walk(body):
            if isinstance(stmt, asm.PartitionView):
                views[stmt.name] = stmt
            elif isinstance(stmt, asm.Instr) and stmt.op == "tload":
                loads[stmt.outs[0].name] = (stmt.ins[0].name, stmt.outs[0].type)
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
            mp, kp, np_ = _up(m, 16), _up(k, max(16, 32 // item)), _up(n, max(16, 32 // rt.np_dtype.itemsize))
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
        for tile, (window, t) in loads.items():
            p = views.get(window)
            if p is not None and _column(t) and _spread_rows(p.type.shape, p.source.shape):
                self.row_views[p.view] = p.view + "_rows"
                self.dn_views.setdefault(p.view, None)         # (the selector prints a view's twins here)
                self.transposed_windows[window] = window + "_c"
                self.column_windows.add(window)


def _column(t) -> bool:
    """Whether selection types codegen's tile ``t`` as a column (``R x 1``, column-major)."""
    return isinstance(t, asm.TileBuf) and t.loc == "vec" and t.v_col == 1 and t.rows == t.v_row


def _spread_rows(window, shape) -> bool:
    """Whether a window's rows (all dims but the last) span several dims of the tensor, each after the
    first one the window takes whole (so the rows are one run of the tensor's flattened rows)."""
    lead, dims = tuple(window[:-1]), tuple(shape[:-1])
    spread = [i for i, n in enumerate(lead) if n != 1]
    return len(spread) > 1 and all(lead[j] == dims[j] for j in range(spread[0] + 1, len(lead)))


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


@rule("tload")
def load(sel, s, ins, outs):
    if ins[0] in sel.cube.transposed_windows:
        ins = [sel.cube.transposed_windows[ins[0]]]
    sel.print("tload", ins, outs)


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
    """A column tile's window whose rows span several dims, in its tensor's rows x cols twin view."""
    *lead, _ = s.source.shape
    rows = math.prod(s.type.shape[:-1])
    row = _flat_row(sel, s.offsets[:-1], lead)
    view = sel.cube.row_views[s.view]
    name = sel.cube.transposed_windows[s.name]
    t = asm.ViewType((rows, s.type.shape[-1]), s.type.dtype, True)
    sel.types[name] = t
    sel.lines.append(f"{name} = pto.partition_view {view}, offsets = [{row}, {s.offsets[-1]}], sizes = "
                     f"[{sel.const(rows, 'index')}, {s.sizes[-1]}] : {sel.types[view]} -> {t}")
