"""Row rules: indexed rows between GM and tiles (``mgather`` / ``mscatter``), in-tile row gathers and
updates (``tgather`` / ``tscatter_update`` / ``tindex_add``), and scans (``tcumsum``).

No real instruction does any of these on A2/A3 (PTOAS has ``pto.mgather`` / ``pto.mscatter`` for A5
only, per-element, and no scan at all), so they are loops of real instructions:

- a row loop (``scf.for``) reads each index from the index tile with the scalar unit
  (``pto.tgetval``), tests it with one unsigned compare (``arith.cmpi ult``: negative or past the end
  is out of range) and, under ``scf.if``, moves one row: ``pto.tload`` from a ``pto.partition_view``
  of the GM tensor at that row into a ``pto.subset`` row of the destination (``mgather``; the
  destination is zeroed first, so out-of-range rows read as zeros), ``pto.tstore`` from a subset row
  (``mscatter``; ``atomicType = atomic_add`` when it accumulates; out-of-range rows write nothing), or
  a vector copy / ``tadd`` between subset rows of two tiles (the in-tile forms). Rows go in index
  order, so a repeated index keeps the last write or adds in index order, as the private semantics
  say. The same loops are printed for A5 (its ``pto.mgather`` takes per-element indices).
- ``tcumsum`` scans along a leading axis: ``block[k] = block[k-1] + block[k]`` with ``tadd`` on
  ``pto.subset`` row blocks in an ``scf.for`` (``reverse``: from the end). A scan along the last axis
  transposes (``ttrans``) into a ``C x R`` work tile, scans its rows by doubling (``log2 C`` passes of
  one ``tadd`` over subsets of whole rows, into a second work tile) and transposes back; a column
  ``subset`` would be neither 32-byte aligned nor keep the row pitch. A column tile (a value per row)
  scans its ``R`` values as the rows of an ``R x 1`` work tile, in groups along a leading axis; a scan
  along an axis of one is a copy. Floats accumulate in ``f32`` and round once at the end (``tcvt``),
  integers in their own dtype (``i8`` through ``i16``). ``tcumsum_carry`` is a last-axis scan that
  adds each row's carry to its first value scanned and keeps the last: a long row's column chunks in
  one program's loop (``lowering/tiling.py``); a few very long rows are staged before selection
  (``lowering/reduce.py``).

PTOAS facts these rules rely on (checked with ``ptoas --pto-arch=a3|a5 --enable-insert-sync``):

- ``pto.subset %t[%i, %j] sizes [r, c] : T`` infers its type: ``r x c`` with the parent's layout; each
  valid dim is ``?`` when its offset is not an ``arith.constant``, else ``min(size, valid - off % valid)``.
- an ``index`` value cast from a ``tgetval`` result may feed ``partition_view`` / ``subset`` offsets,
  but ``arith`` on it (``cmpi``, ``minsi``, ``muli``) fails in PTOAS's C++ emission ("unsupported
  operation"); so range tests and scaling happen on the ``i32`` before ``arith.index_cast``.
"""
from __future__ import annotations

import contextlib
import math

from .. import asm
from .rules import rule
from .selector import _bytes, is_column, matrix, vec_tile

_FILLS = {"f32", "f16", "i16", "i32"}           # texpands dtypes on A2/A3
_ACC = {"f16": "f32", "bf16": "f32", "i8": "i16"}


# ------------------------------------------------------------------------------------------ helpers
@contextlib.contextmanager
def _block(sel, header: str):
    """Statements printed inside ``header { ... }`` (an ``scf.for`` / ``scf.if``)."""
    sel.lines.append(header + " {")
    outer, sel.lines = sel.lines, []
    try:
        yield
    finally:
        inner, sel.lines = sel.lines, outer
        sel.lines += ["  " + line for line in inner] + ["}"]


def row_major(rows: int, cols: int, dtype: str) -> asm.TileBuf:
    """A row-major work tile even of one column (``vec_tile`` makes those columns), so that its rows
    are the blocks a scan steps through."""
    t = vec_tile(rows, max(cols, 2), dtype)
    return asm.TileBuf("vec", dtype, rows, t.cols, rows, cols)


def one_per_row(sel, tile: str) -> str:
    """A column tile's values one per row of a row-major work tile (its ``ttrans``): there each value
    starts a 32-byte aligned row that subsets, copies and expansions can address. A row-major tile of
    one column already is one."""
    if not is_column(sel.types[tile]):
        return tile
    t = sel.types[tile]
    work = sel.alloc(row_major(t.v_row, 1, t.dtype))
    src = sel.row(tile)
    sel.print("ttrans", [src, sel.like(src)], [work])
    return work


