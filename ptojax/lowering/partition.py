"""The Block level: tile grids grouped into blocks, one task body for one core kind each.

Partition follows PyPTO's rules for A2/A3 (separate cube and vector cores):

* a vector grid joins an earlier vector group over the same grid when every tensor it reads from the
  group is read tile-for-tile where the group stored it; the tile is then forwarded in UB and the GM
  round trip disappears unless someone outside the group still reads that tensor ("depth merging");
  then a group joins an earlier one over the same grid whose emission its operands precede when it
  reads that group's results tile for tile or a later op reads results of both ("sibling
  merging": one task per tile instead of two), unless that overfills a buffer even computing each
  tile in pieces (elementwise on whole tiles, below);
* reshapes move no data: each is emitted right after what it reshapes, so it separates no group;
* a run of vector groups over the same row blocks where some tile the row into column tiles and
  others reduce whole rows is one program per row block that loops over the column tiles
  (``rowloop.py``: long rows loop inside the program, not across cores); a reduction over rows wider
  than a tile row holds (``max_cols``: left whole by the tile pass for this) that no such run takes
  loops over column chunks of its rows on its own;
* a tile that several members of a group load from an input is loaded once; where that would
  overfill a buffer each member loads its own, then the group is one row loop (whole-row
  intermediates recomputed, not kept), else, elementwise on whole tiles, one program computing each
  tile in 2, 4, … pieces one after another, else it is split into consecutive groups that fit (a lone
  elementwise op whose tiles overfill a buffer again in pieces);
* cube grids (matmul with its K chain) and indexed grids stay blocks of their own;
* groups with the same body are one *program* run by several block instances — isomorphic subgraphs
  share code and differ only in their tile offsets;
* each program's peak tile footprint per buffer (UB on AIV; L1, L0A, L0B, L0C on AIC) must fit the
  core, in pieces where it is elementwise, else a :class:`PtoCapacityError` names the block, its label
  and the bytes.

Knobs keyed by label, with ``"DEFAULT"`` for the rest (PyPTO's ``vec_nbuffer_setting`` /
``cube_nbuffer_setting`` style): ``tiles_per_block`` — how many consecutive tiles one block instance
processes (``"auto"``: chosen by the backend's cost model when the kernel compiles); ``tiles`` —
``{"vec": (...), "cube": (m, k, n)}`` overriding the ``pj.tile`` setting of the ops with that label
(applied by the tile pass, so the kernel's source needs no edit);
``row_loops`` — ``False`` keeps a label's long rows in stages through GM (the split form: the column
tiles spread over more cores, the reductions a step of their own) instead of one looping program.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Mapping

import jax
import numpy as np

from .._jax import ClosedJaxpr, Literal, Var
from ..errors import PtoArgumentError, PtoCapacityError
from ..primitives import OPS
from ..primitives import tile as T
from . import ir, rowloop
from .memory import ASCEND_CORE, CoreMemory, _row_tmp, footprint
from .scope import TileConfig, check_cube, check_vec
from .scope import _shape as _tile_shape
from .symbolic import templated
from .walk import CONTROL, control, interpret, is_const, read

CORE = {"vector": "AIV", "cube": "AIC"}
AUTO = "auto"       # tiles_per_block chosen by the runtime's backend (BlockPart.tiles_per_block == 0)
_BUFFER_NAME = {"vec": "UB", "mat": "L1", "left": "L0A", "right": "L0B", "acc": "L0C"}

# How a backend places a program's tiles: ``plan(program, part shape, memory) -> {buffer loc: bytes}``,
# registered when the backend is imported (``ascend``: the UB its real text needs as ``ptoas`` plans it,
# what compile's ``check_fit`` counts: a composite's work tiles and masks beside the program's own). A
# program fits where both this count and :func:`~ptojax.lowering.memory.footprint` do; the backend may
# raise a :class:`PtoCapacityError` (does not fit) and return ``{}`` (no count of its own).
PLANNERS: list = []
_OVERFULL = "long rows: a whole-row tile overfills the buffers; the row loops over column chunks"
_MAX_PIECES = 64     # the most pieces a lone elementwise program computes each tile in (:func:`_in_pieces`)
_ELEMENTWISE = frozenset(T.COMPUTE[n] for n, op in OPS.items() if op.family == "elementwise" and n in T.COMPUTE)
_ROW_REDUCTIONS = frozenset(T.COMPUTE[n] for n in ("sum", "prod", "amax", "amin", "argmax", "argmin"))
_ROW_SORTS = frozenset(T.COMPUTE[n] for n in ("sort", "topk"))


@dataclasses.dataclass(frozen=True)
class Options:
    """Pass options keyed by label (``"DEFAULT"`` for the rest), as PyPTO keys them."""

    tiles_per_block: tuple[tuple[str, int], ...] = ()
    tiles: tuple[tuple[str, TileConfig], ...] = ()   # per-label tile overrides (read by the tile pass)
    row_loops: tuple[tuple[str, bool], ...] = ()     # per label: long rows loop inside one program

    @staticmethod
    def make(options: Mapping | None) -> "Options":
        if options is not None and not isinstance(options, Mapping):
            raise PtoArgumentError(f"pto partition: options must be a mapping of pass options (tiles, "
                                   f"tiles_per_block, row_loops), got {options!r}")
        options = dict(options or {})
        unknown = set(options) - {f.name for f in dataclasses.fields(Options)}
        if unknown:
            raise PtoArgumentError(f"pto partition: unknown pass options {sorted(unknown)}; known: tiles_per_block, "
                                   "tiles, row_loops")
        per_label = options.get("tiles_per_block", {})
        per_label = _mapping(per_label, "tiles_per_block") if _is_mapping(per_label) else {"DEFAULT": per_label}
        for label, n in per_label.items():
            if n == AUTO:
                per_label[label] = 0
            elif not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
                raise PtoArgumentError(f"pto partition: tiles_per_block[{label!r}] must be a positive int or "
                                       f"{AUTO!r}, got {n!r}")
            else:
                per_label[label] = int(n)
        tiles = {label: tile_override(label, cfg) for label, cfg in _mapping(options.get("tiles", {}), "tiles").items()}
        loops = options.get("row_loops", {})
        loops = _mapping(loops, "row_loops") if _is_mapping(loops) else {"DEFAULT": loops}
        for label, on in loops.items():
            if not isinstance(on, bool):
                raise PtoArgumentError(f"pto partition: row_loops[{label!r}] must be True or False, got {on!r}")
        return Options(tuple(sorted(per_label.items())), tuple(sorted(tiles.items())), tuple(sorted(loops.items())))

    def get(self, name: str, label: str, default):
        table = dict(getattr(self, name))
        return table.get(label, table.get("DEFAULT", default))


def _is_mapping(v) -> bool:
    """A mapping, or the frozen form ``pj.kernel`` keeps options in (a tuple of (key, value) pairs)."""
    return isinstance(v, Mapping) or (isinstance(v, tuple) and all(isinstance(x, tuple) and len(x) == 2 for x in v))


def _shown(v):
    """An option as the user wrote it: the frozen form's pairs as a dict."""
    return {k: _shown(x) for k, x in v} if isinstance(v, tuple) and v and _is_mapping(v) else v


