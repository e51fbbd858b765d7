"""Top-k over rows wider than a tile, in stages (as AscendC's sort32 + mrgsort pipeline does it).

A row of ``n`` columns is cut into chunks of ``chunk`` columns; each chunk's top ``min(k, chunk)``
(value, index) pairs are selected (``topk``), their indices offset to the row, and the resulting
lists are merged four at a time (``merge_topk``, PTO's TMRGSORT) until one list of ``k`` is left.
Ties keep the lower index, so the last chunk's padding (positions past ``n``, sorting last) is only
picked when ``k > n``, and then becomes -1: the result equals the one-stage ``topk`` of the row.
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


def staged_topk(x, *, k: int, largest: bool, chunk: int, max_cols: int, where: str = "pto.topk"):
    """``topk`` of ``x`` along its last axis as chunked top-k + merges (pto ops on tensors)."""
    *lead, n = x.shape
    lead = tuple(lead)
    if k > max_cols:
        raise PtoArgumentError(f"{where}: k={k} does not fit a tile row (at most {max_cols} columns); the staged "
                               f"top-k of a {n}-column row keeps k entries per list")
    kk = min(k, chunk)
    runs = -(-n // chunk)
    if runs * chunk != n:
        x = L.pad(x, [(0, 0)] * len(lead) + [(0, runs * chunk - n)], pad_value(x.dtype, largest))
    v, i = I.topk(L.reshape(x, lead + (runs, chunk)), kk, largest=largest)
    i = E.add(i, np.arange(runs, dtype=np.int32).reshape(runs, 1) * np.int32(chunk))   # kk <= chunk: no -1 here
    while runs > 1:
        groups = -(-runs // MERGE_WAYS)
        if groups * MERGE_WAYS != runs:          # lists that sort last fill the last group
            pads = [(0, 0)] * len(lead) + [(0, groups * MERGE_WAYS - runs), (0, 0)]
            v, i = L.pad(v, pads, pad_value(v.dtype, largest)), L.pad(i, pads, -1)
        shape = lead + (groups, MERGE_WAYS, v.shape[-1])
        v, i = I.merge_topk(L.reshape(v, shape), L.reshape(i, shape), k, largest=largest)
        runs = groups
    v, i = L.reshape(v, lead + (k,)), L.reshape(i, lead + (k,))
    if k > n:                                    # past the row: positions of the last chunk's padding
        i = E.where(E.lt(i, np.int32(n)), i, np.int32(-1))
    return v, i
