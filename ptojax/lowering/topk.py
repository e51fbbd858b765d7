"""Top-k over rows wider than a tile, in stages (as AscendC's sort32 + mrgsort pipeline does it).

A row of ``n`` columns is cut into chunks of ``chunk`` columns; each chunk's top ``min(k, chunk)``
(value, index) pairs are selected (``topk``), their indices offset to the row, and the resulting
lists are merged four at a time (``merge_topk``, PTO's TMRGSORT) until one list of ``k`` is left.

No stage makes a pass over GM of its own: where ``chunk`` divides ``n`` the chunks are a reshape of
the row; where it does not, each chunk is a window of the row (``view``) that its top-k reads in
place, the last one short (its tile sorts its ``n % chunk`` columns, ``-1`` / the pad value past
them when ``k`` exceeds them), each top-k storing its list into one tensor of lists. The first round
of lists is padded (in the tile that stores them) to ``m * 4**j`` lists (``m`` in 1..3, ``j >= 1``)
with lists that sort last (the pad value, index ``-1``), so that later rounds merge whole groups of
four and the last round ``m`` lists: no round pads a merge's results through GM. Ties keep the lower
index and padding sorts after every real entry: the result equals the one-stage ``topk`` of the row.

A merge holds its lists in sort rows of ``2**ceil(log2(k))`` (value, index) structs, which fit the UB up
to ``k`` = :func:`pass_k` (2 048; 512 for int32, sorted by its 16-bit halves with more buffers). A
larger ``k`` (up to a tile row's columns) is selected in passes of at most that many
(:func:`topk_in_passes`, which the tile pass rewrites such a ``topk`` into): each pass a staged top-k of
the row with the entries the passes before took removed (the row compacted), the passes joined.

A ``sort`` is a top-k with k = n, but an int32 one past 2 048 columns does not stage so (its merges would
hold the whole row): it runs as two whole-row float32 sorts of its 16-bit halves with gathers between
them (:func:`sort_int32_by_halves`, which the tile pass rewrites such a sort into).
"""
from __future__ import annotations

import numpy as np

from ..errors import PtoArgumentError, PtoCapacityError
from ..primitives import elementwise as E
from ..primitives import cast as C
from ..primitives import indexing as I
from ..primitives import layout as L
from ..primitives import reduce as R

MERGE_WAYS = 4          # TMRGSORT merges up to four sorted lists
PASS_K = 2048           # the most entries one pass's merges keep per list (four lists of them fit the UB)
PASS_K_INT32 = 512      # int32 sorts by its 16-bit halves, with more buffers


def pass_k(dtype) -> int:
    """The most entries one pass of a staged top-k selects per row: its merges of four lists of that many
    fit the UB (:data:`PASS_K`; :data:`PASS_K_INT32` for int32)."""
    return PASS_K_INT32 if np.dtype(dtype) == np.int32 else PASS_K