def from_rows(sel, work: str, out: str):
    """Column tile ``out`` := the values of :func:`one_per_row` work tile ``work`` (its ``ttrans``)."""
    if not is_column(sel.types[out]):
        return sel.copy(work, out)
    sel.print("ttrans", [work, sel.like(work)], [sel.row(out)])


def _for(sel, upper: int, lower: int = 0):
    var = sel.fresh("rq")
    sel.types[var] = "index"
    return var, _block(sel, f"scf.for {var} = {_idx(sel, lower)} to {_idx(sel, upper)} step {_idx(sel, 1)}")


def _idx(sel, value) -> str:
    return value if isinstance(value, str) else sel.const(int(value), "index")


def _arith(sel, op: str, a, b, type_: str = "index") -> str:
    name = sel.fresh("rx")
    sel.types[name] = type_
    sel.lines.append(f"{name} = arith.{op} {_idx(sel, a) if type_ == 'index' else a}, "
                     f"{_idx(sel, b) if type_ == 'index' else b} : {type_}")
    return name


def _scale(sel, value, factor: int, plus=0):
    """``value * factor + plus`` as index arithmetic (constants fold here)."""
    if factor != 1:
        value = _arith(sel, "muli", value, factor)
    if not isinstance(plus, str) and plus == 0:
        return value
    return _arith(sel, "addi", value, plus)


def _zero(sel, tile: str):
    """Fill the whole of ``tile`` with zero bits (``texpands``; other dtypes through an ``i16`` alias)."""
    tile = sel.row(tile)
    t = sel.types[tile]
    if t.dtype in _FILLS:
        full = tile if (t.v_row, t.v_col) == (t.rows, t.cols) else sel.reshape(
            tile, asm.TileBuf(t.loc, t.dtype, t.rows, t.cols, t.rows, t.cols, t.blayout, t.slayout, t.fractal, t.pad))
        return sel.print("texpands", [sel.const(0, t.dtype)], [full])
    cols = t.cols * t.np_dtype.itemsize // 2
    alias = sel.reshape(tile, asm.TileBuf(t.loc, "i16", t.rows, cols, t.rows, cols, t.blayout, t.slayout,
                                          t.fractal, t.pad))
    sel.print("texpands", [sel.const(0, "i16")], [alias])


def _copy(sel, src: str, dst: str):
    """A vector copy between tiles of one valid shape (``tmuls`` by one keeps -0.0 and NaN)."""
    dtype = sel.types[dst].dtype
    sel.print("tmuls", [src, sel.const(1, dtype)], [dst])