def _mapping(v, option: str) -> dict:
    """Option ``option`` (``tiles``, ...) as a dict keyed by label (a scope name: a str)."""
    if not _is_mapping(v) or not all(isinstance(k, str) for k in dict(v)):
        raise PtoArgumentError(f"pto pass options: {option} takes a mapping keyed by label (the name of a "
                               f"jax.named_scope, a str, or 'DEFAULT'), got {_shown(v)!r}")
    return dict(v)


def tile_override(label, config) -> TileConfig:
    """``{"vec": (...), "cube": (m, k, n)}`` (or a TileConfig) → a checked :class:`TileConfig`."""
    if isinstance(config, TileConfig):
        return config
    if not _is_mapping(config):
        raise PtoArgumentError(f"pto pass options: tiles[{label!r}] takes a mapping of 'vec' and/or 'cube' tiles, "
                               f"got {config!r}")
    config = _mapping(config, f"tiles[{label!r}]")
    unknown = set(config) - {"vec", "cube"}
    if unknown or not config:
        raise PtoArgumentError(f"pto pass options: tiles[{label!r}] takes 'vec' and/or 'cube', got {sorted(config)}")
    vec, cube = config.get("vec"), config.get("cube")
    who = f"pto pass options: tiles[{label!r}]"       # the option named in errors, not pj.tile
    if vec is None and cube is None:
        raise PtoArgumentError(f"{who} sets no tile ({config!r}): an override that would change nothing; leave "
                               "the label out to keep its pj.tile")
    out = TileConfig(None if vec is None else _tile_shape("vec", vec, who=who),
                     None if cube is None else _tile_shape("cube", cube, 3, who=who))
    if out.vec:
        check_vec(out.vec, who=who)
    if out.cube:
        check_cube(out.cube, who=who)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """One block body: the code a core runs for each block instance."""

    name: str
    core: str                      # "AIV" or "AIC"
    body: ClosedJaxpr              # (*grid index, *inputs, *outputs) -> outputs
    label: str
    footprint: tuple[tuple[str, int], ...]   # peak bytes per buffer location (live tiles, or the PLANNERS plan)
    note: str = ""                 # how partition formed it where it chose a fallback (a row loop, a split)

    def __repr__(self):
        return f"{self.name}<{self.core}>"


