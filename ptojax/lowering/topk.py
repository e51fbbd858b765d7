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
"""
from __future__ import annotations

import numpy as np

from ..errors import PtoArgumentError
from ..primitives import elementwise as E
from ..primitives import indexing as I
from ..primitives import layout as L

MERGE_WAYS = 4          # TMRGSORT merges up to four sorted lists


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
        raise PtoArgumentError(f"{where}: k={k} does not fit a tile row (at most {max_cols} columns); the staged "
                               f"top-k of a {n}-column row keeps k entries per list")
    if n <= chunk:
        return I.topk(x, k, largest=largest)
    kk = min(k, chunk)
    runs = -(-n // chunk)
    lists = merge_lists(runs)
    if n % chunk:
        v, i = _ragged_lists(x, lead, n, chunk, kk, largest, lists)
    else:
        v, i = I.topk(L.reshape(x, lead + (runs, chunk)), kk, largest=largest)
        i = E.add(i, np.arange(runs, dtype=np.int32).reshape(runs, 1) * np.int32(chunk))   # kk <= chunk: no -1 here
        if lists != runs:                        # lists that sort last fill the first round's groups
            pads = [(0, 0)] * len(lead) + [(0, lists - runs), (0, 0)]
            v, i = L.pad(v, pads, pad_value(v.dtype, largest)), L.pad(i, pads, -1)
    while lists > 1:
        ways = MERGE_WAYS if lists % MERGE_WAYS == 0 else lists       # the last round: 2 or 3 lists
        shape = lead + (lists // ways, ways, v.shape[-1])
        v, i = I.merge_topk(L.reshape(v, shape), L.reshape(i, shape), k, largest=largest)
        lists //= ways
    return L.reshape(v, lead + (k,)), L.reshape(i, lead + (k,))


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
