"""The cost model: cycles of PTO instructions and of whole block programs on one Ascend core.

Per instruction (:func:`instr_cost`) -- the pipe it occupies and for how many cycles (throughput
cost; a fixed memory latency is not occupancy and is only charged once per block, see below):

- ``MTE2`` (GM -> L1/UB/L0; ``tload``, ``mgather``, registered GM readers: :func:`gm_read`): bytes /
  GM read rate + DMA issue. The rate mixes the per-core L2 read rate (110 B/cycle) and DDR rate
  (32 B/cycle) by the fraction of bytes that hit L2 (``l2_hit``: the ``l2_hit`` attribute of the
  instruction, else the caller's value, default 1.0). The runtime passes, per block call, the share
  the L2 rule (:mod:`ptojax.mpmd.l2`: compulsory reads and re-reads past the 192 MiB L2 come from HBM)
  sends to HBM, the same bytes the simulated HBM channel and the lower bound count. Indexed rows add
  ``row_access_cycles`` per row.
- ``MTE1`` (L1 -> L0A at 512 B/cycle, L1 -> L0B at 256), ``MTE3`` (UB -> GM at 64), ``FIXPIPE``
  (L0C -> UB/L1 at 256, L0C -> GM at min(256, L2 write 86)).
- ``CUBE``: MACs over the fractal-padded shape, ceil16(m) * ceil_fk(k) * ceil16(n) (fk = 16 fp16/bf16,
  32 int8, 8 fp32), / MACs per cycle (4096 / 8192 / 2048) + 21 issue cycles. No efficiency factor:
  the PTO GEMM README's "TMATMUL ratio 86.7 %" is the cube's busy share of a whole kernel, which the
  block model reproduces from pipeline fill and issue costs (tests/test_cost.py prints it).
- ``VECTOR``: sum over the op's passes of ``startup + repeats * 2 cycles * rel``, where repeats =
  bytes / 256 B (rows padded to 32 B), bytes = the largest tile operand, and ``(rel, startup)`` of a
  pass class come from hicann/pypto's A2A3 cost model (HW notes §3.6): rel = the class's
  PostSimulator slope r0 relative to ADD's, startup = the fast simulator's op latency. Composite ops
  are priced as the passes listed in :data:`VECTOR_OPS` (e.g. softmax = row max, subtract, exp, row
  sum, divide). ``:rows`` passes work on one fp32 value per row (per-row scalars of norms/quant).
- sorts (``ttopk``, ``tsort``, ``tsort32``, ``tmrgsort``): the sort unit's sequence, see :func:`_sort`.
- ``SCALAR``: metadata-only ops (``tview``, ``treshape``, ...): one cycle.

Per block (:func:`kernel_time`): ``scf.for`` loops multiply their body by the trip count (bounds are
``arith.constant`` names, or given in ``values``). Each pipe is an independent in-order engine and
double buffering lets them overlap, so the block runs at the pace of its busiest pipe (the
bottleneck) plus the pipeline fill that cannot overlap::

    cycles = max_p busy[p]
           + gm_read_latency  (1400, once, if the block reads GM)
           + prologue         (cycles of the instructions that precede the first bottleneck
                               instruction, e.g. the first tile's load + L1->L0 moves before the
                               first tmatmul; 0 when the bottleneck is the first pipe used)
           + epilogue         (cycles of the instructions after the last bottleneck instruction,
                               e.g. the final tstore of the accumulator)
           + gm_write_latency (300, once, if the block writes GM)

Real instructions (:func:`function_time`, or :func:`kernel_time` given a parsed function of the
real module, ``engine.parse(AscendKernel.pto()).functions``): what the product emits and what the
vendor's ``ptoas`` assembles is instruction selection's text, so :meth:`AscendKernel.costs` prices
THAT, with the same rules, statement by statement:

- every real vector instruction is one entry of :data:`VECTOR_OPS` (``trowsum`` one ROWSUM pass,
  ``texp`` one EXP pass, ``tdivs``/``trowexpanddiv`` one DIV pass, ``tcvt`` one CAST pass, ``tcmp``/
  ``tsel`` ADD-like, ...): a composite such as softmax is now the sequence selection prints, each
  instruction with its own startup and its own operand sizes (tmp tiles, masks and widened operands
  included), instead of the pass list of the composite;
- ``tsort32`` and ``tmrgsort`` run on the sort unit (``Target.sort32_*``, ``Target.merge_*``):
  ``tsort32`` one vbitsort per row, 16 cycles per 32 values (measured on a 910B3); ``tmrgsort`` one
  vmrgsort4, 194 cycles per 128 (value, index) structs of its lists (fitted to pto-isa's top-k);
  ``tgather`` one ADD-like pass;
- ``tload``/``tstore``/``tmov`` the DMA rules above, ``tmatmul``/``.acc``/``.bias`` the cube rule;
- ``treshape``/``subset`` (aliases) one SCALAR cycle, like ``tview``; ``tgetval``/``tsetval`` (a UB
  element through the scalar unit, after a vector->scalar sync) ``Target.scalar_ub_cycles`` and
  ``load_scalar`` (a GM element: an L2 hit) ``Target.scalar_gm_cycles`` SCALAR cycles; ``arith``,
  views and ``alloc_tile`` are free, as codegen's are;
- ``scf.for`` multiplies its body by the trip count (bounds folded from ``arith.constant`` and
  ``arith`` on constants; others from ``values``); ``scf.if`` is taken once per enclosing iteration
  (its ``then`` block, or the costlier block when there is an ``else``; a constant condition picks);
- a ``?`` valid dim (a loop-dependent ``subset``) is priced at the tile's full dim, an upper bound,
  except a tile's ``valid_row``/``valid_col`` operand whose value folds (a dynamic row count given
  in ``values``: the tail block of ``ceil(m/T)`` prices its ``m - T*i`` rows);
- a task function (a task of several grid points, :mod:`~ptojax.ascend.isel.task`) is priced by
  :func:`task_time` as one block whose body is its points in order: their pipes add up, the fill is
  paid once per task (double buffering carries on across points), and a load the task keeps
  resident (L1/UB reuse) is charged once per window, not once per point;
- the text carries no ``l2_hit`` attribute (ptoas would reject one), so every ``tload`` reads with
  the caller's ``l2_hit`` -- :meth:`AscendKernel.costs` passes codegen's (its loads' byte-weighted
  ``l2_hit`` attributes, default 1.0), so both paths keep the same L2/HBM fractions.

Assumptions: buffers are double-buffered enough that no pipe waits on another in the steady state
(the lowering checks capacities, not this model); the per-core rates are not reduced by other
cores' traffic -- die-level limits (HBM bandwidth across all cores: the runtime's HBM channel;
scheduler costs) belong to the runtime and to the lower bound (``Target.hbm_bytes_per_s``,
``dispatch_s``, ``aicpu_task_s``).
"""
from __future__ import annotations