def _bits(sel, tile: str) -> str:
    """``tile`` itself, or for a dtype A2/A3 cannot compute in (``bf16``, ``i8``) an ``i16`` alias of its
    bytes (row copies are bit copies)."""
    t = sel.types[tile]
    if t.dtype not in ("bf16", "i8"):
        return tile
    item = t.np_dtype.itemsize
    return sel.reshape(tile, asm.TileBuf(t.loc, "i16", t.rows, t.cols * item // 2, t.v_row,
                                         -(-t.v_col * item // 2), t.blayout, t.slayout, t.fractal, t.pad))


def _index(sel, s, idx: str, flat, count: int):
    """The ``flat``-th index of index tile ``idx`` (``count`` of them) as its scalar, and ``i1`` "in
    range ``[0, n)``" is made by the caller. Returns the scalar name."""
    t = sel.types[idx]
    if not isinstance(t, asm.TileBuf) or t.loc != "vec":
        sel.fail(s, "with an index tile outside UB (the scalar unit reads indices from vec tiles only)")
    if t.dtype not in ("i32", "i16", "i64"):
        sel.fail(s, f"with {t.dtype} indices")
    vr, vc = t.v_row, t.v_col
    if vr * vc < count:
        sel.fail(s, f"with {count} indices in a {vr}x{vc} index tile")
    offset = flat
    if vr > 1 and vc != t.cols:               # row pitch differs from the valid width: (i / vc) * cols + i % vc
        offset = _arith(sel, "addi", _arith(sel, "muli", _arith(sel, "divsi", flat, vc), t.cols),
                        _arith(sel, "remsi", flat, vc))
    value = sel.fresh("ri")
    sel.types[value] = t.dtype
    sel.lines.append(f"{value} = pto.tgetval ins({idx}, {offset} : {t}, index) outs : {t.dtype}")
    return value


def _in_range(sel, value: str, n: int) -> str:
    """``0 <= value < n`` as one unsigned compare on the integer index."""
    dtype = sel.types[value]
    ok = sel.fresh("rok")
    sel.types[ok] = "i1"
    sel.lines.append(f"{ok} = arith.cmpi ult, {value}, {sel.const(n, dtype)} : {dtype}")
    return ok


def _as_index(sel, value: str, factor: int = 1) -> str:
    """Integer index ``value`` (times ``factor``, in its own type) as an ``index``."""
    dtype = sel.types[value]
    if factor != 1:
        value = _arith(sel, "muli", value, sel.const(factor, dtype), dtype)
    name = sel.fresh("rix")
    sel.types[name] = "index"
    sel.lines.append(f"{name} = arith.index_cast {value} : {dtype} to index")
    return name


def _delinearize(sel, flat, dims) -> list:
    """Row-major indices of ``flat`` over ``dims``."""
    out = []
    for d in range(len(dims)):
        inner = math.prod(dims[d + 1:])
        value = flat if inner == 1 else _arith(sel, "divsi", flat, inner)
        if d > 0 and dims[d] > 1:
            value = _arith(sel, "remsi", value, dims[d])
        out.append(value if dims[d] > 1 else 0)
    return out


def _row_plan(sel, s, gm_shape, axis, idx_count, tile: str, what: str):
    """(lead dims, rows per slab ``m``) of a row gather/scatter over ``gm_shape`` on ``axis``, checked
    against ``tile`` (``prod(lead) * count * m`` x ``D`` valid)."""
    gm_shape = tuple(gm_shape)
    if axis >= len(gm_shape) - 1:
        sel.fail(s, f"of single elements (axis {axis} of a {list(gm_shape)} tensor): rows only")
    lead, rest = gm_shape[:axis], gm_shape[axis + 1:]
    m, width = math.prod(rest[:-1]), rest[-1]
    t = sel.types[tile]
    want = (math.prod(lead) * idx_count * m, width)
    if (t.v_row, t.v_col) != want:
        sel.fail(s, f"with a {t.v_row}x{t.v_col} {what} tile for {want[0]}x{want[1]} rows")
    return lead, m


def _gm_row(sel, view: str, lead_ix, row_ix):
    """``pto.partition_view`` of GM ``view`` at (``lead_ix``, ``row_ix``, 0...): one slab."""
    vt = sel.types[view]
    shape = tuple(vt.shape)
    k = len(lead_ix)
    offsets = [_idx(sel, o) for o in lead_ix] + [row_ix] + [_idx(sel, 0)] * (len(shape) - k - 1)
    sizes = (1,) * (k + 1) + shape[k + 1:]
    pt = asm.ViewType(sizes, vt.dtype, True)
    name = sel.fresh("rg")
    sel.types[name] = pt
    sel.lines.append(f"{name} = pto.partition_view {view}, offsets = [{', '.join(offsets)}], "
                     f"sizes = [{', '.join(_idx(sel, x) for x in sizes)}] : {vt} -> {pt}")
    return name


def _made(sel, view: str):
    """The ``pto.make_tensor_view`` statement of GM view ``view`` in the kernel body, or None."""
    return next((st for st in sel.kernel.body if isinstance(st, asm.MakeView) and st.name == view), None)


def _slab_row(sel, lead_flat, row_ix, n: int):
    """The flattened slab index ``lead_flat * n + row_ix`` (``row_ix`` where there are no lead dims)."""
    return row_ix if lead_flat is None else _arith(sel, "addi", _arith(sel, "muli", lead_flat, n), row_ix)


def _rows_view(sel, view: str, shape, axis: int, always: bool = False):
    """GM tensor ``view`` as its rows (every dim but the last flattened), where a slab after ``axis``
    spans several dims (or ``always``): its window in the tensor's own view would have the slab's first
    dim, not its rows, second to last, which a column tile's load or store cannot move. None where the
    slab is one (rows, width) window already, or the tensor is not contiguous."""
    if len(shape) - axis - 1 <= 2 and not always:
        return None
    made = _made(sel, view)
    # codegen names index constants %c<value>; a unit dim's stride is any
    contiguous = [f"%c{math.prod(shape[d + 1:])}" for d in range(len(shape))]
    if made is None or any(n != 1 and st != want for n, st, want in zip(shape, made.strides, contiguous)):
        return None
    name = sel.fresh("rv")
    t = sel.types[name] = asm.ViewType((math.prod(shape[:-1]), shape[-1]), _bytes(made.type).dtype)  # bool: i8
    sel.lines.append(f"{name} = pto.make_tensor_view {made.ptr}, shape = [{sel.const(t.shape[0], 'index')}, "
                     f"{made.shape[-1]}], strides = [{made.shape[-1]}, {sel.const(1, 'index')}] : {t}")
    return name


def _slab(sel, view: str, rows_view, lead_ix, lead_flat, row_ix, n: int, m: int):
    """The window of the slab at (``lead_ix``, ``row_ix``) of GM ``view`` (:func:`_gm_row`), or in its
    ``rows_view`` (:func:`_rows_view`): ``m`` rows from row ``(lead_flat * n + row_ix) * m``."""
    if rows_view is None:
        return _gm_row(sel, view, lead_ix, row_ix)
    row = _slab_row(sel, lead_flat, row_ix, n)
    vt = sel.types[rows_view]
    pt = asm.ViewType((m, vt.shape[1]), vt.dtype, True)
    name = sel.fresh("rg")
    sel.types[name] = pt
    sel.lines.append(f"{name} = pto.partition_view {rows_view}, offsets = [{_scale(sel, row, m)}, {_idx(sel, 0)}], "
                     f"sizes = [{_idx(sel, m)}, {_idx(sel, vt.shape[1])}] : {vt} -> {pt}")
    return name


def _unaligned_column(sel, tile: str, m: int) -> bool:
    """Whether ``tile`` is a column tile whose slabs of ``m`` rows are no whole 32-byte rows: a subset
    of them is no tile pto-isa compiles (a column-major tile's rows must fill 32-byte boxes)."""
    t = sel.types[tile]
    return is_column(t) and m * t.np_dtype.itemsize % 32 != 0


def _column_slabs(sel, s, view, idx, tile, shape, axis, count, lead, m, *, store: bool):
    """A row gather (``store`` False) or scatter of :func:`_unaligned_column` slabs, element by
    element through the tensor's rows view (one element per row): a scatter's elements each read
    from the tile (``pto.tgetval``), set into a one-element tile and stored to its one-element
    window (``atomic_add`` when it accumulates); a gather's each read from GM (``pto.load_scalar``)
    and set into the tile (``pto.tsetval``). Out-of-range indices move nothing."""
    rows_view = _rows_view(sel, view, shape, axis, always=True)
    if rows_view is None:
        sel.fail(s, f"of {m}-row slabs of a strided GM tensor into a column tile")
    t, vt = sel.types[tile], sel.types[rows_view]
    ptr = _made(sel, view).ptr
    if store:
        cell = sel.alloc(asm.TileBuf("vec", t.dtype, 1, 32 // t.np_dtype.itemsize, 1, 1))
        attr = " {atomicType = #pto<atomic_type atomic_add>}" if s.attr("accumulate") else ""
    else:
        _zero(sel, tile)
    q, loop = _for(sel, math.prod(lead) * count)
    with loop:
        i = q if not lead else _arith(sel, "remsi", q, count)
        value = _index(sel, s, idx, i, count)
        with _block(sel, f"scf.if {_in_range(sel, value, shape[axis])}"):
            row = _slab_row(sel, _arith(sel, "divsi", q, count) if lead else None, _as_index(sel, value), shape[axis])
            r, inner = _for(sel, m)
            with inner:
                at, pos = _scale(sel, row, m, r), _scale(sel, q, m, r)       # the GM row, the tile row
                element = sel.fresh("re")
                sel.types[element] = t.dtype
                if store:
                    sel.lines.append(f"{element} = pto.tgetval ins({tile}, {pos} : {t}, index) outs : {t.dtype}")
                    sel.lines.append(f"pto.tsetval ins({_idx(sel, 0)}, {element} : index, {t.dtype}) "
                                     f"outs({cell} : {sel.types[cell]})")
                    dst = sel.fresh("rg")
                    pt = sel.types[dst] = asm.ViewType((1, 1), t.dtype, True)
                    sel.lines.append(f"{dst} = pto.partition_view {rows_view}, offsets = [{at}, {_idx(sel, 0)}], "
                                     f"sizes = [{_idx(sel, 1)}, {_idx(sel, 1)}] : {vt} -> {pt}")
                    sel.lines.append(f"pto.tstore ins({cell} : {sel.types[cell]}) outs({dst} : {pt}){attr}")
                else:
                    sel.lines.append(f"{element} = pto.load_scalar {ptr}[{at}] : !pto.ptr<{t.dtype}> -> {t.dtype}")
                    sel.lines.append(f"pto.tsetval ins({pos}, {element} : index, {t.dtype}) outs({tile} : {t})")


def _view_shape(sel, s, view: str):
    vt = sel.types[view]
    if not isinstance(vt, asm.ViewType) or vt.partition:
        sel.fail(s, "on an operand that is not a whole GM tensor view")
    return tuple(vt.shape)


# ------------------------------------------------------------------------------------- GM rows
@rule("mgather")
def mgather(sel, s, ins, outs):
    """``out[q] = gm[.., idx[i], ..]`` row by row; rows of out-of-range indices stay zero."""
    view, idx = ins[0], ins[1]
    out = outs[0]
    shape = _view_shape(sel, s, view)
    axis = s.attr("axis", 0) % len(shape)
    idx_shape = tuple(s.attr("shapes")[0]) if s.attr("shapes") else None
    count = math.prod(idx_shape) if idx_shape is not None else sel.types[idx].v_col
    if _elements(sel, shape, axis, out):
        return _element_gather(sel, s, view, idx, out, shape[0], count)
    lead, m = _row_plan(sel, s, shape, axis, count, out, "destination")
    if _unaligned_column(sel, out, m):
        return _column_slabs(sel, s, view, idx, out, shape, axis, count, lead, m, store=False)
    to = sel.types[out]
    _zero(sel, out)
    rows_view = _rows_view(sel, view, shape, axis)
    q, loop = _for(sel, math.prod(lead) * count)
    with loop:
        i = q if not lead else _arith(sel, "remsi", q, count)
        value = _index(sel, s, idx, i, count)
        with _block(sel, f"scf.if {_in_range(sel, value, shape[axis])}"):
            lead_flat = _arith(sel, "divsi", q, count) if lead else None
            lead_ix = _delinearize(sel, lead_flat, lead) if lead else []
            src = _slab(sel, view, rows_view, lead_ix, lead_flat, _as_index(sel, value), shape[axis], m)
            dst = sel.subset(out, _scale(sel, q, m), m, 0, to.cols)
            sel.print("tload", [src], [dst])


def _elements(sel, shape, axis: int, tile: str) -> bool:
    """Whether a gather/scatter over a GM tensor of ``shape`` moves single elements: a 1-D tensor, or
    the rows of an ``(N, 1)`` one into or out of a column tile (a one-element subset of a column is
    a tile pto-isa does not compile: its one-element rows are not 32-byte aligned)."""
    return len(shape) == 1 or (len(shape) == 2 and shape[1] == 1 and axis == 0 and is_column(sel.types[tile]))


def _element_plan(sel, s, view, tile, count, what):
    """The pointer of 1-D GM tensor ``view`` (unit stride), checked against ``tile`` of ``count``
    elements."""
    made = _made(sel, view)
    t = sel.types[tile]
    if made is None or made.strides[0] != "%c1":            # codegen names index constants %c<value>
        sel.fail(s, "of single elements of a strided or unknown GM tensor")
    if t.v_row * t.v_col != count:
        sel.fail(s, f"with a {t.v_row}x{t.v_col} {what} for {count} elements")
    return made.ptr


def _position(sel, q, t):
    """Element ``q`` of tile type ``t``'s valid region as its offset in the buffer."""
    if t.v_row == 1:
        return q
    return _arith(sel, "addi", _arith(sel, "muli", _arith(sel, "divsi", q, t.v_col), t.cols), _arith(sel, "remsi", q, t.v_col))


def _element_gather(sel, s, view, idx, out, n, count):
    """Elements of a 1-D (or ``(N, 1)``) GM tensor (a lookup table): ``pto.load_scalar`` from its pointer and
    ``pto.tsetval`` into the destination, zero out of range."""
    ptr, to = _element_plan(sel, s, view, out, count, "destination"), sel.types[out]
    _zero(sel, out)
    q, loop = _for(sel, count)
    with loop:
        value = _index(sel, s, idx, q, count)
        with _block(sel, f"scf.if {_in_range(sel, value, n)}"):
            element = sel.fresh("re")
            sel.lines.append(f"{element} = pto.load_scalar {ptr}[{_as_index(sel, value)}] : "
                             f"!pto.ptr<{to.dtype}> -> {to.dtype}")
            sel.lines.append(f"pto.tsetval ins({_position(sel, q, to)}, {element} : index, {to.dtype}) outs({out} : {to})")


def _element_scatter(sel, s, view, idx, src, n, count):
    """Elements into a 1-D (or ``(N, 1)``) GM tensor in index order: each read from the source tile (``pto.tgetval``),
    set into a one-element tile (``pto.tsetval``) and stored (``pto.tstore``, ``atomic_add`` when it
    accumulates) to a one-element ``pto.partition_view`` at its index; out-of-range indices write
    nothing."""
    _element_plan(sel, s, view, src, count, "source")
    ts = sel.types[src]
    cell = sel.alloc(asm.TileBuf("vec", ts.dtype, 1, 32 // ts.np_dtype.itemsize, 1, 1))
    attr = " {atomicType = #pto<atomic_type atomic_add>}" if s.attr("accumulate") else ""
    q, loop = _for(sel, count)
    with loop:
        value = _index(sel, s, idx, q, count)
        with _block(sel, f"scf.if {_in_range(sel, value, n)}"):
            element = sel.fresh("re")
            sel.types[element] = ts.dtype
            sel.lines.append(f"{element} = pto.tgetval ins({src}, {_position(sel, q, ts)} : {ts}, index) outs : {ts.dtype}")
            sel.lines.append(f"pto.tsetval ins({_idx(sel, 0)}, {element} : index, {ts.dtype}) outs({cell} : {sel.types[cell]})")
            dst = _gm_row(sel, view, [], _as_index(sel, value))
            sel.lines.append(f"pto.tstore ins({cell} : {sel.types[cell]}) outs({dst} : {sel.types[dst]}){attr}")


@rule("mscatter")
def mscatter(sel, s, ins, outs):
    """``gm[.., idx[i], ..] = rows[q]`` (``+=`` with an atomic-add store when ``accumulate``) in index
    order; out-of-range indices write nothing."""
    idx, rows = ins
    view = outs[0]
    shape = _view_shape(sel, s, view)
    axis = s.attr("axis", 0) % len(shape)
    shapes = s.attr("shapes")
    count = math.prod(shapes[0]) if shapes else sel.types[idx].v_col
    if _elements(sel, shape, axis, rows):
        return _element_scatter(sel, s, view, idx, rows, shape[0], count)
    lead, m = _row_plan(sel, s, shape, axis, count, rows, "source")
    if _unaligned_column(sel, rows, m):
        return _column_slabs(sel, s, view, idx, rows, shape, axis, count, lead, m, store=True)
    tr = sel.types[rows]
    attr = " {atomicType = #pto<atomic_type atomic_add>}" if s.attr("accumulate") else ""
    rows_view = _rows_view(sel, view, shape, axis)
    q, loop = _for(sel, math.prod(lead) * count)
    with loop:
        i = q if not lead else _arith(sel, "remsi", q, count)
        value = _index(sel, s, idx, i, count)
        with _block(sel, f"scf.if {_in_range(sel, value, shape[axis])}"):
            lead_flat = _arith(sel, "divsi", q, count) if lead else None
            lead_ix = _delinearize(sel, lead_flat, lead) if lead else []
            dst = _slab(sel, view, rows_view, lead_ix, lead_flat, _as_index(sel, value), shape[axis], m)
            src = sel.subset(rows, _scale(sel, q, m), m, 0, tr.cols)
            sel.lines.append(f"pto.tstore ins({src} : {sel.types[src]}) outs({dst} : {sel.types[dst]}){attr}")


# ------------------------------------------------------------------------------------ tile rows
def _tile_rows(sel, s, x: str, axis: int, shape, count: int, tile: str, what: str):
    """(rows per slab of ``x``, rows of ``x``) for a row op on axis 0 of ``x``'s logical ``shape``."""
    shape = tuple(shape)
    if axis != 0 or len(shape) < 2:
        sel.fail(s, f"on axis {axis} of a {list(shape)} tile: rows of axis 0 only")
    m = math.prod(shape[1:-1])
    t = sel.types[tile]
    if (t.v_row, t.v_col) != (count * m, shape[-1]):
        sel.fail(s, f"with a {t.v_row}x{t.v_col} {what} tile for {count * m}x{shape[-1]} rows")
    return m


@rule("tgather")
def tgather(sel, s, ins, outs):
    """In-tile row gather: ``out[i] = x[idx[i]]`` (zero rows out of range)."""
    if len(ins) != 2 or not isinstance(sel.types[ins[1]], asm.TileBuf):
        sel.fail(s, "in a form other than (tile, index tile)")
    x, idx = ins
    out = outs[0]
    shape, idx_shape = sel.shape(s, 0, x), sel.shape(s, 1, idx)
    count = math.prod(idx_shape)
    axis = s.attr("axis", 0) % max(len(shape), 1)
    m = _tile_rows(sel, s, x, axis, shape, count, out, "destination")
    _zero(sel, out)
    x, out = _bits(sel, x), _bits(sel, out)
    tx, to = sel.types[x], sel.types[out]
    q, loop = _for(sel, count)
    with loop:
        value = _index(sel, s, idx, q, count)
        with _block(sel, f"scf.if {_in_range(sel, value, shape[0])}"):
            src = sel.subset(x, _as_index(sel, value, m), m, 0, tx.cols)
            dst = sel.subset(out, _scale(sel, q, m), m, 0, to.cols)
            _copy(sel, src, dst)


@rule("tscatter_update", "tindex_add")
def tile_scatter(sel, s, ins, outs):
    """In-tile row updates: ``out = x`` then ``out[idx[i]] = src[i]`` (``+=`` for ``tindex_add``) in
    index order; out-of-range indices write nothing."""
    x, idx, src = ins
    out = outs[0]
    shape, idx_shape = sel.shape(s, 0, x), sel.shape(s, 1, idx)
    count = math.prod(idx_shape)
    axis = s.attr("axis", 0) % max(len(shape), 1)
    m = _tile_rows(sel, s, x, axis, shape, count, src, "update")
    tx, to = sel.types[x], sel.types[out]
    if (tx.v_row, tx.v_col) != (to.v_row, to.v_col):
        sel.fail(s, "with a destination shaped unlike the operand")
    if to.dtype in ("bf16", "i8") and s.op == "tindex_add":
        sel.fail(s, f"adding {to.dtype} rows (A2/A3 vector code has no {to.dtype} add)")
    x, out, src = _bits(sel, x), _bits(sel, out), _bits(sel, src)
    to, ts = sel.types[out], sel.types[src]
    if x != out:
        _copy(sel, x, out)
    q, loop = _for(sel, count)
    with loop:
        value = _index(sel, s, idx, q, count)
        with _block(sel, f"scf.if {_in_range(sel, value, shape[0])}"):
            dst = sel.subset(out, _as_index(sel, value, m), m, 0, to.cols)
            row = sel.subset(src, _scale(sel, q, m), m, 0, ts.cols)
            if s.op == "tindex_add":
                sel.print("tadd", [dst, row], [dst])
            else:
                _copy(sel, row, dst)


# ------------------------------------------------------------------------------------------ scans
def _scan(sel, work: str, outer: int, n: int, inner: int, reverse: bool):
    """``block[k] += block[k -/+ 1]`` over the ``n`` blocks of ``inner`` rows of each of ``outer`` groups
    of tile ``work``, in order (a sequential fold, as ``np.cumsum``)."""
    if n < 2:
        return
    cols = sel.types[work].cols
    o, outer_loop = (0, contextlib.nullcontext()) if outer == 1 else _for(sel, outer)
    with outer_loop:
        base = 0 if outer == 1 else _scale(sel, o, n * inner)
        j, loop = _for(sel, n - 1)
        with loop:
            if reverse:                              # block k = n-2-j from block k+1
                cur_row = _scale(sel, _arith(sel, "subi", n - 2, j), inner, base)
                prev_row = _arith(sel, "addi", cur_row, inner)
            else:                                    # block j+1 from block j
                prev_row = _scale(sel, j, inner, base)
                cur_row = _arith(sel, "addi", prev_row, inner)
            prev = sel.subset(work, prev_row, inner, 0, cols)
            cur = sel.subset(work, cur_row, inner, 0, cols)
            sel.print("tadd", [prev, cur], [cur])


def _doubling(sel, work: str, n: int, reverse: bool) -> str:
    """The ``n`` rows of tile ``work`` scanned by doubling (Hillis-Steele): ``log2 n`` passes, each one
    ``tadd`` of every row with the row ``s`` before it (``reverse``: after it) into a second tile, the
    ``s`` rows with none copied; the tile holding the result (``work`` or the other)."""
    cols = sel.types[work].cols
    a, b, s = work, sel.alloc(sel.types[work]), 1
    while s < n:
        kept, moved, source = (n - s, 0, s) if reverse else (0, s, 0)
        sel.copy(sel.subset(a, kept, s, 0, cols), sel.subset(b, kept, s, 0, cols))
        sel.print("tadd", [sel.subset(a, moved, n - s, 0, cols), sel.subset(a, source, n - s, 0, cols)],
                  [sel.subset(b, moved, n - s, 0, cols)])
        a, b, s = b, a, 2 * s
    return a


def _groups(shape, axis: int):
    """(groups, blocks per group, rows per block) of a scan along leading ``axis`` of a tile of logical
    ``shape``, whose rows are ``shape[:-1]`` flattened."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:-1])


def _scan_rows(sel, s, x: str, out: str, reverse: bool, carry: str | None = None, carry_out: str | None = None):
    """A scan along the rows of tile ``x`` into ``out``: its transpose (``ttrans``) into a ``C x R`` work
    tile in the dtype the scan adds in, whose rows are scanned and transposed back. With ``carry`` (an
    ``R x 1`` column in that dtype, each row's sum before the tile) the first row scanned adds it first,
    and ``carry_out`` takes the last: the sums through the tile."""
    shape = tuple(sel.shape(s, 0, x))
    rows, cols = matrix(shape)
    tx, to = sel.types[x], sel.types[out]
    if (tx.v_row, tx.v_col) != (rows, cols) or (to.v_row, to.v_col) != (rows, cols):
        sel.fail(s, f"on a {tx.v_row}x{tx.v_col} tile for a {list(shape)} scan")
    acc = _ACC.get(tx.dtype, tx.dtype)
    if carry is not None and sel.types[carry].dtype != acc:
        sel.fail(s, f"a {sel.types[carry].dtype} carry for a scan that adds in {acc}")
    if cols == 1 and carry is not None:          # a chunk of one column: each row's value plus its carry
        src = sel.row(x)
        total = sel.row(out) if acc == to.dtype else sel.like(src, dtype=acc)
        if acc != tx.dtype:
            sel.convert(src, total, "RINT")
            src = total
        sel.print("tadd", [src, sel.row(carry)], [total])
        sel.copy(total, sel.row(carry_out))
        if total != sel.row(out):
            sel.convert(total, out, "RINT", saturate=False if acc == "i16" else None)
        return
    work_type = row_major(cols, rows, acc)
    need = work_type.rows * work_type.cols * asm.DTYPES[acc].itemsize
    if sel.memory is not None and need > sel.memory.ub // 2:
        sel.fail(s, f"along a row of {cols} values: the scan runs down its transpose, {cols} rows of "
                    f"{need // cols} bytes ({need} bytes), more than half the {sel.memory.ub}-byte UB; "
                    f"rows of at most {sel.memory.ub // 2 // (need // cols)} values scan in one tile")
    src = x
    if acc != tx.dtype:
        src = sel.like(x, dtype=acc)
        sel.convert(x, src, "RINT")
    work = sel.alloc(work_type)
    sel.print("ttrans", [src, sel.like(src)], [work])
    ends = (cols - 1, 0) if reverse else (0, cols - 1)       # the first row scanned, the last
    if carry is not None:
        first = sel.subset(work, ends[0], 1, 0, work_type.cols)
        sel.print("tadd", [first, sel.row(carry)], [first])
    work = _doubling(sel, work, cols, reverse)
    if carry_out is not None:
        sel.copy(sel.subset(work, ends[1], 1, 0, work_type.cols), sel.row(carry_out))
    back = out if acc == to.dtype else sel.like(out, dtype=acc)
    sel.print("ttrans", [work, sel.like(work)], [back])
    if back != out:
        sel.convert(back, out, "RINT", saturate=False if acc == "i16" else None)


@rule("tcumsum_carry")
def cumsum_carry(sel, s, ins, outs):
    """A scan along a tile's rows from a carry (``tcumsum_carry``: a long row's column chunks in turn)."""
    _scan_rows(sel, s, ins[0], outs[0], bool(s.attr("reverse")), carry=ins[1], carry_out=outs[1])


@rule("tcumsum")
def cumsum(sel, s, ins, outs):
    (x,) = ins
    out = outs[0]
    shape = tuple(sel.shape(s, 0, x))
    tx, to = sel.types[x], sel.types[out]
    axis = tuple(s.attr("axes"))[0] % len(shape) if shape else 0
    if not shape or shape[axis] == 1:            # a scalar, or along an axis of one: the values themselves
        return sel.emit("tmuls", [x, sel.const(1, to.dtype)], [out])
    reverse = bool(s.attr("reverse"))
    rows, cols = matrix(shape)
    if (tx.v_row, tx.v_col) != (rows, cols) or (to.v_row, to.v_col) != (rows, cols):
        sel.fail(s, f"on a {tx.v_row}x{tx.v_col} tile for a {list(shape)} scan")
    acc = _ACC.get(tx.dtype, tx.dtype)
    if is_column(tx):                            # one value per row, a leading axis: scan the column as
        src = sel.row(x)                         # rows of a row-major R x 1 work tile (its transpose)
        if acc != tx.dtype:
            wide = sel.like(src, dtype=acc)
            sel.convert(src, wide, "RINT")
            src = wide
        work = sel.alloc(row_major(rows, 1, acc))
        sel.print("ttrans", [src, sel.like(src)], [work])
        _scan(sel, work, *_groups(shape, axis), reverse)
        back = sel.row(out) if acc == to.dtype else sel.like(sel.row(out), dtype=acc)
        sel.print("ttrans", [work, sel.like(work)], [back])
        if back != sel.row(out):
            sel.convert(back, out, "RINT", saturate=False if acc == "i16" else None)
        return
    if axis == len(shape) - 1:                   # along rows: scan the transpose
        return _scan_rows(sel, s, x, out, reverse)
    outer, n, inner = _groups(shape, axis)
    if acc == to.dtype:
        work = out
        if x != out:
            _copy(sel, x, out)
    else:
        work = sel.like(x, dtype=acc)
        sel.convert(x, work, "RINT")
    _scan(sel, work, outer, n, inner, reverse)
    if work != out:
        sel.convert(work, out, "RINT", saturate=False if acc == "i16" else None)