@dataclasses.dataclass(frozen=True, eq=False)
class BlockPart:
    """``program`` run over a grid of ``shape`` tiles, ``tiles_per_block`` tiles per block instance
    (0: ``"auto"``, the backend chooses by its cost model)."""

    program: Program
    shape: tuple[int, ...]
    tiles_per_block: int = 1

    body = property(lambda self: self.program.body)
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    instances = property(lambda self: -(-self.size // (self.tiles_per_block or 1)))   # auto: at most this many


@dataclasses.dataclass(frozen=True, eq=False)
class Block:
    """A block-level call: one :class:`BlockPart` per region, writing disjoint windows of the outputs."""

    parts: tuple[BlockPart, ...]
    outputs: tuple[ir.Output, ...]

    def __repr__(self):
        return ",".join(f"{p.program.name}<{p.program.core}>x{p.instances}" for p in self.parts)


# --------------------------------------------------------------------------------------- grouping
def _grid(eqn):
    return eqn.params["spec"] if eqn.primitive is ir.tile_grid_p else None


def _stores(spec: ir.Grid):
    """Per part: body-output position -> the window it is stored with. None unless every body is
    plain tload / compute / tstore at the grid index."""
    out = []
    for part in spec.parts:
        jaxpr = part.body.jaxpr
        index = jaxpr.invars[:len(part.shape)]
        windows = {}
        for eqn in jaxpr.eqns:
            if T.reads_gm(eqn.primitive) or eqn.primitive is T.mscatter_p or eqn.primitive.name in CONTROL:
                return None
            if eqn.primitive is T.tstore_p:
                if list(eqn.invars[2:]) != list(index):
                    return None
                windows[eqn.outvars[0]] = eqn.params["window"]
        if any(v not in windows for v in jaxpr.outvars):
            return None
        out.append({pos: windows[v] for pos, v in enumerate(jaxpr.outvars)})
    return out


def _loads(spec: ir.Grid, position):
    """Per part: the windows with which the body loads input ``position``; None if read otherwise."""
    out = []
    for part in spec.parts:
        jaxpr = part.body.jaxpr
        index = jaxpr.invars[:len(part.shape)]
        var = jaxpr.invars[len(part.shape) + position]
        windows = set()
        for eqn in jaxpr.eqns:
            for i, v in enumerate(eqn.invars):
                if v is var:
                    if eqn.primitive is not T.tload_p or i != 0 or list(eqn.invars[1:]) != list(index):
                        return None
                    windows.add(eqn.params["window"])
        out.append(windows)
    return out


# Emission positions are tuples, compared in order: eqn ``p``'s group ``(p,)``; a moved reshape or host
# scalar its operand's position + ``(1,)`` (just after it); a group moved before a group it joins, to
# just after what it reads ``(*that position, inf, n)``, the n-th moved, or where that is not before
# the group, just before it ``(.., q - 1, inf, n)``; ``_NONE`` a kernel input's.
_NONE = (-1,)
_APART = 8             # groups between a row loop's members that may move before it (:func:`_run`)


class _Moved(list):
    """A reshape's eqn, emitted at position ``after``: right after what makes its operand."""

    def __init__(self, eqns, after):
        super().__init__(eqns)
        self.after = after


@dataclasses.dataclass
class _Group:
    eqns: list
    spec: ir.Grid
    produced: dict     # outer var -> its store window in each part (:func:`_canonical` to its grid)
    first: tuple       # position of the first member (or, moved before a group to join it, before that)


def _plan(jaxpr, siblings: bool = True) -> list:
    """Group the eqns of ``jaxpr``: a list of groups (lists of eqns) in emission order; ``siblings``:
    then merge groups over the same tiles (:func:`_merge_siblings`)."""
    producer = {}                       # var -> the position its group is emitted at
    made_by = {}                        # var -> the group (or moved eqn) that makes it
    groups: list[_Group | list] = []
    opened: dict = {}                   # id of a group -> the order it was opened in
    for position, eqn in enumerate(jaxpr.eqns):
        spec = _grid(eqn)
        stores = _stores(spec) if spec is not None and spec.kind == "vector" else None
        if stores is not None:
            produced = {v: [_canonical(s[pos], p.shape) for s, p in zip(stores, spec.parts)]
                        for pos, v in enumerate(eqn.outvars)}
            # only a group whose results the eqn reads can take it: the latest of them that does
            readable = {id(g): g for v in eqn.invars
                        if isinstance(v, Var) and isinstance(g := made_by.get(v), _Group)}
            group = next((g for g in sorted(readable.values(), key=lambda g: -opened[id(g)])
                          if _joins(g, eqn, spec, producer, made_by)), None)
            if group is None:
                group = _Group([eqn], spec, produced, (position,))
                opened[id(group)] = len(opened)
                groups.append(group)
            else:
                group.eqns.append(eqn)
                group.produced.update(produced)
            emitted = group.first
        elif eqn.primitive.name in ir.GM_VIEWS and isinstance(eqn.invars[0], Var):
            emitted = producer.get(eqn.invars[0], _NONE) + (1,)    # moves no data: right after what it reshapes
            group = _Moved([eqn], emitted)
            groups.append(group)
        elif _host_scalar(eqn):         # a scalar of the host (a divisor's sign): right after its operands
            emitted = max((producer.get(v, _NONE) for v in eqn.invars if isinstance(v, Var)), default=_NONE) + (1,)
            group = _Moved([eqn], emitted)
            groups.append(group)
        else:
            group = [eqn]
            groups.append(group)
            emitted = (position,)
        for v in eqn.outvars:
            producer[v] = emitted
            made_by[v] = group
    order = {id(g): (g.after if isinstance(g, _Moved) else g.first if isinstance(g, _Group) else
                     producer[g[0].outvars[0]] if g[0].outvars else _NONE) for g in groups}
    groups.sort(key=lambda g: order[id(g)])
    if siblings:
        groups = _merge_siblings(groups, producer)
    return [_members(g) for g in groups]


def _merge_siblings(groups, producer) -> list:
    """Each group joins the latest earlier group over the same grid and label whose emission its
    operands precede, when it reads that group's results tile for tile (a depth merge its first op
    did not start) or a later op reads results of both (ops on the same tiles feeding one consumer);
    one task per tile instead of two. A merge delays no reader that needs only one of them."""
    owner, readers = {}, {}             # eqn -> its group; var -> the eqns that read it
    by_id, made_in = {}, {}             # group id -> the group; var -> the group that makes it
    for g in groups:
        by_id[id(g)] = g
        for eqn in _members(g):
            owner[id(eqn)] = id(g)
            for v in eqn.invars:
                if isinstance(v, Var):
                    readers.setdefault(v, []).append(id(eqn))
        made_in.update((v, g) for v in (g.produced if isinstance(g, _Group) else ()))

    def related(g):
        """The groups ``g`` reads, or that its consumers read: only those can take it (:func:`_sibling`)."""
        consumers = {owner[e] for u in g.produced for e in readers.get(u, ())} - {id(g)}
        read = [v for e in g.eqns for v in e.invars]
        read += [v for c in consumers for e in _members(by_id[c]) for v in e.invars]
        return {id(h): h for v in read if isinstance(v, Var) and (h := made_in.get(v)) is not None and h is not g}

    kept, rank = [], {}                 # rank: a kept group's place in ``kept``
    for g in groups:
        target = None
        if isinstance(g, _Group):
            earlier = sorted((h for k, h in related(g).items() if k in rank), key=lambda h: -rank[id(h)])
            target = next((h for h in earlier if _sibling(h, g, producer, owner, readers)), None)
        if target is None:
            rank[id(g)] = len(kept)
            kept.append(g)
            continue
        target.eqns += g.eqns
        target.produced.update(g.produced)
        for v in g.produced:
            producer[v], made_in[v] = target.first, target
        for eqn in g.eqns:
            owner[id(eqn)] = id(target)
    return kept


def _host_scalar(eqn) -> bool:
    """Whether ``eqn`` is a scalar op outside any grid (the tile pass leaves scalars of constants and
    arguments on the host): it computes on no core, so it moves to just after its operands rather than
    part the grids around it (``x // 512``'s divisor sign between the ops of a reduction's epilogue)."""
    return (_grid(eqn) is None and eqn.primitive.name not in CONTROL and bool(eqn.outvars)
            and not any(key.endswith("jaxpr") for key in eqn.params)
            and all(not v.aval.shape for v in (*eqn.outvars, *(v for v in eqn.invars if isinstance(v, Var)))))


def _canonical(window, grid):
    """``window`` with the grid dims of extent 1 read as fixed offsets (the same GM box)."""
    fixed = [i >= 0 and grid[i] == 1 for i in window.index]
    return dataclasses.replace(window, index=tuple(-1 if f else i for f, i in zip(fixed, window.index)),
                               stride=tuple(0 if f else s for f, s in zip(fixed, window.stride)))


def _one_point(spec: ir.Grid) -> bool:
    """A grid of a single point (a whole-tensor reduction's, a scalar op's): its body is the program."""
    return len(spec.parts) == 1 and all(d == 1 for d in spec.parts[0].shape)


def _same_tiles(group: _Group, spec: ir.Grid) -> bool:
    """Grids over the same tiles, with the same label; single-point grids of any rank are alike (a
    reduction to a scalar and the scalar ops after it, its epilogue, are one program)."""
    if spec.label != group.spec.label:
        return False
    return [p.shape for p in spec.parts] == [p.shape for p in group.spec.parts] or (
        _one_point(spec) and _one_point(group.spec))


def _forwardable(group: _Group, spec: ir.Grid, pos: int, v) -> bool:
    """Input ``pos`` (``v``, a result of ``group``) of a grid is read tile for tile where the group
    stored it, and not updated in place: the tile can stay in UB."""
    loads = _loads(spec, pos)
    return (pos not in {o.alias for o in spec.outputs} and loads is not None
            and all({_canonical(x, p.shape) for x in l} == {w}
                    for l, w, p in zip(loads, group.produced[v], spec.parts)))


def _joins(group: _Group, eqn, spec: ir.Grid, producer, made_by) -> bool:
    """Depth merging: ``eqn`` reads something the group produced, tile for tile, and nothing that a
    group emitted after this one produces, unless that group can move to just before this one
    (:func:`_hoisted`: a norm's weight cast to f32 between the norm's ops). ``producer``: var -> where
    its group is emitted; a group only reads groups emitted before it, so joining never makes a cycle."""
    if not _same_tiles(group, spec):
        return False
    reads_group, later, at = False, {}, (*group.first[:-1], group.first[-1] - 1, math.inf)
    for pos, v in enumerate(eqn.invars):
        if isinstance(v, Literal):
            continue
        if v in group.produced:
            if not _forwardable(group, spec, pos, v):
                return False
            reads_group = True
        elif producer.get(v, _NONE) > group.first:
            if not _hoisted(made_by.get(v), group, at, producer, made_by, later):
                return False
    if reads_group:
        for item in later.values():         # each after what it reads: between no groups that may merge
            place = _after_operands(item, producer)
            _emit_at(item, place if place < group.first else (*at, next(_HOISTS)), producer)
    return reads_group


def _hoisted(item, group, at, producer, made_by, out, groups=True) -> bool:
    """Whether ``item`` (a group, or a moved reshape or host scalar) can be emitted at ``at`` + ``(n,)``,
    just before ``group``, with the items emitted after that it reads (collected into ``out``, each
    after what it reads): none reads ``group``, updates a tensor in place (a reader emitted in between
    would see the update) or runs on a cube, and one group at most on each path (``groups``)."""
    if id(item) in out:
        return True
    if item is group or not isinstance(item, (_Group, _Moved)) or isinstance(item, _Group) and (
            not groups or any(o.alias is not None for e in item.eqns for o in e.params["spec"].outputs)):
        return False
    inner = groups and not isinstance(item, _Group)
    if not all(isinstance(v, Literal) or made_by.get(v) is item or producer.get(v, _NONE) < (*at, math.inf)
               or _hoisted(made_by.get(v), group, at, producer, made_by, out, inner)
               for e in (item.eqns if isinstance(item, _Group) else item) for v in e.invars):
        return False
    out[id(item)] = item
    return True


_HOISTS = itertools.count(1)    # the order of items moved before a group: each after what it reads


def _after_operands(item, producer) -> tuple:
    """The position just after the last of what ``item`` (a group or moved eqn) reads: where a hoisted
    item goes where that is before the group it joins, so that it stands between no two groups that could
    still merge (a weight cast moved just before a norm's program stood between the program and the cast
    of its other input)."""
    members = item.eqns if isinstance(item, _Group) else item
    own = {v for e in members for v in e.outvars}
    last = max((producer.get(v, _NONE) for e in members for v in e.invars if isinstance(v, Var) and v not in own),
               default=_NONE)
    return (*last, math.inf, next(_HOISTS))


def _emit_at(item, at, producer):
    """``item`` emitted at position ``at`` (what it makes with it)."""
    if isinstance(item, _Group):
        item.first = at
    else:
        item.after = at
    for e in (item.eqns if isinstance(item, _Group) else item):
        for v in e.outvars:
            producer[v] = at


def _members(group) -> list:
    """The eqns of a plan's entry (a :class:`_Group`, a moved eqn, or a lone eqn's list)."""
    return group.eqns if isinstance(group, _Group) else group


def _sibling(group: _Group, other: _Group, producer, owner, readers) -> bool:
    """Whether ``other`` (a later group) can and should run in ``group``'s tasks (:func:`_merge_siblings`)."""
    if not _same_tiles(group, other.spec):
        return False
    depth = False
    for eqn in other.eqns:
        spec = eqn.params["spec"]
        if any(o.alias is not None for o in spec.outputs):
            return False
        for pos, v in enumerate(eqn.invars):
            if isinstance(v, Literal) or v in other.produced:
                continue
            if v in group.produced:
                if not _forwardable(group, spec, pos, v):
                    return False
                depth = True
            elif producer.get(v, _NONE) >= group.first:
                return False

    def consumers(g):
        return {owner[e] for v in g.produced for e in readers.get(v, ())} - {id(g)}

    return depth or bool(consumers(group) & consumers(other))


# ---------------------------------------------------------------------------------------- fusion
class _Buffer:
    """Marks a group-internal tensor inside a fused body."""

    def __init__(self, var):
        self.var = var


def _fuse(eqns, escaping, share_loads=True):
    """One body per part for a group of grid eqns: (bodies, output specs, input vars, output vars).

    A lone grid keeps its bodies. In a group, tiles stored to a tensor that a later member loads at
    the same window are forwarded; only tensors read outside the group are still stored to GM.
    ``share_loads``: a tile that several members load from an input is loaded once (it then stays
    live in between: more UB at the peak).
    """
    if len(eqns) == 1:
        (e,) = eqns
        spec = e.params["spec"]
        return [p.body for p in spec.parts], spec.outputs, list(e.invars), list(e.outvars)
    specs = [e.params["spec"] for e in eqns]
    produced = {v for e in eqns for v in e.outvars}
    inputs = []
    for e in eqns:
        inputs += [v for v in e.invars if not isinstance(v, Literal) and v not in produced and v not in inputs]
    outputs = [v for e in eqns for v in e.outvars if v in escaping]
    out_specs = []
    for v in outputs:
        e = next(e for e in eqns if v in e.outvars)
        o = e.params["spec"].outputs[e.outvars.index(v)]
        alias = e.invars[o.alias] if o.alias is not None else None
        out_specs.append(ir.Output(alias=inputs.index(alias)) if alias in inputs
                         else dataclasses.replace(o, alias=None))
    updated = {o.alias for o in out_specs if o.alias is not None}
    bodies = []
    for k, part in enumerate(specs[0].parts):
        n = len(part.shape)

        def body(*args, k=k, n=n):
            index, ext, outs = args[:n], args[n:n + len(inputs)], args[n + len(inputs):]
            constant = [x for i, x in enumerate(ext) if i not in updated] if share_loads else []
            env = dict(zip(inputs, ext))
            real = dict(zip(outputs, outs))
            forward = {}
            loaded = {}         # a tile loaded from an input no output updates, for the members after it

            def rule(eqn, invals, stack):
                if eqn.primitive is T.tload_p and isinstance(invals[0], _Buffer):
                    return [forward[invals[0].var]]
                if eqn.primitive is T.tload_p and any(invals[0] is x for x in constant):
                    key = (id(invals[0]), eqn.params["window"], eqn.params["loc"],
                           tuple(int(np.asarray(i)) if is_const(i) else id(i) for i in invals[1:]))
                    if key not in loaded:
                        loaded[key] = _bind(eqn, invals)
                    return loaded[key]
                if eqn.primitive is T.tstore_p and isinstance(invals[0], _Buffer):
                    var = invals[0].var
                    forward[var] = invals[1]
                    if var in real:
                        real[var] = T.tstore_p.bind(real[var], *invals[1:], **eqn.params)
                    return [invals[0]]
                return _bind(eqn, invals)

            for e, spec in zip(eqns, specs):
                member_ins = [v.val if isinstance(v, Literal) else (_Buffer(v) if v in produced else env[v])
                              for v in e.invars]
                member = spec.parts[k].body
                at = index if len(spec.parts[k].shape) == n else [np.int32(0)] * len(spec.parts[k].shape)   # one point
                interpret(member.jaxpr, member.consts, [*at, *member_ins, *map(_Buffer, e.outvars)], rule)
            return [real[v] for v in outputs]

        avals = ([jax.ShapeDtypeStruct((), np.int32)] * n
                 + [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in (*inputs, *outputs)])
        bodies.append(jax.make_jaxpr(body)(*avals))
    return bodies, tuple(out_specs), inputs, outputs


def _bind(eqn, invals):
    out = eqn.primitive.bind(*invals, **eqn.params)
    return out if eqn.primitive.multiple_results else [out]


def _row_local(eqn) -> bool:
    """A reduction, sort or top-k along a tile's last axis alone: its rows apart, it cuts by rows as
    elementwise ops do."""
    last = eqn.invars[0].aval.ndim - 1
    if eqn.primitive in _ROW_REDUCTIONS:
        return tuple(eqn.params["axes"]) == (last,)
    return eqn.primitive in _ROW_SORTS and eqn.params["axis"] % (last + 1) == last


def _fill(eqn) -> bool:
    """A tile broadcast from a smaller one or a scalar (``texpand``: a ``where``'s fill, a row loop's
    first accumulator); in pieces, each piece expands its own share."""
    return eqn.primitive is T.COMPUTE["expand"]


def _in_pieces(body, n, k, memory):
    """``body`` (``n`` grid indices) computing its tile in up to ``k`` pieces one after another, and how
    many: each load, op and store of a piece on a slice of ``ceil(1/k)`` of the tile (rows first, the
    last piece the rest where ``k`` does not divide them; else columns that ``k`` cuts into aligned
    slices), so that a piece's tiles are dead before the next one's are made; None unless the tile
    can be cut so and the body is elementwise on tiles broadcast into one (a tile of one along the dim
    cut is read whole by each piece; fills of a scalar too) or holds reductions, sorts and top-k along its
    rows (then, cut by rows, tiles of its rows, ``R`` or ``R×k``)."""
    jaxpr = body.jaxpr
    gm = set(jaxpr.invars[n:])
    windows, values, dtypes = set(), set(), set()
    rows_apart = any(_row_local(eqn) for eqn in jaxpr.eqns)
    for eqn in jaxpr.eqns:
        if eqn.primitive in (T.tload_p, T.tstore_p):
            if eqn.primitive is T.tload_p and (eqn.params["loc"] != "vec" or eqn.invars[0] not in gm):
                return None
            windows.add(tuple(eqn.params["window"].shape))
            if eqn.primitive is T.tstore_p:
                gm.update(eqn.outvars)
            continue
        if eqn.primitive not in _ELEMENTWISE and not _row_local(eqn) and not _fill(eqn):
            return None
    for eqn in jaxpr.eqns:
        for v in (*eqn.invars, *eqn.outvars):
            if isinstance(v, Var) and v not in gm and v not in jaxpr.invars[:n]:
                values.add(tuple(v.aval.shape))
                dtypes.add(np.dtype(v.aval.dtype).itemsize)
    tile = max(windows, key=math.prod, default=())
    if not tile:
        return None
    rows = range(len(tile) - 1) if not templated() else ()     # a polymorphic template's row windows
    dim = next((d for d in rows if tile[d] % k == 0), next((d for d in rows if tile[d] >= k), None))  # stay a tile
    if dim is None and rows_apart:
        return None
    if dim is None:
        cols = tile[-1] // k
        if tile[-1] % k or any(cols * size % memory.align for size in dtypes):
            return None
        dim = len(tile) - 1

    def allowed(shape):     # one broadcast into the tile; where rows are cut, any of its rows' (R, R×k)
        if not shape or len(shape) == len(tile) and all(s in (1, t) for s, t in zip(shape, tile)):
            return True
        return dim < len(tile) - 1 and (shape == tile[:-1] or len(shape) == len(tile) and shape[:-1] == tile[:-1])

    if not all(allowed(shape) for shape in windows | values):
        return None
    step = -(-tile[dim] // k)
    count = -(-tile[dim] // step)

    def size(shape, j):
        if _spans_cut(shape, tile, dim):
            return shape
        return shape[:dim] + (min(step, tile[dim] - j * step),) + shape[dim + 1:]

    def cut(window, j):
        if not window.shape or _spans_cut(window.shape, tile, dim):
            return window
        return dataclasses.replace(window, shape=size(window.shape, j),
                                   base=window.base[:dim] + (window.base[dim] + j * step,) + window.base[dim + 1:])

    def pieces(*args):
        index, ext, outs = args[:n], args[n:len(jaxpr.invars) - len(jaxpr.outvars)], args[len(jaxpr.invars) - len(jaxpr.outvars):]
        for j in range(count):
            def rule(eqn, invals, stack, j=j):
                if eqn.primitive in (T.tload_p, T.tstore_p):
                    return _bind(eqn.replace(params={**eqn.params, "window": cut(eqn.params["window"], j)}), invals)
                if _fill(eqn):
                    return _bind(eqn.replace(params={**eqn.params, "shape": size(eqn.params["shape"], j)}), invals)
                return _bind(eqn, invals)
            outs = interpret(jaxpr, body.consts, [*index, *ext, *outs], rule)
        return outs

    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in jaxpr.invars]
    return jax.make_jaxpr(pieces)(*avals), count


def _spans_cut(shape, tile, dim) -> bool:
    """Whether a window or value of ``shape`` is broadcast along ``dim``, the dim pieces cut: each piece
    reads it whole."""
    return len(shape) == len(tile) and shape[dim] == 1 < tile[dim]


def _largest_load(body) -> int:
    """Bytes of the largest tile ``body`` loads (a tile of the size the user chose: what it computes from
    it, in pieces, may be wider)."""
    return max((int(np.prod(v.aval.shape)) * np.dtype(v.aval.dtype).itemsize for e in body.jaxpr.eqns
                if e.primitive is T.tload_p for v in e.outvars), default=0)


def _program(ops, kind, body, label, memory, row_loops=True):
    name = "+".join(ops)
    peak = footprint(body.jaxpr, memory)
    for loc, used in sorted(peak.items()):
        if used > memory.buffer(loc):
            raise PtoCapacityError(
                f"pto partition: block '{name}' ({CORE[kind]}{', label ' + repr(label) if label else ''}) needs "
                f"{used} bytes of {_BUFFER_NAME[loc]} at its peak; {_BUFFER_NAME[loc]} holds {memory.buffer(loc)} bytes "
                f"— {_advice(ops, kind, body, loc, used, label, memory, row_loops)}")
    return Program(name, CORE[kind], body, label, tuple(sorted(peak.items())))


def _advice(ops, kind, body, loc, used, label, memory, row_loops) -> str:
    """What to change when a block's peak ``used`` bytes overfill buffer ``loc``: the tiles it loads,
    and where a reduction reads whole rows, that only fewer rows per tile help."""
    def walk(eqns):
        for eqn in eqns:
            yield eqn
            for key, value in eqn.params.items():
                if key.endswith("jaxpr") and value is not None:
                    yield from walk(getattr(value, "jaxpr", value).eqns)

    eqns = list(walk(body.jaxpr.eqns))
    tiles = sorted({tuple(e.outvars[0].aval.shape) for e in eqns if e.primitive is T.tload_p
                    and e.params["loc"] == loc}, key=lambda t: -int(np.prod(t)))
    shown = f" (it loads tiles {', '.join(map(str, tiles[:3]))})" if tiles else ""
    sorts = [e.invars[0].aval for e in eqns if e.primitive in (T.COMPUTE["sort"], T.COMPUTE["topk"])]
    if kind == "vector" and loc == "vec" and sorts:
        x = max(sorts, key=lambda a: int(np.prod(a.shape)))
        rows = int(np.prod(x.shape[:-1]))
        per_row = -(-used // rows)
        if per_row > memory.buffer(loc):
            return (f"its sort keeps a row of {x.shape[-1]} whole in one tile, and one row alone needs about "
                    f"{per_row} bytes: no tile of this axis fits; sort shorter rows, or take the largest k with "
                    "lax.top_k / pj.ops.topk, which stage a long row in chunks")
        return f"its sort keeps its rows whole: only fewer rows per tile help (at most about {rows * memory.buffer(loc) // used})"
    moves = [e for e in eqns if e.primitive in (T.mgather_p, T.mscatter_p)]
    if kind == "vector" and loc == "vec" and moves:
        return _indexed_advice(moves, memory)
    whole = [e.invars[0].aval for e in eqns if _row_tmp(e)]
    if kind != "vector" or loc != "vec" or not whole:
        return f"use a smaller {'cube' if kind == 'cube' else 'vec'} tile for this op{shown}"
    x = max(whole, key=lambda a: int(np.prod(a.shape)))
    rows, cols = int(np.prod(x.shape[:-1])), x.shape[-1]
    fit = rows * memory.buffer(loc) // used
    size = f"{rows} rows x {cols} columns x {np.dtype(x.dtype).itemsize} bytes, and a tmp tile as large while it reduces"
    fewer = f" (at most about {fit} by this count)" if 0 < fit < rows else ""
    if any(_row_tmp(e) for top in body.jaxpr.eqns if top.primitive.name in CONTROL for e in walk([top])):
        return (f"its row loop reduces column chunks {tuple(x.shape)} of its rows ({size}) and overfills even so: "
                f"only fewer rows per tile help{fewer}")
    if row_loops:
        text = (f"its reduction reads tile {tuple(x.shape)} whole ({size}): with these columns only fewer rows per "
                f"tile help{fewer}; a sum / max / min / prod under a vec tile whose columns split the row loops over "
                "column chunks of it instead, narrowed until the loop fits")
    else:
        text = (f"its reduction reads tile {tuple(x.shape)} whole: reductions and row-wise composites keep their "
                f"rows whole, whatever the vec tile's columns ({size}), so only fewer rows per tile help{fewer}, not "
                f"fewer columns; row_loops is off for label {label!r}: with it on, the column-tiled ops around a "
                "reduction and the reduction loop over column tiles in one program")
    others = [t for t in tiles if t != tuple(x.shape)]
    return text + (f" (it also loads tiles {', '.join(map(str, others[:3]))})" if others else "")


def _indexed_advice(moves, memory) -> str:
    """What helps a gather or scatter whose rows overfill the UB: its index tile holds each index's
    row whole; rows too long for it move in chunks (``tiling._row_chunk``) only where the row's length
    has a small enough divisor, so otherwise fewer indices per tile, or rows padded to one that has."""
    eqn = max(moves, key=lambda e: int(np.prod(e.invars[1].aval.shape)) * int(np.prod(e.invars[0].aval.shape)))
    table, idx, axis = eqn.invars[0].aval, eqn.invars[1].aval, eqn.params["axis"]
    size = np.dtype(table.dtype).itemsize
    row = int(np.prod(table.shape[:axis])) * int(np.prod(table.shape[axis + 1:]))
    count, least = int(np.prod(idx.shape)), max(1, memory.align // np.dtype(idx.dtype).itemsize)
    chunk = max(1, memory.tile_bytes // least // size)
    text = (f"its tiles of {count} indices each move a row of {row} x {size} bytes ({np.dtype(table.dtype).name}) "
            f"= {row * size} bytes of a table of shape {tuple(table.shape)}")
    fewer = (f"a vec tile of fewer indices (at least {memory.align} bytes of them: {least} for "
             f"{np.dtype(idx.dtype).name}; the default tile chooses)")
    if count > least and least * row * size < memory.buffer("vec") // 2:
        return f"{text}: use {fewer}"
    return (f"{text}, and the row's length has no divisor of {memory.align} to {chunk * size} bytes to move it in "
            f"chunks of: pad the table's last axis so that its rows are a multiple of {chunk} elements "
            f"(jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])) and slice the gathered rows back"
            + (f", with {fewer}" if count > least else ""))


# ----------------------------------------------------------------------------------------- driver
def _readers(jaxpr) -> dict:
    """var -> the ids of the eqns of ``jaxpr`` that read it (None: the jaxpr's result)."""
    readers: dict = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if isinstance(v, Var):
                readers.setdefault(v, set()).add(id(eqn))
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            readers.setdefault(v, set()).add(None)
    return readers


class _Partitioner:
    def __init__(self, memory: CoreMemory, options: Options):
        self.memory, self.options = memory, options
        self.programs: dict[tuple, Program] = {}
        self.plans: dict[tuple, dict] = {}       # (core, body text, grid shape) -> the backends' plan
        self.read_in: tuple = (None, {})         # a jaxpr and its :func:`_readers`

    def escaping(self, jaxpr, group) -> set:
        """Outputs of ``group`` that the rest of ``jaxpr`` (or its result) still reads from GM."""
        if self.read_in[0] is not jaxpr:
            self.read_in = (jaxpr, _readers(jaxpr))
        readers, members = self.read_in[1], set(map(id, group))
        return {v for e in group for v in e.outvars if not readers.get(v, set()) <= members}

    def loops(self, label) -> bool:
        return self.options.get("row_loops", label, True)

    def program(self, ops, kind, body, label, note="", shape=(), keep=True, lone=False) -> Program:
        """The program for ``body`` over a grid of ``shape``: bodies that print alike are one program
        (isomorphic blocks). It must fit by :func:`footprint` and by the backend's plan (:data:`PLANNERS`),
        else a :class:`PtoCapacityError`; but ``lone`` (one op, or a row loop: nothing to split) and
        elementwise on whole tiles it computes each tile in pieces where that fits (:meth:`pieces`),
        whichever count its tiles whole overfill; where pieces do not help, a footprint overfill is the
        error and a plan overfill is kept for compile to refuse by name (``pj.kernel`` then halves its
        default tiles). ``lone="pieces"`` (a fused group tried in pieces before it is split): in pieces
        or the error. ``keep=False``: only checked."""
        key = (CORE[kind], label, str(body))
        if key in self.programs:
            return self.programs[key]
        try:
            program = dataclasses.replace(_program(ops, kind, body, label, self.memory, self.loops(label)), note=note)
        except PtoCapacityError:        # its live tiles overfill a buffer: in pieces, where it is elementwise
            cut = self.pieces(ops, kind, body, label, note, shape) if lone else None
            if cut is None:
                raise
            program, planned = cut
        else:
            planned = self.planned(program, shape)
        over = {loc: b for loc, b in planned.items() if b > self.memory.buffer(loc)}
        cut = self.pieces(ops, kind, body, label, note, shape) if over and lone else None
        if cut is not None:
            program, planned = cut
        elif over and lone is not True:
            loc, used = max(over.items(), key=lambda x: x[1] - self.memory.buffer(x[0]))
            raise PtoCapacityError(
                f"pto partition: block '{program.name}' ({program.core}{', label ' + repr(label) if label else ''}) "
                f"needs {used} bytes of {_BUFFER_NAME[loc]} (its tiles placed as the backend plans them); "
                f"{_BUFFER_NAME[loc]} holds {self.memory.buffer(loc)} bytes")
        peak = dict(program.footprint)
        peak.update((loc, max(b, peak.get(loc, 0))) for loc, b in planned.items())
        program = dataclasses.replace(program, footprint=tuple(sorted(peak.items())))
        if not keep:
            return program
        same_name = sum(p.name.split("#")[0] == program.name for p in self.programs.values())
        if same_name:
            program = dataclasses.replace(program, name=f"{program.name}#{same_name + 1}")
        self.programs[key] = program
        return program

    def planned(self, program, shape) -> dict:
        """Bytes per buffer the backends' plans (:data:`PLANNERS`) give ``program``, made once per body;
        a plan that raises :class:`PtoCapacityError` counts as one byte more than the buffer holds."""
        key = (program.core, str(program.body), tuple(shape))
        if key not in self.plans:
            peak: dict = {}
            for plan in PLANNERS:
                try:
                    got = plan(program, tuple(shape), self.memory)
                except PtoCapacityError:
                    loc = "vec" if program.core == "AIV" else "mat"
                    got = {loc: self.memory.buffer(loc) + 1}
                for loc, b in got.items():
                    peak[loc] = max(peak.get(loc, 0), int(b))
            self.plans[key] = peak
        return self.plans[key]

    def pieces(self, ops, kind, body, label, note, shape):
        """The program computing each tile of ``body`` in 2, 4, 8, … pieces (:func:`_in_pieces`), the
        fewest whose live tiles (:func:`footprint`) and backend plan (:data:`PLANNERS`) both fit, and
        that plan; None where none does (a body that is not elementwise on whole tiles, a tile that
        cannot be cut so finely, a tile it loads larger than the UB by itself: a tile that cannot exist)."""
        if kind != "vector" or _largest_load(body) > self.memory.buffer("vec"):
            return None
        k, tried = 2, 1
        while k <= _MAX_PIECES:
            cut = _in_pieces(body, len(shape), k, self.memory)
            if cut is None or cut[1] == tried:      # not so finely: no more pieces than the last try
                return None
            cut, tried = cut
            try:
                program = _program(ops, kind, cut, label, self.memory, self.loops(label))
            except PtoCapacityError:
                k *= 2
                continue
            program = dataclasses.replace(program, note=(note + "; " if note else "")
                                          + f"each tile in {tried} pieces: its tiles whole overfill the UB")
            got = self.planned(program, shape)
            if all(b <= self.memory.buffer(loc) for loc, b in got.items()):
                return program, got
            k *= 2
        return None

    def run(self, jaxpr, consts, args, stack=""):
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        plan = self.row_loops(jaxpr, _plan(jaxpr))
        known = dict(self.programs)
        try:
            blocks = [self.blocks(jaxpr, group, split=False) for group in plan]
        except PtoCapacityError:                # siblings overfilled a buffer, in pieces too: depth merging only
            self.programs = known
            plan = self.row_loops(jaxpr, _plan(jaxpr, siblings=False))
            blocks = [self.blocks(jaxpr, group) for group in plan]
        for group, made in zip(plan, blocks):
            if made is None:
                eqn = group[0]
                invals = [read(env, v) for v in eqn.invars]
                outs = control(eqn, invals, stack, self.run) if eqn.primitive.name in CONTROL else _bind(eqn, invals)
                env.update(zip(eqn.outvars, outs))
                continue
            for spec, inputs, outputs in made:
                outs = ir.block_call_p.bind(*[read(env, v) for v in inputs], spec=spec)
                env.update(zip(outputs, outs))
        return [read(env, v) for v in jaxpr.outvars]

    def row_loops(self, jaxpr, plan) -> list:
        """``plan`` with runs of vector groups over the same row blocks that ``rowloop.fuse`` makes one
        program (long rows looping inside it) as one group each, where its program fits the core; what
        the trace put between them without reading them (:func:`_run`) goes before."""
        out, plan, shapes, hopeless = [], list(plan), {}, set()
        while plan:
            first = _grid(plan[0][0])
            looping = id(plan[0]) not in hopeless and (first is None or self.options.get("row_loops", first.label, True))
            apart, run = _run(plan, shapes, hopeless) if looping else ([], [])
            for m in range(len(run), 1, -1):
                group = _RowGroup(e for g in run[:m] for e in g)
                try:
                    group.block = self.looped(jaxpr, group, "long rows: the column tiles loop inside the program")
                except PtoCapacityError:
                    continue
                if group.block is None:
                    continue
                out += [*apart, group]
                plan = run[m:] + plan[len(apart) + len(run):]
                break
            else:
                out.append(plan.pop(0))
        return out

    def looped(self, jaxpr, group, note):
        """The row-loop block of ``group`` (``rowloop.fuse``) over the column tiles it was tiled in, or
        where that program overfills a buffer, over narrower column chunks (``rowloop.narrower``: the
        width halved while it stays 32-byte aligned) — the widest that fits; None where no row loop
        forms, the narrowest's :class:`PtoCapacityError` where none fits."""
        escaping, known, error = self.escaping(jaxpr, group), dict(self.programs), None
        for chunk in (None, *rowloop.narrower(group, self.memory)):
            fused = rowloop.fuse(group, escaping, chunk=chunk)
            if fused is None:
                break
            try:
                return self.row_block(group, fused, note if chunk is None else
                                      f"{note}, in column chunks of {chunk}: the vec tile's overfill the buffers")
            except PtoCapacityError as err:
                error = err
                self.programs = dict(known)     # none of an overfilling program's parts
        if error is None:
            return None
        raise error

    def row_block(self, group, fused, note, lone=False):
        bodies, out_specs, inputs, outputs, shapes = fused
        spec = group[0].params["spec"]
        ops = tuple(op for e in group for op in e.params["spec"].ops)
        tpb = self.options.get("tiles_per_block", spec.label, 1)
        parts = tuple(BlockPart(self.program(ops, spec.kind, body, spec.label, note, shape, lone=lone), shape, tpb)
                      for body, shape in zip(bodies, shapes))
        return Block(parts, out_specs), inputs, outputs

    def blocks(self, jaxpr, group, split=True):
        """The blocks of a group of grid eqns, each (Block, input vars, output vars); None for another
        eqn. A group whose program would overfill a buffer is one row loop (``rowloop``: its whole-row
        tensors recomputed, not kept) where that fits, else one program computing each tile in pieces
        where the group is elementwise on whole tiles and that fits (:meth:`pieces`, ``split`` or not),
        else (``split``) consecutive groups that fit (a lone op among them again in pieces where it
        overfills)."""
        if isinstance(group, _RowGroup):
            return [group.block]
        if len(group) == 1 and _grid(group[0]) is None:
            return None
        if _wide_reduction(group, self.memory):
            return self.wide_rows(jaxpr, group, split)
        if len(group) == 1 and _wide_reduction(group, self.memory, 0):
            built = self.overfull_row(jaxpr, group)
            if built is not None:
                return [built]
        try:
            return [self.block(jaxpr, group)]
        except PtoCapacityError as err:
            if len(group) == 1:
                raise
            error, why = err, str(err).split(": ", 1)[-1].split(" — ")[0]
        try:
            looped = self.looped(jaxpr, group, f"recomputes whole-row tensors in a row loop: fused as written, {why}")
        except PtoCapacityError:
            looped = None
        if looped is None and _wide_reduction(group, self.memory, 0) and self.loops(_grid(group[0]).label):
            looped = self.in_column_chunks(jaxpr, group, _OVERFULL)   # its reduction left whole, what follows too
        if looped is not None:
            return [looped]
        known = dict(self.programs)
        try:            # elementwise on whole tiles: fused as written, each tile in pieces
            return [self.block(jaxpr, group, pieces=True)]
        except PtoCapacityError:
            self.programs = known       # none of a part that fit before another did not
        if not split:
            raise error
        segments, current = [], [group[0]]
        for eqn in group[1:]:
            try:
                self.block(jaxpr, current + [eqn], keep=False)
                current.append(eqn)
            except PtoCapacityError:
                segments.append(current)
                current = [eqn]
        return [self.block(jaxpr, seg, note=f"split from a fused group: {why}") for seg in segments + [current]]

    def overfull_row(self, jaxpr, group):
        """The block of a lone reduction the tile pass left whole over rows that the user's tile splits
        (``tiling._loops_row``): as it is where its program fits the buffers as the backend plans them (its
        tiles whole), else a row loop over column chunks of its rows (:meth:`in_column_chunks`); None where
        neither forms (then its tiles in pieces). (A fused group holding one that overfills tries the row
        loop after its own forms, in :meth:`blocks`.)"""
        known = dict(self.programs)
        try:
            built = self.block(jaxpr, group, whole=True)    # a row loop before its tiles in pieces
            if all(b <= self.memory.buffer(loc) for part in built[0].parts for loc, b in part.program.footprint):
                return built
        except PtoCapacityError:
            pass
        self.programs = known       # none of the overfilling program
        return self.in_column_chunks(jaxpr, group, _OVERFULL) if self.loops(_grid(group[0]).label) else None

    def in_column_chunks(self, jaxpr, group, note):
        """The block of ``group`` as a row loop over column chunks of its rows (``rowloop.fuse`` with
        ``memory``), or None where the group is not of that form."""
        fused = rowloop.fuse(group, self.escaping(jaxpr, group), self.memory)
        return None if fused is None else self.row_block(group, fused, note, lone=True)

    def wide_rows(self, jaxpr, group, split):
        """The blocks of a group with a reduction over rows wider than a tile row holds (the tile pass
        leaves such a reduction whole for a row loop, ``tiling._loops_row``) that no chain made one:
        a row loop over column chunks of its rows (``rowloop.fuse`` with ``memory``), or each member on
        its own where the group is not of that form."""
        note = f"long rows: rows wider than a tile row ({self.memory.max_cols} columns) loop over column chunks"
        built = self.in_column_chunks(jaxpr, group, note)
        if built is not None:
            return [built]
        if len(group) > 1:
            return [b for eqn in group for b in self.blocks(jaxpr, [eqn], split)]
        spec = _grid(group[0])
        raise PtoCapacityError(f"pto partition: grid '{spec.name}' (label {spec.label!r}) reduces rows wider than a tile "
                               f"row ({self.memory.max_cols} columns) and forms no row loop; set "
                               f"options={{'row_loops': {{{spec.label!r}: False}}}} to reduce them in stages")

    def block(self, jaxpr, group, keep=True, note="", pieces=False, whole=False):
        """The block of one group of grid eqns: (Block, input vars, output vars); ``keep=False``: only
        check that its programs fit (none is recorded). ``pieces``: each program computes its tiles in
        pieces (:meth:`pieces`), else the :class:`PtoCapacityError` (a lone op: in pieces where it
        overfills, else kept as it is); ``whole``: its tiles whole or the error, for a lone op too."""
        specs = [e.params["spec"] for e in group]
        label, kind = specs[0].label, specs[0].kind
        ops = tuple(op for sp in specs for op in sp.ops)
        tpb = self.options.get("tiles_per_block", label, 1)
        for share_loads in (True, False):
            bodies, out_specs, inputs, outputs = _fuse(group, self.escaping(jaxpr, group), share_loads)
            lone = False if whole else "pieces" if pieces else len(group) == 1
            try:
                if not keep:
                    return [self.program(ops, kind, body, label, note, part.shape, keep=False, lone=lone)
                            for body, part in zip(bodies, specs[0].parts)]
                parts = tuple(BlockPart(self.program(ops, kind, body, label, note, part.shape, lone=lone), part.shape, tpb)
                              for body, part in zip(bodies, specs[0].parts))
                return Block(parts, out_specs), inputs, outputs
            except PtoCapacityError:
                if not share_loads or len(group) == 1:
                    raise


def _wide_reduction(group, memory, wider_than=None) -> bool:
    """Whether a member of ``group`` reduces rows wider than ``wider_than`` columns (default: a tile row,
    ``memory.max_cols``) whole."""
    cols = memory.max_cols if wider_than is None else wider_than
    for eqn in group:
        spec = _grid(eqn)
        if spec is not None and spec.kind == "vector" and any(
                (r := rowloop._reduction(p.body)) and r[0].params["window"].shape[-1:] > (cols,)
                for p in spec.parts):
            return True
    return False


class _RowGroup(list):
    """A group fused by ``rowloop``; ``block`` holds its (Block, input vars, output vars)."""

    block = None


def _run(plan, shapes: dict, hopeless: set) -> tuple[list, list]:
    """The run of vector groups from ``plan[0]`` that may form a row loop (same label, same row blocks:
    grid parts alike but for the last, column, dim; column tiles in some only), and the groups between
    them that read none of them (a weight's cast traced between a norm's ops; emitted before the run):
    ``(apart, run)``, which make up the start of ``plan``; ``([], [])`` where no such run starts there.
    ``shapes``: each group's :func:`_row_shapes`, kept over the calls on one plan. A run of one grid
    shape that reaches the plan's end adds its groups to ``hopeless``: a run from any of them has that
    one shape too (so that a plan of thousands of alike calls is walked once, not once per call)."""
    def rows(group):
        if id(group) not in shapes:
            shapes[id(group)] = _row_shapes(group)
        return shapes[id(group)]

    def movable(group, made, pending):
        return len(pending) < _APART and all(
            not any(isinstance(v, Var) and v in made for v in e.invars)
            and (e.primitive.name in ir.GM_VIEWS or _host_scalar(e)
                 or (_grid(e) is not None and all(o.alias is None for o in _grid(e).outputs)))
            for e in group)

    key, grids = rows(plan[0])
    if key is None:
        return [], []
    run, apart, pending, grids = plan[:1], [], [], set(grids)
    made = {v for e in plan[0] for v in e.outvars}
    for group in plan[1:]:
        if rows(group)[0] == key:
            run.append(group)
            grids |= rows(group)[1]
            made.update(v for e in group for v in e.outvars)
            apart, pending = apart + pending, []
        elif movable(group, made, pending):
            pending.append(group)
        else:
            break
    else:
        if len(grids) == 1:
            hopeless.update(map(id, run))
    return (apart, run) if len(grids) > 1 else ([], [])


def _row_shapes(group) -> tuple:
    """``(key, grids)`` of a group of vector grids: its label and row blocks (None where the grids
    differ in them, or one is no vector grid) and the set of its grids' part shapes."""
    specs = [_grid(e) for e in group]
    if any(s is None or s.kind != "vector" for s in specs):
        return None, frozenset()
    keys = {(s.label, tuple(dict.fromkeys(p.shape[:-1] for p in s.parts))) for s in specs}
    return (keys.pop() if len(keys) == 1 else None), frozenset(tuple(p.shape for p in s.parts) for s in specs)


def to_block_level(tile: ClosedJaxpr, memory: CoreMemory = ASCEND_CORE, options: Options = Options()):
    """The Block graph of a Tile-level jaxpr, and its programs (in first-use order)."""
    part = _Partitioner(memory, options)
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in tile.jaxpr.invars]
    closed = jax.make_jaxpr(lambda *args: part.run(tile.jaxpr, tile.consts, args))(*avals)
    return closed, tuple(part.programs.values())