import dataclasses
import functools
import math

from ..errors import PtoArgumentError, PtoUnsupportedError
from . import asm
from .targets import Target, target as _target

PIPES = ("MTE2", "MTE1", "CUBE", "VECTOR", "FIXPIPE", "MTE3", "SCALAR")

# ---------------------------------------------------------------------------------- vector passes
# hicann/pypto PostSimulatorA2A3 slopes r0 (us/MB; HW notes §3.6), relative to ADD's 2.40457.
_R0 = {"ADD": 2.40457, "MUL": 1.63706, "EXP": 3.49358, "DIV": 3.82854, "CAST": 0.9125,
       "ROWSUM": 14.58731, "ROWMAX": 15.58731}
# Op latencies (cycles) of the fast simulator's fallback model "op_latency + (bytes/256)*2 - 1"
# (ADD 6, MUL 7, EXP 12, DIV 13, ROWSUM 20-23: we take 23 for both row reductions; CAST has none
# listed: ADD's).
_STARTUP = {"ADD": 6, "MUL": 7, "EXP": 12, "DIV": 13, "CAST": 6, "ROWSUM": 23, "ROWMAX": 23}
# Classes without a coefficient of their own: LN and SQRT are priced as EXP and DIV (PyPTO groups
# them so in its parallelRatio rule); copies, compares, selects, bitwise, gathers as ADD.
VECTOR_CLASSES = {c: (_R0[c] / _R0["ADD"], _STARTUP[c]) for c in _R0}

_SIGMOID = ("MUL", "EXP", "ADD", "DIV")                       # exp(-x), 1 + ., 1 / .
_TANH = (("ADD", "MUL", "EXP", "ADD", "ADD", "DIV", "ADD", "ADD", "ADD")    # sign(x) (1 - e) / (1 + e), e = exp(-2|x|)
         + ("MUL", "MUL", "ADD") + ("MUL", "ADD") * 3 + ("MUL", "ADD", "MUL", "ADD", "ADD"))  # x (1 + x² P(x²)), select
_ROW_RSQRT = ("MUL:rows", "ADD:rows", "DIV:rows", "DIV:rows")  # mean = sum/n, + eps, sqrt, 1/.