def pad_value(dtype, largest):
    """What sorts last: -inf / +inf for floats, the integer limits otherwise."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return -np.inf if largest else np.inf
    info = np.iinfo(dtype)
    return int(info.min if largest else info.max)


def merge_lists(runs: int) -> int:
    """The lists the first merge round takes for ``runs`` chunk lists: the fewest ``m * 4**j >= runs``
    (``m`` in 1..3, ``j >= 1``) — ``j`` rounds of four-list merges, then one of ``m`` lists."""
    j = 1
    while True:
        for m in range(1, MERGE_WAYS):
            if m * MERGE_WAYS ** j >= runs:
                return m * MERGE_WAYS ** j
        j += 1


def staged_topk(x, *, k: int, largest: bool, chunk: int, max_cols: int, where: str = "pto.topk"):
    """``topk`` of ``x`` along its last axis as chunked top-k + merges (pto ops on tensors)."""
    *lead, n = x.shape
    lead = tuple(lead)
    if k > max_cols:
        raise PtoArgumentError(
            f"{where}: k={k} does not fit a tile row (at most {max_cols} columns): a top-k keeps each row's k entries "
            f"in one tile row, however long the row (here {n} columns) — take at most {max_cols} "
            f"(lax.top_k(x, {min(max_cols, n)})), or sort the whole row outside the kernel (jnp.sort or "
            "lax.top_k in the JAX code that calls it)")
    if n <= chunk:
        return I.topk(x, k, largest=largest)
    if k > pass_k(x.dtype):
        raise PtoCapacityError(f"{where}: k={k} of a {n}-column row: the staged top-k's merges of lists of k fit "
                               f"the UB up to k={pass_k(x.dtype)} ({np.dtype(x.dtype).name}); select a larger k "
                               "with topk_in_passes")
    kk = min(k, chunk)
    runs = -(-n // chunk)
    lists = merge_lists(runs)
    if n % chunk:
        v, i = _ragged_lists(x, lead, n, chunk, kk, largest, lists)
    else:
        v, i = I.topk(L.reshape(x, lead + (runs, chunk)), kk, largest=largest)
        i = E.add(i, np.arange(runs, dtype=np.int32).reshape(runs, 1) * np.int32(chunk))   # kk <= chunk: no -1 here
        if lists != runs:                        # lists that sort last fill the first round's groups
            v, i = _pad_lists(v, i, lead, lists - runs, largest)
    return _merged(v, i, lead, lists, k, largest)


def _pad_lists(v, i, lead, count, largest):
    """``count`` more lists after ``v`` / ``i`` (``[*lead, lists, length]``), of entries that sort last."""
    pads = [(0, 0)] * len(lead) + [(0, count), (0, 0)]
    return L.pad(v, pads, pad_value(v.dtype, largest)), L.pad(i, pads, -1)


def _merged(v, i, lead, lists, k, largest):
    """The ``[*lead, k]`` best of ``lists`` (``m * 4**j``) lists ``v`` / ``i``: rounds of four-list
    merges, the last one of ``m``."""
    while lists > 1:
        ways = MERGE_WAYS if lists % MERGE_WAYS == 0 else lists       # the last round: 2 or 3 lists
        shape = lead + (lists // ways, ways, v.shape[-1])
        v, i = I.merge_topk(L.reshape(v, shape), L.reshape(i, shape), k, largest=largest)
        lists //= ways
    return L.reshape(v, lead + (k,)), L.reshape(i, lead + (k,))


def topk_in_passes(x, *, k: int, largest: bool, most: int):
    """``topk`` of ``x`` along its last axis for a ``k`` past :func:`pass_k` (``most``), as Tensor-level ops
    whose top-k's of at most ``most`` stage as above: passes of at most ``most`` entries, each pass's a
    top-k of the row with the entries the passes before took removed. Removed, not replaced: a taken
    entry replaced in place by what sorts last would still tie with a real one of that value (``-inf``)
    at a later 32-entry sort block, and merges keep ties in row order. So each pass compacts the row it
    selected from, stably: the kept entries moved left over the taken ones (their new place ``p`` less
    the taken entries before ``p``, a cumulative sum of the taken mask; one scatter of the values, one of
    their original indices), the vacated tail filled with the pad value and index ``-1``. A top-k's ties
    then keep the lower original index, and the tail sorts after every kept entry, so each pass's entries
    rank below every earlier pass's and above the rest: the passes joined are the top ``k``."""
    *lead, n = x.shape
    lead = tuple(lead)
    if k > n:                                       # past the row: the tail sorts last (-1, the pad value)
        v, i = topk_in_passes(x, k=n, largest=largest, most=most)
        pads = [(0, 0)] * len(lead) + [(0, k - n)]
        return L.pad(v, pads, pad_value(x.dtype, largest)), L.pad(i, pads, -1)
    rows = int(np.prod(lead, dtype=np.int64))
    flat_shape = (rows * n,)
    base = E.mul(L.reshape(I.iota(rows), lead + (1,)), np.int32(n))      # each row's first entry (made on the
                                                                          # cores: any row count, one program)
    pad = pad_value(x.dtype, largest)
    at = L.expand(I.iota(n), lead + (n,))          # each entry's index in x
    row, orig = x, None                             # the row a pass selects from; its entries' indices in x
    values, indices, taken = [], [], 0
    while taken < k:
        kp = min(most, k - taken)
        v, i = I.topk(row, kp, largest=largest)
        values.append(v)
        indices.append(i if orig is None else _take(orig, i, base, flat_shape))
        taken += kp
        if taken == k:
            break
        places = L.reshape(E.add(i, base), (rows * kp,))
        mask = I.scatter_update(L.expand(np.zeros((), np.float32), flat_shape), places,
                                L.expand(np.ones((), np.float32), (rows * kp,)), 0, unique_indices=True)
        gone = R.cumsum(L.reshape(mask, lead + (n,)), -1)          # taken entries up to each place (exact)
        dest = E.sub(at, C.cast(gone, np.int32))
        dest = L.reshape(E.where(E.gt(L.reshape(mask, lead + (n,)), np.float32(0)), np.int32(-1), E.add(dest, base)),
                         flat_shape)
        orig = at if orig is None else orig
        row = L.reshape(I.scatter_update(L.expand(np.asarray(pad, x.dtype), flat_shape), dest,
                                         L.reshape(row, flat_shape), 0, unique_indices=True), lead + (n,))
        orig = L.reshape(I.scatter_update(L.expand(np.int32(-1), flat_shape), dest, L.reshape(orig, flat_shape), 0,
                                          unique_indices=True), lead + (n,))
    if len(values) == 1:
        return values[0], indices[0]
    return L.concat(values, axis=len(lead)), L.concat(indices, axis=len(lead))


