"""Long rows loop inside the program: a chain of vector grids over the same row blocks, some tiling
the row into column tiles, some reducing whole rows, becomes one program per row block.

With a ``vec`` tile narrower than the row, a softmax's ``exp(x - max)`` tiles into column tiles while
its ``max`` and ``sum`` read whole rows: on their own they are stages that meet in GM. Fused here, the
program of a row block loops over the column tiles: each reduction accumulates its row's partial
results in an R×1 tile (``tmax``/``tadd``/``tmin``/``tmul`` of the partial ``trow*`` results), the
column tiles a reduction reads are recomputed in its loop from the inputs and the R×1 results before
it, and a last loop computes and stores the tensors read outside. Nothing the chain makes goes to GM
unless it is read outside; the price is recomputation (each loop reloads its inputs). A row that the
column tile does not divide ends in a tail tile, after the loop over the full ones.

Rows wider than a tile row holds (``max_cols`` columns) take the same form: the tile pass leaves a
``sum`` / ``prod`` / ``amax`` / ``amin`` over them whole under a ``vec`` tile that splits them
(``tiling._loops_row``), the chain loops over its column tiles, and a reduction with no column-tiled
member around it (alone, or with R×1 ops on its result) loops over column chunks of its GM input
(:func:`fuse` with ``memory``).

:func:`fuse` returns None where the chain is not of that form; the partition then keeps its stages.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .._jax import Literal
from ..primitives import tile as T
from . import ir
from .reduce import chunk_for, identity
from .walk import CONTROL, interpret

COMBINE = {"sum": "add", "amax": "maximum", "amin": "minimum", "prod": "mul"}   # partial results -> the row's


class _NotRows(Exception):
    """The chain is not a row loop (internal: :func:`fuse` returns None)."""


@dataclasses.dataclass
class _Member:
    eqn: object
    spec: ir.Grid
    kind: str            # "cols": column tiles; "reduce": a whole-row reduction; "rows": R×1 tiles
    bodies: list | None = None    # "cols" recut to another column chunk (:func:`_recut`): its part bodies


def _reduction(body):
    """``(load, reduce, store)`` eqns of a body that is one whole-row reduction over the last axis."""
    eqns = body.jaxpr.eqns
    if len(eqns) != 3:
        return None
    load, red, store = eqns
    if load.primitive is not T.tload_p or store.primitive is not T.tstore_p:
        return None
    if red.primitive.name[len("pto.t"):] not in COMBINE or not red.params.get("keepdims"):
        return None
    rank = len(load.outvars[0].aval.shape)
    if tuple(red.params["axes"]) != (rank - 1,) or red.invars[0] is not load.outvars[0]:
        return None
    return load, red, store


def _classify(eqn) -> _Member:
    spec = eqn.params["spec"]
    if spec.kind != "vector" or any(o.alias is not None for o in spec.outputs):
        raise _NotRows
    for part in spec.parts:
        for e in part.body.jaxpr.eqns:
            if e.primitive.name in CONTROL or T.reads_gm(e.primitive) or e.primitive is T.mscatter_p:
                raise _NotRows
    if any(e.primitive in (T.tload_p, T.tstore_p) and not e.params["window"].shape
           for p in spec.parts for e in p.body.jaxpr.eqns):
        raise _NotRows                                          # a 0-d tile has no rows
    rows = {(p.shape[:-1], _row_region(p)) for p in spec.parts}
    if any(p.shape and p.shape[-1] > 1 for p in spec.parts) or len(rows) < len(spec.parts):
        return _Member(eqn, spec, "cols")                       # column tiles (and a tail)
    if all(_reduction(p.body) for p in spec.parts):
        return _Member(eqn, spec, "reduce")
    narrow = all(e.params["window"].shape[-1:] in ((), (1,)) for p in spec.parts for e in p.body.jaxpr.eqns
                 if e.primitive in (T.tload_p, T.tstore_p))
    return _Member(eqn, spec, "rows" if narrow else "cols")     # cols: whole rows, one column tile


def _row_region(part):
    """The rows a part's grid points store: its windows' row parts (one row block and a row tail have
    grids of one shape, but not these)."""
    return tuple(_rows_of(e.params["window"]) for e in part.body.jaxpr.eqns if e.primitive is T.tstore_p)


def _rows_of(window):
    """The row part of a window (all dims but the last), with the column grid index dropped."""
    return (window.shape[:-1], window.index[:-1], window.stride[:-1], window.base[:-1])


def fuse(eqns, escaping, memory=None, chunk=None):
    """``(bodies, output specs, input vars, output vars, part shapes)`` of one row-loop program for
    the grid ``eqns`` (in order), or None where they are not such a chain (module docstring).

    ``chunk``: the loop reads the row in column tiles of ``chunk`` columns (a tail the rest), not the
    column tiles of its column-tiled members (:func:`narrower`: where those overfill the UB).

    With ``memory`` (a :class:`~ptojax.lowering.memory.CoreMemory`), whole-row reductions of GM inputs
    with no column-tiled member around them (a reduction alone, the R×1 ops on its result) loop too,
    over column chunks of at most ``memory.tile_bytes`` and ``max_cols`` columns: what a row wider than a
    tile row (``max_cols``) needs when no chain forms."""
    try:
        members = [_classify(e) for e in eqns]
    except _NotRows:
        return None
    if not any(m.kind == "reduce" for m in members):
        return None     # a row loop needs a reduction (and column tiles around it, or ``memory`` to cut them)
    rows = [p.shape[:-1] for p in next(m for m in members if m.kind != "cols").spec.parts]
    if any([p.shape[:-1] for p in m.spec.parts] != rows for m in members if m.kind != "cols"):
        return None
    cuts = None
    if not any(m.kind == "cols" for m in members):
        cuts = None if memory is None else _chunks(members, memory)
        if cuts is None:
            return None
        counts = tuple(c for c, _, _ in cuts)
    else:
        segments = {_segments(m, rows) for m in members if m.kind == "cols"}
        if None in segments or len(segments) != 1:
            return None
        (counts,) = segments
        if chunk is not None:
            recut = _recut(members, rows, counts, chunk)
            if recut is None:
                return None
            counts, cut_bodies = recut
            members = [dataclasses.replace(m, bodies=cut_bodies.get(id(m))) for m in members]
    produced = {v: m for m in members for v in m.eqn.outvars}
    inputs = []
    for m in members:
        inputs += [v for v in m.eqn.invars if not isinstance(v, Literal) and v not in produced and v not in inputs]
    outputs = [v for m in members for v in m.eqn.outvars if v in escaping]
    out_specs = tuple(dataclasses.replace(produced[v].spec.outputs[produced[v].eqn.outvars.index(v)], alias=None)
                      for v in outputs)
    bodies = []
    try:
        for k in range(len(rows)):
            avals = ([jax.ShapeDtypeStruct((), np.int32)] * (len(rows[k]) + 1)
                     + [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in (*inputs, *outputs)])
            program = _Program(members, k, counts, inputs, outputs, cuts)
            bodies.append(jax.make_jaxpr(program.body)(*avals))
    except _NotRows:
        return None
    return bodies, out_specs, inputs, outputs, [(*r, 1) for r in rows]


def _column_width(members, rows, counts):
    """The width of the full column tiles of a chain's column-tiled members (their first segment's,
    all alike), and the dtypes of their tiles; None where the first segment is not a run of full tiles."""
    widths, dtypes = set(), set()
    col = len(rows[0]) if rows else 0
    for m in members:
        if m.kind != "cols":
            continue
        for e in m.spec.parts[0].body.jaxpr.eqns:
            dtypes.update(np.dtype(v.aval.dtype) for v in (*e.invars, *e.outvars)
                          if getattr(getattr(v, "aval", None), "shape", ()))
            if e.primitive in (T.tload_p, T.tstore_p) and _column_window(e.params["window"], col):
                widths.add(e.params["window"].shape[-1])
    if len(widths) != 1 or counts[0] < 1:
        return None
    return widths.pop(), dtypes


def _column_window(window, col) -> bool:
    """Whether ``window`` is a column tile of the loop (its last dim past one column, or indexed by the
    column's grid index), not an R×1 or 0-d one."""
    return bool(window.shape) and (window.shape[-1] > 1 or window.index[-1] == col)


def narrower(eqns, memory):
    """The column chunks a row loop over ``eqns`` may read its rows in where the column tiles of its
    column-tiled members overfill the UB (:func:`fuse`'s ``chunk``): their width halved, and again,
    while it stays a multiple of ``memory.align`` bytes of every dtype of its tiles; [] where the chain
    has no such tiles, or reads its rows in one column tile (a vec tile that does not split them)."""
    try:
        members = [_classify(e) for e in eqns]
    except _NotRows:
        return []
    if not any(m.kind == "cols" for m in members) or not any(m.kind != "cols" for m in members):
        return []
    rows = [p.shape[:-1] for p in next(m for m in members if m.kind != "cols").spec.parts]
    counts = _segments(next(m for m in members if m.kind == "cols"), rows)
    if counts is None or sum(counts) < 2:
        return []           # whole rows in one column tile: the vec tile does not split the row
    found = _column_width(members, rows, counts)
    if found is None:
        return []
    width, dtypes = found
    step = max(max(1, memory.align // d.itemsize) for d in dtypes) if dtypes else 1
    out = []
    while width // 2 >= step and (width // 2) % step == 0:
        width //= 2
        out.append(width)
    return out


def _recut(members, rows, counts, chunk):
    """The column-tiled members' bodies re-windowed to column tiles of ``chunk`` columns: (the new
    tile counts per segment, {id(member): bodies per row region and segment}); None where a member's
    column tiles are not full tiles (stride their width) and at most a tail, from which others are cut."""
    found = _column_width(members, rows, counts)
    if found is None or len(counts) > 2 or (len(counts) == 2 and counts[1] != 1):
        return None
    width, _ = found
    col, per = len(rows[0]), len(counts)
    spans, bodies = set(), {}
    for m in members:
        if m.kind != "cols":
            continue
        tails = {e.params["window"].shape[-1] for k in range(len(rows)) for e in m.spec.parts[k * per + per - 1].body.jaxpr.eqns
                 if per == 2 and e.primitive is T.tstore_p and _column_window(e.params["window"], col)}
        if len(tails) > 1:
            return None
        span = counts[0] * width + (tails.pop() if tails else 0)
        spans.add(span)
        bodies[id(m)] = [_rewindowed(m.spec.parts[k * per].body, col, width, w, start)
                         for k in range(len(rows)) for _, w, start in column_cuts(span, chunk)]
    if len(spans) != 1 or any(b is None for made in bodies.values() for b in made):
        return None
    return tuple(c for c, _, _ in column_cuts(spans.pop(), chunk)), bodies


def column_cuts(n, chunk):
    """(tile count, columns, first column) per segment of a row of ``n`` in tiles of ``chunk``."""
    cuts = [(n // chunk, chunk, 0)] if n // chunk else []
    return cuts + ([(1, n % chunk, n // chunk * chunk)] if n % chunk else [])


def _rewindowed(body, col, width, w, start):
    """``body`` (a full column tile of ``width``, grid index ``col`` its column's) over column tiles of
    ``w`` columns from column ``start`` of its own: each column window cut so, ops traced anew; None
    where a column window is not a full tile of ``width`` indexed by the column (stride its width)."""
    jaxpr = body.jaxpr
    for e in jaxpr.eqns:
        if e.primitive in (T.tload_p, T.tstore_p) and _column_window(e.params["window"], col):
            win = e.params["window"]
            if win.shape[-1] != width or win.stride[-1] != width or win.index[-1] != col:
                return None

    def cut(win):
        if not _column_window(win, col):
            return win
        return T.Window(win.shape[:-1] + (w,), win.index, win.stride[:-1] + (w,), win.base[:-1] + (win.base[-1] + start,))

    def rule(eqn, invals, stack):
        if eqn.primitive in (T.tload_p, T.tstore_p):
            return _bind(eqn.replace(params={**eqn.params, "window": cut(eqn.params["window"])}), invals)
        if eqn.primitive is T.COMPUTE["expand"] and eqn.params["shape"][-1] == width:   # a scalar's or column's fill
            return _bind(eqn.replace(params={**eqn.params, "shape": eqn.params["shape"][:-1] + (w,)}), invals)
        return _bind(eqn, invals)

    def traced(*args):
        return interpret(jaxpr, body.consts, list(args), rule)

    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in jaxpr.invars]
    try:
        return jax.make_jaxpr(traced)(*avals)
    except (TypeError, ValueError):     # an op whose params fix its tile's shape (not elementwise on it)
        return None


def _chunks(members, memory):
    """Per column segment of a row loop with no column-tiled member: (tile count, columns, first column)
    for chunks of the reduced rows (:func:`~ptojax.lowering.reduce.chunk_for`: dividing the row where an
    aligned chunk does, else a tail); None unless every reduction reads a GM input, whole rows alike."""
    widths, sizes = set(), set()
    for m in members:
        if m.kind != "reduce":
            continue
        for part in m.spec.parts:
            load = _reduction(part.body)[0]
            window = load.params["window"]
            if not window.shape:
                return None
            widths.add(window.shape[-1])
            sizes.add((np.dtype(load.outvars[0].aval.dtype).itemsize, int(np.prod(window.shape[:-1]))))
    if len(widths) != 1 or any(v in {o for m in members for o in m.eqn.outvars}
                               for m in members if m.kind == "reduce" for v in m.eqn.invars[:1]):
        return None
    (n,) = widths
    size = max(s for s, _ in sizes)
    rows = max(r for _, r in sizes)
    step = max(1, memory.align // size)
    limit = max(step, min(memory.max_cols, memory.tile_bytes // max(1, rows * size)) // step * step)
    return column_cuts(n, min(n, chunk_for(n, limit, step)))


def _segments(m, rows):
    """The column tile counts of a column-tiled member per row region (the full tiles, then a
    tail's 1), alike for every region; None where its parts do not follow ``rows`` so."""
    per = len(m.spec.parts) // len(rows) if rows else 0
    if not per or per * len(rows) != len(m.spec.parts):
        return None
    counts = None
    for k, r in enumerate(rows):
        parts = m.spec.parts[k * per:(k + 1) * per]
        if any(p.shape[:-1] != r for p in parts):
            return None
        these = tuple(p.shape[-1] if p.shape else 1 for p in parts)
        if counts not in (None, these):
            return None
        counts = these
    return counts


class _Program:
    """The body of one part of a row-loop program (traced by ``jax.make_jaxpr``)."""

    def __init__(self, members, k, counts, inputs, outputs, cuts=None):
        self.members, self.k, self.counts = members, k, counts      # counts: column tiles per segment
        self.cuts = cuts          # with no column-tiled member: per segment (count, columns, first column)
        self.inputs, self.outputs = inputs, outputs
        self.producer = {v: m for m in members for v in m.eqn.outvars}

    def body(self, *args):
        n = len(self.members[0].spec.parts[0].shape)            # the row indices, then the column's (0)
        self.rows = list(args[:n - 1])
        ext = args[n:n + len(self.inputs)]
        self.env = dict(zip(self.inputs, ext))
        self.real = dict(zip(self.outputs, args[n + len(self.inputs):]))
        self.rowvals = {}                 # an R×1 tensor of the chain -> (its tile, its store window)
        for m in self.members:
            if m.kind == "reduce":
                self.reduce(m)
            elif m.kind == "rows":
                self.run_rows(m)
        cols = [v for v in self.outputs if self.producer[v].kind == "cols"]
        if cols:
            def last(seg, c, outs):
                memo = {}
                return [T.tstore(o, self.tile(v, seg, c, memo), [*self.rows, c], self.window(v, seg))
                        for o, v in zip(outs, cols)]
            stored = self.loop(last, [self.real[v] for v in cols])
            self.real.update(zip(cols, stored))
        out = [self.real[v] for v in self.outputs]
        self.rows = self.env = self.real = self.rowvals = None      # the trace's values end with it
        return out

    def loop(self, step, carry):
        """``step(segment, c, carry)`` over every column tile: a ``fori_loop`` over a segment's tiles
        (one call for a single tile), the segments (full tiles, a tail) one after the other."""
        for seg, count in enumerate(self.counts):
            if count == 1:
                carry = step(seg, np.int32(0), carry)
            else:
                carry = jax.lax.fori_loop(0, count, lambda c, x, seg=seg: step(seg, c, x), carry)
        return carry

    def part(self, m, seg=0):
        """Member ``m``'s body for this row region (and column segment ``seg``)."""
        per = len(self.counts) if m.kind == "cols" else 1
        return (m.bodies or [p.body for p in m.spec.parts])[self.k * per + seg]

    def window(self, v, seg):
        """The window the producer of column-tiled ``v`` stores it with in column segment ``seg``."""
        m = self.producer[v]
        body = self.part(m, seg).jaxpr
        out = body.outvars[m.eqn.outvars.index(v)]
        (store,) = [e for e in body.eqns if e.outvars[0] is out and e.primitive is T.tstore_p]
        return store.params["window"]

    # ----------------------------------------------------------------------------- members
    def reduce(self, m):
        load, red, store = _reduction(self.part(m))
        src = m.eqn.invars[0]
        whole = load.params["window"]
        subs = self.column_windows(whole, src)
        op = red.primitive.name[len("pto.t"):]
        (out,) = m.eqn.outvars

        def step(seg, c, acc):
            tile = self.tile(src, seg, c, {}) if src in self.producer else \
                T.tload(self.env[src], [*self.rows, c], subs[seg], load.params["loc"])
            return T.compute(COMBINE[op], acc, red.primitive.bind(tile, **red.params))

        start = np.asarray(identity(op, out.aval.dtype), out.aval.dtype)
        acc = self.loop(step, T.compute("expand", start, shape=red.outvars[0].aval.shape))
        self.rowvals[out] = (acc, store.params["window"])
        if out in self.real:
            self.real[out] = T.tstore(self.real[out], acc, [*self.rows, np.int32(0)], store.params["window"])

    def column_windows(self, whole, src):
        """Per column segment, the window of one column tile of the rows that window ``whole`` reads
        of ``src``: its producer's store windows (checked to cover the rows), or cut from ``whole``
        like the column tiles of the chain's first column-tiled member."""
        col = len(self.rows)
        if self.cuts is not None:
            return [T.Window(whole.shape[:-1] + (w,), whole.index[:-1] + (col,), whole.stride[:-1] + (w,),
                             whole.base[:-1] + (whole.base[-1] + first,)) for _, w, first in self.cuts]
        like = src if src in self.producer else next(v for m in self.members if m.kind == "cols" for v in m.eqn.outvars)
        if self.producer[like].kind != "cols":
            raise _NotRows
        theirs = [self.window(like, seg) for seg in range(len(self.counts))]
        first = theirs[0].base[-1]
        if sum(c * w.shape[-1] for c, w in zip(self.counts, theirs)) != whole.shape[-1] or any(
                _rows_of(w) != _rows_of(whole) or (c > 1 and w.stride[-1] != w.shape[-1])
                for c, w in zip(self.counts, theirs)):
            raise _NotRows
        if src in self.producer:
            if first != whole.base[-1]:
                raise _NotRows
            return theirs
        return [T.Window(whole.shape[:-1] + (w.shape[-1],), whole.index[:-1] + (col,),
                         whole.stride[:-1] + (w.shape[-1],), whole.base[:-1] + (whole.base[-1] + w.base[-1] - first,))
                for w in theirs]

    def run_rows(self, m):
        body = self.part(m)

        def rule(eqn, invals, stack):
            if eqn.primitive is T.tload_p and isinstance(invals[0], _Internal):
                return [self.row_tile(invals[0].var, eqn.params["window"])]
            if eqn.primitive is T.tstore_p and isinstance(invals[0], _Internal):
                var = invals[0].var
                self.rowvals[var] = (invals[1], eqn.params["window"])
                if var in self.real:
                    self.real[var] = T.tstore_p.bind(self.real[var], *invals[1:], **eqn.params)
                return [invals[0]]
            return _bind(eqn, invals)

        interpret(body.jaxpr, body.consts, [*self.rows, np.int32(0), *self.args(m), *map(_Internal, m.eqn.outvars)],
                  rule)

    def args(self, m):
        return [v.val if isinstance(v, Literal) else (_Internal(v) if v in self.producer else self.env[v])
                for v in m.eqn.invars]

    def row_tile(self, var, window):
        if var not in self.rowvals:
            raise _NotRows
        tile, stored = self.rowvals[var]
        if window.shape[-1] != 1 or _rows_of(window) != _rows_of(stored):
            raise _NotRows
        return tile

    def tile(self, var, seg, c, memo):
        """Column tile ``c`` of segment ``seg`` of chain tensor ``var``, recomputed from the inputs
        (``memo``: the tiles already made in this loop iteration)."""
        if var in memo:
            return memo[var]
        if var in self.rowvals:
            raise _NotRows                     # an R×1 tensor is read by a load with its own window
        m = self.producer[var]
        if m.kind != "cols":
            raise _NotRows
        body = self.part(m, seg)

        def rule(eqn, invals, stack):
            if eqn.primitive is T.tload_p and isinstance(invals[0], _Internal):
                src = invals[0].var
                if src in self.rowvals:
                    return [self.row_tile(src, eqn.params["window"])]
                if self.window(src, seg) != eqn.params["window"]:
                    raise _NotRows
                return [self.tile(src, seg, c, memo)]
            if eqn.primitive is T.tload_p:     # a GM input's tile read again in this iteration: the one loaded
                key = (id(invals[0]), *map(id, invals[1:]), eqn.params["window"], eqn.params["loc"])
                if key not in memo:
                    memo[key] = _bind(eqn, invals)
                return memo[key]
            if eqn.primitive is T.tstore_p and isinstance(invals[0], _Internal):
                memo[invals[0].var] = invals[1]
                return [invals[0]]
            return _bind(eqn, invals)

        interpret(body.jaxpr, body.consts, [*self.rows, c, *self.args(m), *map(_Internal, m.eqn.outvars)], rule)
        return memo[var]


class _Internal:
    """A tensor of the chain, as a member body sees its GM operand."""

    def __init__(self, var):
        self.var = var


def _bind(eqn, invals):
    out = eqn.primitive.bind(*invals, **eqn.params)
    return out if eqn.primitive.multiple_results else [out]