VECTOR_OPS: dict[str, tuple[str, ...]] = {
    # elementwise, one pass
    **{op: ("ADD",) for op in (
        "tadd", "tsub", "tmax", "tmin", "tabs", "tneg", "trelu", "tprelu", "tlrelu", "tcmp", "tsel",
        "teq", "tne", "tlt", "tle", "tgt", "tge", "tand", "tor", "txor", "tnot", "tshl", "tshr",
        "tlogical_and", "tlogical_or", "tlogical_not", "texpand", "tconcat", "tgather", "tgatherb",
        "tscatter", "tscatter_update", "tindex_add", "tpad", "tfillpad", "tfillpad_inplace",
        "tfillpad_expand", "tassemble", "ttrans", "textract", "tinsert", "tci", "ttri",
        "tinterleave", "tdeinterleave", "trowexpand", "tcolexpand", "tpartadd", "tpartmax", "tpartmin",
        "tcopy")},
    "tmul": ("MUL",), "tpartmul": ("MUL",),
    "taddc": ("ADD", "ADD"), "tsubc": ("ADD", "ADD"), "tsubrelu": ("ADD", "ADD"), "tclip": ("ADD", "ADD"),
    "taxpy": ("MUL", "ADD"), "tmuladddst": ("MUL", "ADD"), "tfusedmuladd": ("MUL", "ADD"),
    "tfusedmuladdrelu": ("MUL", "ADD", "ADD"), "tpairreducesum": ("ADD",),
    # transcendental / division
    "texp": ("EXP",), "tlog": ("EXP",), "tdiv": ("DIV",), "trecip": ("DIV",), "tsqrt": ("DIV",),
    "trsqrt": ("DIV", "DIV"), "trem": ("DIV", "CAST", "MUL", "ADD"), "tfmod": ("DIV", "CAST", "MUL", "ADD"),
    "tpow": ("EXP", "MUL", "EXP"),                              # exp(y * ln x)
    "tcvt": ("CAST",),
    "tround": ("CAST", "CAST", "MUL", "ADD", "ADD", "ADD", "ADD", "ADD"),  # via i32; x*0, |x|, 2 x (tcmps, tsel)
    # activations
    "tsigmoid": _SIGMOID, "tsilu": _SIGMOID + ("MUL",), "ttanh": _TANH,
    "tgelu": ("MUL", "MUL", "ADD", "MUL") + _SIGMOID + ("MUL",),  # tanh form: x sigmoid(2 c (x + a x³))
    # axis reductions (explicit forms)
    "trowsum": ("ROWSUM",), "trowprod": ("ROWSUM",), "trowmax": ("ROWMAX",), "trowmin": ("ROWMAX",),
    "trowargmax": ("ROWMAX", "ADD"), "trowargmin": ("ROWMAX", "ADD"),
    "tcolsum": ("ADD",), "tcolprod": ("MUL",), "tcolmax": ("ADD",), "tcolmin": ("ADD",),
    "tcolargmax": ("ADD", "ADD"), "tcolargmin": ("ADD", "ADD"),
    "trowexpandexpdif": ("ADD", "EXP"), "tcolexpandexpdif": ("ADD", "EXP"),
    # composites: the passes they expand to on the vector unit
    "tsoftmax": ("ROWMAX", "ADD", "EXP", "ROWSUM", "DIV"),
    "trms_norm": ("MUL", "ROWSUM") + _ROW_RSQRT + ("MUL", "MUL"),            # x*x, sum, rsqrt, x*r, *g
    "tlayer_norm": ("ROWSUM", "MUL:rows", "ADD", "MUL", "ROWSUM") + _ROW_RSQRT + ("MUL", "MUL", "ADD"),
    "tquant": ("ADD", "ROWMAX", "DIV:rows", "MUL", "CAST", "CAST"),  # |x|, amax, 127/amax, x*s, f32->f16->i8
    "tdequant": ("CAST", "MUL", "MUL"),                           # i32->f32, * row scale, * col scale
}
# Generic reductions: the reduced axis decides row (cross-lane) or column (elementwise) passes.
_REDUCE = {"tsum": ("ROWSUM", "ADD"), "tprod": ("ROWSUM", "MUL"), "tamax": ("ROWMAX", "ADD"),
           "tamin": ("ROWMAX", "ADD"), "targmax": ("ROWMAX", "ADD"), "targmin": ("ROWMAX", "ADD")}
_SCALAR_OPS = {"tview", "treshape", "tsubview", "tassign", "tsync", "tprefetch", "tget_scale_addr"}
_SORT_OPS = {"ttopk", "tsort", "tsort32", "tmrgsort"}
_FUSED_EXPAND = ("trowexpand", "tcolexpand")
# User-registered instructions (``isa.register``): mnemonic -> price(instr, target, l2_hit) -> (pipe, cycles,
# flops) or (pipe, cycles, flops, GM bytes in, GM bytes out).
CUSTOM: dict = {}


@dataclasses.dataclass(frozen=True)
class BlockCost:
    """Predicted cost of one block program on one core."""

    cycles: float
    seconds: float
    pipes: dict                      # pipe -> busy cycles
    bytes_in: int                    # GM bytes read
    bytes_out: int                   # GM bytes written
    flops: float                     # 2*m*k*n per matmul + one per element per vector pass
    bottleneck: str = ""
    fill: float = 0.0                # the non-overlapped cycles: latencies + prologue + epilogue
    priced: str = "codegen"          # the instructions priced: "codegen" (asm.Kernel) or "pto" (the real text)


# ------------------------------------------------------------------------------------------ helpers
def _tiles(operands):
    return [o.type for o in operands if isinstance(o.type, asm.TileBuf)]


def _views(operands):
    return [o.type for o in operands if isinstance(o.type, asm.ViewType)]


def _valid_bytes(t: asm.TileBuf) -> int:
    return t.v_row * t.v_col * t.np_dtype.itemsize