def topk_by_sort(x, *, k: int, largest: bool):
    """``topk`` of ``x`` along its last axis (at most :data:`SORT_COLS` columns) for a ``k`` past
    :func:`pass_k`: the row's stable sort (ties keep the lower index, as a top-k's), its first ``k``
    entries; past the row, the pad value and index ``-1``. One sort of the row, where passes would take
    ``k / pass_k`` staged top-k's of it and their compactions."""
    *lead, n = x.shape
    lead = tuple(lead)
    v, i = I.sort(x, -1, descending=largest)
    if k <= n:
        return L.view(v, lead + (k,), (0,) * x.ndim), L.view(i, lead + (k,), (0,) * x.ndim)
    pads = [(0, 0)] * len(lead) + [(0, k - n)]
    return L.pad(v, pads, pad_value(x.dtype, largest)), L.pad(i, pads, -1)


def _take(orig, i, base, flat_shape):
    """``orig`` at the places ``i`` of each row (``take_along_axis``, one gather of the rows flattened)."""
    got = I.gather(L.reshape(orig, flat_shape), L.reshape(E.add(i, base), (int(np.prod(i.shape)),)), 0)
    return L.reshape(got, tuple(i.shape))


def _ragged_lists(x, lead, n, chunk, kk, largest, lists):
    """The first round's ``[*lead, lists, kk]`` chunk lists of rows whose last chunk is short: each
    chunk a window of ``x`` that its top-k reads in place (no padded copy of ``x``), the lists stored
    side by side into one tensor whose other lists (``lists`` past the chunks) sort last."""
    zero = (0,) * len(lead)

    def chunk_list(j):
        width = min(chunk, n - j * chunk)
        return width, I.topk(L.view(x, lead + (width,), zero + (j * chunk,)), kk, largest=largest)

    _, (v, i) = chunk_list(0)
    pads = [(0, 0)] * len(lead) + [(0, (lists - 1) * kk)]       # the tensor of lists, filled with what
    v, i = L.pad(v, pads, pad_value(x.dtype, largest)), L.pad(i, pads, -1)      # sorts last
    for j in range(1, -(-n // chunk)):
        width, (vj, ij) = chunk_list(j)
        off = np.int32(j * chunk)
        # a short chunk's -1 (k past its columns) stays -1: padding sorts after every real index
        ij = E.add(ij, off) if kk <= width else E.where(E.lt(ij, np.int32(0)), np.int32(-1), E.add(ij, off))
        v, i = L.assemble(vj, zero + (j * kk,), v), L.assemble(ij, zero + (j * kk,), i)
    return L.reshape(v, lead + (lists, kk)), L.reshape(i, lead + (lists, kk))


SORT_COLS = 8192        # the longest row one tile sorts: a float32 row's (value, index) structs, double-buffered
                        # (2 x 8 192 x 8 bytes), with its work and index rows, take most of the UB
STAGED_INT32_SORT = 2048      # int32 rows longer than this sort by halves in stages (sort_int32_by_halves)
_POSITION_BITS = (SORT_COLS - 1).bit_length()      # 13: a position in a row of at most SORT_COLS


def sort_int32_by_halves(x, *, largest: bool):
    """``sort`` of int32 ``x`` along its last axis (``n`` past :data:`STAGED_INT32_SORT` columns, at most
    :data:`SORT_COLS`) as Tensor-level ops: the radix sort by 16-bit halves that one tile runs for a shorter
    row (``ascend/isel/sort.py``), its passes whole-row float32 sorts (``tsort32`` sorts floats; float32
    holds a half exactly) with the gathers between them through GM. A tile sorts a float32 row of up to
    :data:`SORT_COLS`, but an int32 row's one-tile sort keeps its halves, keys and orders beside the
    float32 sort's buffers, which overfill the UB past about 2 800 columns.

    The low halves (``x & 0xffff``, 0..65535) sort first; the high halves (``x >> 16``, signed) in that
    order sort second. Both sorts are stable (ties keep the lower index, in either direction), so the
    order is by value, ties by the lower index: ``jnp.sort``'s (``argsort``'s, stable). The second sort's
    positions pick, in one gather, the first sort's order and low halves packed into one int32 (the
    position in 13 bits, ``n <= 8 192``, the low half above it); the sorted high halves give the rest of
    the values."""
    *lead, n = x.shape
    lead = tuple(lead)
    rows = int(np.prod(lead, dtype=np.int64))
    flat_shape = (rows * n,)
    base = E.mul(L.reshape(I.iota(rows), lead + (1,)), np.int32(n))      # each row's first entry
    hi = E.shift_right(x, np.int32(16))
    lo_sorted, first = I.sort(C.cast(E.bitwise_and(x, np.int32(0xFFFF)), np.float32), -1, descending=largest)
    hi_first = _take(C.cast(hi, np.float32), first, base, flat_shape)     # the high halves in that order
    hi_sorted, second = I.sort(hi_first, -1, descending=largest)
    bits = _POSITION_BITS
    packed = E.bitwise_or(E.shift_left(C.cast(lo_sorted, np.int32), np.int32(bits)), first)
    picked = _take(packed, second, base, flat_shape)
    order = E.bitwise_and(picked, np.int32((1 << bits) - 1))
    values = E.bitwise_or(E.shift_left(C.cast(hi_sorted, np.int32), np.int32(16)),
                          E.shift_right(picked, np.int32(bits)))
    return values, order