def _repeat_bytes(t: asm.TileBuf, align: int) -> int:
    """Bytes the vector unit sweeps over: each valid row padded to the 32-byte block."""
    return t.v_row * -(-t.v_col * t.np_dtype.itemsize // align) * align


def _ceil(x, m):
    return -(-x // m) * m


def _fail(instr, message):
    return PtoUnsupportedError(f"pto.{instr.op}: {message}")


def _l2_hit(instr, l2_hit):
    value = float(instr.attr("l2_hit", l2_hit))
    if not 0.0 <= value <= 1.0:
        raise PtoArgumentError(f"pto.{instr.op}: l2_hit must lie in [0, 1], got {value}")
    return value


# --------------------------------------------------------------------------------- per instruction
def _dma_in(instr, tgt: Target, l2_hit, rows: bool):
    """MTE2 into the first destination tile; ``rows`` adds one row access per destination row."""
    dst = _tiles(instr.outs)
    if not dst:
        raise _fail(instr, "expects a tile_buf destination")
    if dst[0].loc == "acc":
        raise _fail(instr, "GM -> acc (L0C) is not a data path; load into mat/left/right/vec")
    nbytes = _valid_bytes(dst[0])
    cycles = nbytes / tgt.gm_read_rate(_l2_hit(instr, l2_hit)) + tgt.dma_issue_cycles
    if rows:
        cycles += dst[0].v_row * tgt.row_access_cycles
    return "MTE2", cycles, nbytes


def gm_read(instr: asm.Instr, target, *, rows: bool, l2_hit: float = 1.0) -> tuple[str, float, int]:
    """(pipe, cycles, GM bytes) of a GM -> tile move into ``instr``'s first destination, priced like
    ``tload`` (``rows=False``) or ``mgather`` (``rows=True``: one row access per destination row)."""
    return _dma_in(instr, _target(target), l2_hit, rows)


def _dma_out(instr, tgt: Target):
    src = _tiles(instr.ins)
    if not src:
        raise _fail(instr, "expects a tile_buf source")
    t = src[-1]
    elems = t.v_row * t.v_col
    views = _views(instr.outs) + _views(instr.ins)
    gm_item = asm.DTYPES[views[0].dtype].itemsize if views else t.np_dtype.itemsize
    out_bytes = elems * gm_item
    if t.loc == "vec":
        pipe, cycles = "MTE3", out_bytes / tgt.ub_to_gm
    elif t.loc == "acc":
        pipe = "FIXPIPE"
        cycles = max(elems * t.np_dtype.itemsize / tgt.l0c_to_ub, out_bytes / tgt.gm_write_l2)
    else:
        raise _fail(instr, f"no data path {t.loc} -> GM on A2/A3 (store from vec or acc)")
    cycles += tgt.dma_issue_cycles
    if instr.op == "mscatter":
        cycles += t.v_row * tgt.row_access_cycles
    return pipe, cycles, out_bytes


_MOVES = {("mat", "left"): ("MTE1", "l1_to_l0a"), ("mat", "right"): ("MTE1", "l1_to_l0b"),
          ("mat", "bias"): ("MTE1", "l1_to_l0b"),      # L1 -> BiasTable on MTE1 (no own rate: L0B's)
          ("acc", "vec"): ("FIXPIPE", "l0c_to_ub"), ("acc", "mat"): ("FIXPIPE", "l0c_to_ub")}


def _tmov(instr, tgt: Target):
    src, dst = _tiles(instr.ins), _tiles(instr.outs)
    if not src or not dst:
        raise _fail(instr, "expects tile_buf operands")
    path = (src[0].loc, dst[0].loc)
    if path == ("vec", "vec"):
        return _vector(instr, tgt, ("ADD",))
    if path not in _MOVES:
        raise _fail(instr, f"no data path {path[0]} -> {path[1]} on the split A2/A3 cores")
    pipe, rate = _MOVES[path]
    return pipe, _valid_bytes(dst[0]) / getattr(tgt, rate), 0.0


def _matmul_dims(instr):
    ins = _tiles(instr.ins)
    left = [t for t in ins if t.loc == "left"]
    right = [t for t in ins if t.loc == "right"]
    if not (left and right):
        operands = [t for t in ins if t.loc not in ("acc", "bias")]
        if len(operands) < 2:
            raise _fail(instr, "expects left and right tile operands")
        left, right = operands[:1], operands[1:2]
    a, b = left[0], right[0]
    m, k = (a.v_col, a.v_row) if instr.attr("transpose_a", False) else (a.v_row, a.v_col)
    n = b.v_row if instr.attr("transpose_b", False) else b.v_col
    return m, k, n, a.np_dtype


def _matmul(instr, tgt: Target):
    m, k, n, dtype = _matmul_dims(instr)
    edge = tgt.memory.fractal
    macs = _ceil(m, edge) * _ceil(k, tgt.fractal_k(dtype)) * _ceil(n, edge)
    return "CUBE", macs / tgt.cube_macs(dtype) + tgt.cube_issue_cycles, 2.0 * m * k * n


def _pass_cycles(cls, nbytes, tgt: Target):
    rel, startup = VECTOR_CLASSES[cls]
    repeats = math.ceil(nbytes / tgt.vector_bytes_per_repeat)
    return startup + repeats * tgt.vector_cycles_per_repeat * rel


def _vector(instr, tgt: Target, passes):
    tiles = _tiles(instr.ins) + _tiles(instr.outs)
    if not tiles:
        raise _fail(instr, "vector instruction without tile operands")
    big = max(tiles, key=lambda t: _repeat_bytes(t, tgt.memory.align))
    nbytes = _repeat_bytes(big, tgt.memory.align)
    row_bytes = big.v_row * 4                       # one fp32 scalar per row
    cycles = flops = 0.0
    for p in passes:
        cls, _, scope = p.partition(":")
        b = row_bytes if scope == "rows" else nbytes
        cycles += _pass_cycles(cls, b, tgt)
        flops += big.v_row if scope == "rows" else big.v_row * big.v_col
    return "VECTOR", cycles, flops


def _reduce_passes(instr, op):
    """Row (cross-lane) and/or column (elementwise across rows) passes of a reduction, from its
    ``axes``/``axis`` attribute over the operand's logical shape (the ``shapes`` attribute when the
    tensor is not 2-D), else from how the tile shape shrinks."""
    ins, outs = _tiles(instr.ins), _tiles(instr.outs)
    if not ins or not outs:
        raise _fail(instr, "expects tile operands")
    src, dst = ins[0], outs[0]
    row, col = _REDUCE[op]
    attrs = dict(instr.attrs)
    axes = attrs.get("axes", attrs.get("axis", "?"))
    if axes != "?":
        shapes = attrs.get("shapes")
        rank = len(shapes[0]) if shapes else 2
        axes = range(rank) if axes is None else (axes,) if isinstance(axes, int) else axes
        axes = {a % rank for a in axes} if rank else set()
        across_lanes, across_rows = rank - 1 in axes, any(a < rank - 1 for a in axes)
    else:
        across_lanes, across_rows = dst.v_col < src.v_col, dst.v_row < src.v_row
    passes = (row,) if across_lanes else ()
    if across_rows:
        passes += (col + ":rows",) if across_lanes else (col,)
    return passes or (row,)


def _sort32_cycles(rows: int, length: int, tgt: Target) -> float:
    """TSORT32 over ``rows`` rows of ``length`` values: one vbitsort per row, one repeat per 32 values."""
    return rows * (tgt.sort32_startup + math.ceil(length / 32) * tgt.sort32_cycles)


def _merge_cycles(structs: float, tgt: Target) -> float:
    """One vmrgsort4 writing ``structs`` (value, index) structs."""
    return tgt.merge_startup + structs * tgt.merge_cycles


def _sort(instr, tgt: Target):
    """Top-k / sort / merge in codegen's instructions, priced as the real sequence selection prints for
    them (:func:`_sort_stage`): per row a TSORT32 of the row's 32-value groups, then 4-way TMRGSORT
    rounds, each over all of the row's structs, until one list is left (``ttopk`` keeps a prefix of
    it); ``tmrgsort`` (merging the tile's rows, ``lists`` per output row) is its 4-way rounds only."""
    ins, outs = _tiles(instr.ins), _tiles(instr.outs)
    if not ins:
        raise _fail(instr, "expects a tile operand")
    src = ins[0]
    if instr.op == "tmrgsort":        # the lists are the tile's rows per output row
        lists = max(1, src.v_row // max(1, outs[0].v_row)) if outs else 1
        rounds = max(1, math.ceil(math.log(lists, 4)))
        cycles = rounds * _merge_cycles(src.v_row * src.v_col, tgt)
        return "VECTOR", cycles, float(rounds * src.v_row * src.v_col)
    length = src.v_col
    rounds = max(0, math.ceil(math.log(max(length, 32) / 32, 4)))
    cycles = _sort32_cycles(src.v_row, length, tgt) + src.v_row * rounds * _merge_cycles(length, tgt)
    return "VECTOR", cycles, float(src.v_row * length * (1 + rounds))


def _cumsum(instr, tgt: Target):
    """Prefix sum by doubling (Hillis-Steele): ceil(log2 L) add passes along the scanned axis."""
    src = _tiles(instr.ins)
    if not src:
        raise _fail(instr, "expects a tile operand")
    axis = instr.attr("axis", -1)
    length = src[0].v_row if axis in (0, -2) else src[0].v_col
    return _vector(instr, tgt, ("ADD",) * max(1, math.ceil(math.log2(max(length, 2)))))


def _vector_passes(op):
    if op in VECTOR_OPS:
        return VECTOR_OPS[op]
    if op.endswith("s") and op[:-1] in VECTOR_OPS:              # tile-scalar forms: tadds, tmuls, ...
        return VECTOR_OPS[op[:-1]]
    for prefix in _FUSED_EXPAND:                                 # trowexpandmul, tcolexpandadd, ...
        if op.startswith(prefix) and "t" + op[len(prefix):] in VECTOR_OPS:
            return VECTOR_OPS["t" + op[len(prefix):]]
    return None


def _price(instr: asm.Instr, tgt: Target, l2_hit: float):
    """(pipe, cycles, gm bytes in, gm bytes out, flops)."""
    op = instr.op
    if op in CUSTOM:
        pipe, cycles, flops, *gm = CUSTOM[op](instr, tgt, _l2_hit(instr, l2_hit))
        b_in, b_out = (list(gm) + [0, 0])[:2]
        return pipe, cycles, b_in, b_out, flops
    if op in ("tload", "mgather"):
        pipe, cycles, nbytes = _dma_in(instr, tgt, l2_hit, rows=op == "mgather")
        return pipe, cycles, nbytes, 0, 0.0
    if op in ("tstore", "mscatter"):
        pipe, cycles, nbytes = _dma_out(instr, tgt)
        return pipe, cycles, 0, nbytes, 0.0
    if op == "tmov":
        pipe, cycles, flops = _tmov(instr, tgt)
        return pipe, cycles, 0, 0, 0.0
    if op in ("tmatmul", "tmatmul_acc", "tmatmul_bias", "tgemv", "tgemv_acc", "tgemv_bias"):
        pipe, cycles, flops = _matmul(instr, tgt)
        return pipe, cycles, 0, 0, flops
    if op in _SCALAR_OPS:
        return "SCALAR", 1.0, 0, 0, 0.0
    if op in _SORT_OPS:
        pipe, cycles, flops = _sort(instr, tgt)
    elif op in ("tcumsum", "tcumsum_carry"):
        pipe, cycles, flops = _cumsum(instr, tgt)
    elif op in _REDUCE:
        pipe, cycles, flops = _vector(instr, tgt, _reduce_passes(instr, op))
    else:
        passes = _vector_passes(op)
        if passes is None:
            raise PtoUnsupportedError(f"pto.{op}: the cost model has no price for instruction {op!r}")
        pipe, cycles, flops = _vector(instr, tgt, passes)
    return pipe, cycles, 0, 0, flops


def instr_cost(instr: asm.Instr, target, *, l2_hit: float = 1.0) -> tuple[str, float]:
    """The pipe ``instr`` occupies and for how many cycles, on ``target`` (a Target or its name).

    ``l2_hit`` is the fraction of GM reads served by L2 (an ``l2_hit`` attribute on the instruction
    takes precedence). Unknown mnemonics raise :class:`PtoUnsupportedError`.
    """
    pipe, cycles, *_ = _price(instr, _target(target), l2_hit)
    return pipe, float(cycles)


# --------------------------------------------------------------------------------------- per block
def _trip(loop: asm.For, consts, values):
    def resolve(name):
        if name in values:
            return values[name]
        if name in consts:
            return consts[name]
        raise PtoUnsupportedError(f"scf.for {loop.var}: bound {name} is not an arith.constant; "
                                  f"give its value in kernel_time(..., values={{{name!r}: n}})")
    lo, hi, step = resolve(loop.lower), resolve(loop.upper), resolve(loop.step)
    if step <= 0:
        raise PtoArgumentError(f"scf.for {loop.var}: step must be positive, got {step}")
    return max(0, -(-(hi - lo) // step))


def _events(body, tgt, l2_hit, consts, values, totals):
    """The body as a tree of ('i', pipe, cycles, kind) and ('loop', trip, events); ``totals``
    accumulates GM bytes and flops (multiplied by the enclosing trip counts)."""
    out = []
    for stmt in body:
        if isinstance(stmt, asm.Const):
            consts[stmt.name] = stmt.value
        elif isinstance(stmt, asm.For):
            trip = _trip(stmt, consts, values)
            inner = {"in": 0, "out": 0, "flops": 0.0}
            events = _events(stmt.body, tgt, l2_hit, consts, values, inner)
            for key in totals:
                totals[key] += trip * inner[key]
            out.append(("loop", trip, events))
        elif isinstance(stmt, asm.Instr):
            pipe, cycles, b_in, b_out, flops = _price(stmt, tgt, l2_hit)
            totals["in"] += b_in
            totals["out"] += b_out
            totals["flops"] += flops
            kind = "load" if b_in else "store" if b_out else None
            out.append(("i", pipe, float(cycles), kind))
    return out


def _busy(events, busy, mult=1):
    for e in events:
        if e[0] == "loop":
            _busy(e[2], busy, mult * e[1])
        else:
            busy[e[1]] = busy.get(e[1], 0.0) + mult * e[2]


def _total(events):
    busy = {}
    _busy(events, busy)
    return sum(busy.values())


def _exposed(events, pipe):
    """(found, cycles before the first instruction on ``pipe``) in execution order."""
    cycles = 0.0
    for e in events:
        if e[0] == "loop":
            if e[1] == 0:
                continue
            found, part = _exposed(e[2], pipe)
            if found:
                return True, cycles + part
            cycles += e[1] * part
        elif e[1] == pipe:
            return True, cycles
        else:
            cycles += e[2]
    return False, cycles


def _reverse(events):
    return [("loop", e[1], _reverse(e[2])) if e[0] == "loop" else e for e in reversed(events)]


def _has(events, kind):
    return any(_has(e[2], kind) if e[0] == "loop" else e[3] == kind for e in events
               if e[0] != "loop" or e[1] > 0)


def kernel_time(kernel, target, *, l2_hit: float = 1.0, values=None) -> BlockCost:
    """Predicted time of one block (one grid point) of ``kernel`` on one core of ``target``:
    ``kernel`` is codegen's :class:`asm.Kernel` or a function of the real module
    (:class:`~ptojax.ascend.engine.Function`, priced by :func:`function_time`).

    ``values`` gives loop bounds that are not constants (runtime sizes) by name. See the module
    docstring for the model.
    """
    if not isinstance(kernel, asm.Kernel):
        return function_time(kernel, target, l2_hit=l2_hit, values=values)
    tgt = _target(target)
    totals = {"in": 0, "out": 0, "flops": 0.0}
    events = _events(kernel.body, tgt, l2_hit, {}, dict(values or {}), totals)
    return _block(events, totals, tgt, "codegen")


def _block(events, totals, tgt: Target, priced: str) -> BlockCost:
    busy = {}
    _busy(events, busy)
    pipes = {p: busy.get(p, 0.0) for p in PIPES if p in busy}
    if not pipes or max(pipes.values()) == 0.0:
        return BlockCost(0.0, 0.0, pipes, totals["in"], totals["out"], totals["flops"], priced=priced)
    bottleneck = max(pipes, key=lambda p: (pipes[p], -PIPES.index(p)))
    _, prologue = _exposed(events, bottleneck)
    _, epilogue = _exposed(_reverse(events), bottleneck)
    fill = prologue + epilogue
    if _has(events, "load"):
        fill += tgt.gm_read_latency
    if _has(events, "store"):
        fill += tgt.gm_write_latency
    cycles = pipes[bottleneck] + fill
    return BlockCost(cycles, cycles / tgt.clock_hz, pipes, int(totals["in"]), int(totals["out"]),
                     float(totals["flops"]), bottleneck, fill, priced)


# ------------------------------------------------------------------------- the real module's text
_STRUCT_BYTES = 8                                     # (value, u32 index), as tsort32 writes them
# Real mnemonics spelled differently from codegen's.
_REAL_NAMES = {"tmatmul.acc": "tmatmul_acc", "tmatmul.bias": "tmatmul_bias"}
# Element types of the real text that asm.DTYPES lacks: priced as the same-width type.
_SAME_WIDTH = {"ui8": "i8", "ui16": "i16", "ui32": "i32", "ui64": "i32", "i64": "i32"}
_FOLD = {"addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
         "divsi": lambda a, b: int(a / b) if b else None, "remsi": lambda a, b: a - b * int(a / b) if b else None,
         "minsi": min, "maxsi": max}


def _real_type(t):
    """An engine type as the asm type the rules read (``?`` valid dims: the tile's full dim)."""
    from .engine_parse import TileType, ViewType
    if isinstance(t, TileType):
        dtype = _SAME_WIDTH.get(t.dtype, t.dtype)
        return asm.TileBuf(t.loc, dtype, t.rows, t.cols, t.rows if t.v_row is None else t.v_row,
                           t.cols if t.v_col is None else t.v_col, t.blayout, t.slayout, t.fractal, t.pad)
    if isinstance(t, ViewType):
        return asm.ViewType(tuple(t.shape), _SAME_WIDTH.get(t.dtype, t.dtype), t.partition)
    return t


def real_instr(stmt) -> asm.Instr:
    """An engine :class:`~ptojax.ascend.engine.Instr` of the real text as the :class:`asm.Instr` the
    pricing rules read (same operands, types and attributes; ``tmatmul.acc`` -> ``tmatmul_acc``)."""
    ins = tuple(asm.Operand(n, _real_type(t)) for n, t in zip(stmt.ins, stmt.in_types))
    outs = tuple(asm.Operand(n, _real_type(t)) for n, t in zip(stmt.outs, stmt.out_types))
    return asm.Instr(_REAL_NAMES.get(stmt.op, stmt.op), ins, outs, tuple(stmt.attrs))


def _sort_stage(instr, tgt: Target):
    """One ``tsort32`` (its values' rows) or ``tmrgsort`` (the structs of its lists: the one source
    tile of the single-list form, the 2-4 lists of the list form, its last tile the tmp) at the sort
    unit's rates (``Target.sort32_cycles``, ``Target.merge_cycles``)."""
    ins = _tiles(instr.ins)
    if not ins:
        raise _fail(instr, "expects a tile operand")
    if instr.op == "tsort32":
        src = ins[0]
        return "VECTOR", _sort32_cycles(src.v_row, src.v_col, tgt), float(src.v_row * src.v_col)
    lists = ins[:-1] if len(ins) > 2 else ins[:1]
    structs = sum(_valid_bytes(t) for t in lists) / _STRUCT_BYTES
    return "VECTOR", _merge_cycles(structs, tgt), float(structs)


def price_real(stmt, target, *, l2_hit: float = 1.0):
    """(pipe, cycles, GM bytes in, GM bytes out, flops) of one real instruction (an engine ``Instr``)."""
    tgt = _target(target)
    if stmt.op in ("tgetval", "tsetval"):
        return "SCALAR", tgt.scalar_ub_cycles, 0, 0, 0.0
    instr = real_instr(stmt)
    if instr.op in ("tsort32", "tmrgsort"):
        pipe, cycles, flops = _sort_stage(instr, tgt)
        return pipe, cycles, 0, 0, flops
    return _price(instr, tgt, l2_hit)


@functools.lru_cache(maxsize=1 << 16)
def _price_real_once(stmt, tgt: Target, l2_hit: float):
    """:func:`price_real`, once per distinct instruction: a task function's points, and the tasks and
    counts ``tiles_per_block="auto"`` tries, price the same instructions over and over."""
    return price_real(stmt, tgt, l2_hit=l2_hit)


class _RealWalk:
    """The real text's statements as :func:`_events`' tree, folding index arithmetic on constants."""

    def __init__(self, tgt: Target, l2_hit, values, block=None):
        self.tgt, self.l2_hit, self.values, self.known = tgt, l2_hit, dict(values or {}), {}
        self.block = block                                 # pto.get_block_idx's value, where it is known
        self.valid = {}                                    # tile -> its (valid_row, valid_col) operands

    def value(self, name):
        if isinstance(name, (int, bool)):
            return name
        if name in self.values:
            return self.values[name]
        return self.known.get(name)

    def trip(self, loop):
        lo, hi, step = (self.value(v) for v in (loop.lo, loop.hi, loop.step))
        for name, v in zip((loop.lo, loop.hi, loop.step), (lo, hi, step)):
            if v is None:
                raise PtoUnsupportedError(f"scf.for {loop.var}: bound {name} is not a constant; "
                                          f"give its value in kernel_time(..., values={{{name!r}: n}})")
        if step <= 0:
            raise PtoArgumentError(f"scf.for {loop.var}: step must be positive, got {step}")
        return max(0, -(-(hi - lo) // step))

    def arith(self, s):
        vals = [self.value(o) for o in s.operands]
        if s.op == "get_block_idx" and self.block is not None:
            self.known[s.result] = self.block
        elif s.op == "get_block_idx" or any(v is None for v in vals):
            self.known.pop(s.result, None)                 # a loop or block dependent value
        elif s.op == "index_cast":
            self.known[s.result] = vals[0]
        elif s.op == "cmpi":
            a, b = vals
            self.known[s.result] = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                                    "ge": a >= b}[s.pred.lstrip("su")]
        else:
            self.known[s.result] = _FOLD[s.op](*vals)

    def sized(self, names, types) -> tuple:
        """``types`` with each ``?`` valid dim of a tile allocated with a known valid operand at its value."""
        out = []
        for name, t in zip(names, types):
            valid = [self.value(v) if v is not None else None for v in self.valid.get(name, ())]
            if valid:
                t = dataclasses.replace(t, v_row=valid[0] if t.v_row is None and valid[0] is not None else t.v_row,
                                        v_col=valid[1] if t.v_col is None and valid[1] is not None else t.v_col)
            out.append(t)
        return tuple(out)

    def events(self, body, totals):
        from . import engine_parse as E
        out = []
        for s in body:
            if isinstance(s, E.Const):
                if isinstance(s.value, (int, float, bool)):
                    self.known[s.result] = s.value
            elif isinstance(s, E.Arith):
                self.arith(s)
            elif isinstance(s, E.For):
                trip = self.trip(s)
                self.known.pop(s.var, None)
                inner = {"in": 0, "out": 0, "flops": 0.0}
                events = self.events(s.body, inner)
                for key in totals:
                    totals[key] += trip * inner[key]
                out.append(("loop", trip, events))
            elif isinstance(s, E.If):
                cond = self.value(s.cond)
                branches = [(s.then if cond else s.orelse)] if cond is not None else [s.then, s.orelse]
                priced = []
                for block in branches:
                    inner = {"in": 0, "out": 0, "flops": 0.0}
                    priced.append((inner, self.events(block, inner)))
                inner, events = max(priced, key=lambda p: _total(p[1]))      # then, unless else costs more
                for key in totals:
                    totals[key] += inner[key]
                out.append(("loop", 1, events))
            elif isinstance(s, E.Scalar):
                cycles = self.tgt.scalar_gm_cycles if s.op == "load_scalar" else self.tgt.scalar_ub_cycles
                out.append(("i", "SCALAR", float(cycles), None))
            elif isinstance(s, (E.Subset,)) or isinstance(s, E.Tile) and s.src is not None:
                out.append(("i", "SCALAR", 1.0, None))                        # an alias: treshape, subset
            elif isinstance(s, E.Tile) and s.valid:
                self.valid[s.result] = s.valid
            elif isinstance(s, E.Instr):
                if self.valid:
                    s = dataclasses.replace(s, in_types=self.sized(s.ins, s.in_types),
                                            out_types=self.sized(s.outs, s.out_types))
                pipe, cycles, b_in, b_out, flops = _price_real_once(s, self.tgt, self.l2_hit)
                totals["in"] += b_in
                totals["out"] += b_out
                totals["flops"] += flops
                out.append(("i", pipe, float(cycles), "load" if b_in else "store" if b_out else None))
        return out


def function_time(function, target, *, l2_hit: float = 1.0, values=None) -> BlockCost:
    """Predicted time of one block of a function of the REAL module (``engine.parse(text)``'s
    :class:`~ptojax.ascend.engine.Function`: what ``ptoas`` assembles) on one core of ``target``:
    the same per-pipe model as :func:`kernel_time`, its instructions priced by :func:`price_real`
    (see the module docstring, "Real instructions")."""
    tgt = _target(target)
    totals = {"in": 0, "out": 0, "flops": 0.0}
    events = _RealWalk(tgt, l2_hit, values).events(function.body, totals)
    return _block(events, totals, tgt, "pto")


def task_time(function, target, *, block: int, l2_hit: float = 1.0, values=None) -> BlockCost:
    """Predicted time of task ``block`` of a task function of the real module (selection's task form,
    :mod:`~ptojax.ascend.isel.task`: one top-level ``scf.for`` over the task's grid points, resident
    loads hoisted before it or under an ``scf.if`` that skips them while their window stays): the task
    is one block whose body is its grid points one after another (the statements before the loop
    first), priced as :func:`function_time` prices a block. Double buffering carries on from one point
    to the next, so the points' pipes add up and the fill (GM latencies, prologue, epilogue) is paid
    once per task; each point still pays its instructions' issue costs. A load the point skips is not
    charged, so reuse shows as less MTE2 time and fewer GM bytes."""
    from . import engine_parse as E

    tgt = _target(target)
    pos = next((i for i, s in enumerate(function.body) if isinstance(s, E.For)), None)
    if pos is None:
        raise PtoUnsupportedError(f"task_time: function @{function.name} has no task loop (scf.for at its top level)")
    loop, walk = function.body[pos], _RealWalk(tgt, l2_hit, values, block)
    totals = {"in": 0, "out": 0, "flops": 0.0}
    events = walk.events(function.body[:pos], totals)
    for i in range(walk.trip(loop)):
        walk.known[loop.var] = walk.value(loop.lo) + i * walk.value(loop.step)
        events += walk.events(loop.body, totals)
    return _block(events, totals, tgt, "pto")


def load_l2_hit(kernel: asm.Kernel, default: float = 1.0) -> float:
    """The byte-weighted ``l2_hit`` of codegen's GM reads in ``kernel`` (loads without the attribute
    count as ``default``): the fraction :meth:`AscendKernel.costs` prices the real text's loads with."""
    num = den = 0.0

    def walk(body):
        nonlocal num, den
        for s in body:
            if isinstance(s, asm.For):
                walk(s.body)
            elif isinstance(s, asm.Instr) and s.op in ("tload", "mgather"):
                dst = _tiles(s.outs)
                nbytes = _valid_bytes(dst[0]) if dst else 0
                num += nbytes * _l2_hit(s, default)
                den += nbytes
    walk(kernel.body)
    return num / den if den else default
