"""Static element indices of a flat array as slices: a window of a tensor, or of every grid point's
window at once, read and written with ``slice`` / ``reshape`` / ``transpose`` / ``dynamic_update_slice``
where the indices form an affine box (:class:`Strided`; a read's may repeat along axes, broadcast), with a gather or scatter otherwise — and the
stores of a batch of grid points applied in point order (:func:`apply_store`)."""
from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from .tile_semantics import SEMANTICS


@dataclasses.dataclass(frozen=True)
class Strided:
    """Static element indices ``idx`` as an affine box of a flat array: ``flat[base : base + prod(dims)]``
    reshaped to ``dims``, cut to ``box``, reshaped to ``split`` (the index's axes ordered outer to
    inner by stride: ``axes``), transposed back to the index's axis order, reshaped to ``shape``."""

    base: int
    dims: tuple
    box: tuple
    split: tuple
    axes: tuple
    shape: tuple          # the caller's index shape
    inner: tuple          # the shape analysed (the first axis possibly split)
    repeats: tuple = ()   # axes of ``inner`` along which the indices repeat (a read broadcast along them)

    @staticmethod
    def of(idx: np.ndarray, repeats: bool = False) -> "Strided | None":
        """The plan of ``idx``, or None where its elements are not such a box (or overlap); ``repeats``:
        axes along which the indices do not change are allowed (a read, broadcast along them)."""
        if idx.size == 0:
            return None
        base, shape = int(idx.flat[0]), idx.shape
        strides = {}
        for d, n in enumerate(shape):
            if n > 1:
                at = [0] * len(shape)
                at[d] = 1
                strides[d] = int(idx[tuple(at)]) - base
        expect = np.full((1,) * len(shape), base, np.int64)
        for d, s in strides.items():
            expect = expect + np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(len(shape))]) * s
        if any(s < 0 or (s == 0 and not repeats) for s in strides.values()) or not np.array_equal(
                idx, np.broadcast_to(expect, shape)):
            return None
        same = tuple(d for d, s in strides.items() if s == 0)
        groups = []                                     # [stride, size, axes outer->inner], inner first
        for d in sorted((d for d in strides if d not in same), key=lambda a: strides[a]):
            if groups and strides[d] == groups[-1][0] * groups[-1][1]:
                groups[-1][1] *= shape[d]
                groups[-1][2].insert(0, d)
            else:
                if groups and strides[d] < groups[-1][0] * groups[-1][1]:
                    return None                         # overlapping elements
                groups.append([strides[d], shape[d], [d]])
        groups.reverse()                                # outer first
        if not groups:
            return Strided(base, (1,), (1,), (), (), shape, shape, same)
        if any(a[0] % b[0] for a, b in zip(groups, groups[1:])):
            return None
        dims = (groups[0][1],) + tuple(a[0] // b[0] for a, b in zip(groups, groups[1:])) + (groups[-1][0],)
        box = tuple(g[1] for g in groups) + (1,)
        axes = tuple(d for g in groups for d in g[2])
        return Strided(base, dims, box, tuple(shape[d] for d in axes), axes, shape, shape, same)

    def _cut(self):
        return (Ellipsis,) + tuple(slice(0, b) for b in self.box)

    def _span(self, flat):
        lead, size = flat.shape[:-1], flat.shape[-1]
        need = self.base + int(np.prod(self.dims))
        if need > size:
            flat = lax.pad(flat, jnp.zeros((), flat.dtype), [(0, 0, 0)] * len(lead) + [(0, need - size, 0)])
        span = flat if self.base == 0 and need == flat.shape[-1] else lax.slice_in_dim(flat, self.base, need, axis=-1)
        return flat, span.reshape(lead + self.dims)

    def read(self, flat):
        """The elements from the last axis of ``flat`` (leading axes kept): ``lead + shape``."""
        lead = flat.shape[:-1]
        x = self._span(flat)[1]
        if x.shape[len(lead):] != self.box:
            x = x[self._cut()]
        x = x.reshape(lead + self.split)
        order = tuple(int(k) for k in np.argsort(self.axes))
        if order != tuple(range(len(order))):
            x = jnp.transpose(x, tuple(range(len(lead))) + tuple(len(lead) + k for k in order))
        if self.repeats:
            ones = tuple(1 if d in self.repeats else n for d, n in enumerate(self.inner))
            x = jnp.broadcast_to(x.reshape(lead + ones), lead + self.inner)
        return x.reshape(lead + self.shape)

    def write(self, flat, values):
        """``flat`` with the elements set to ``values`` (``lead + shape``)."""
        lead, size = flat.shape[:-1], flat.shape[-1]
        ascending = sorted(self.axes)
        v = values.reshape(lead + tuple(self.inner[d] for d in ascending))
        order = tuple(ascending.index(d) for d in self.axes)
        if order != tuple(range(len(order))):
            v = jnp.transpose(v, tuple(range(len(lead))) + tuple(len(lead) + k for k in order))
        padded, region = self._span(flat)
        v = v.reshape(lead + self.box).astype(flat.dtype)
        region = v if v.shape == region.shape else lax.dynamic_update_slice(region, v, (0,) * region.ndim)
        if region.size == padded.size:
            return region.reshape(flat.shape)
        out = lax.dynamic_update_slice_in_dim(padded, region.reshape(lead + (-1,)), self.base, axis=-1)
        return out[..., :size] if out.shape[-1] != size else out


@functools.lru_cache(maxsize=4096)
def _plan(key: bytes, shape: tuple, repeats: bool) -> Strided | None:
    """:meth:`Strided.of`, the first axis (grid points) split into up to three grid dims where that
    makes the indices affine (a 2-D grid of tiles is not affine in the point number)."""
    idx = np.frombuffer(key, np.int64).reshape(shape)
    plan = Strided.of(idx, repeats)
    if plan is not None or not shape:
        return plan
    for split in _splits(shape[0], 3):
        plan = Strided.of(idx.reshape(split + shape[1:]), repeats)
        if plan is not None:
            return dataclasses.replace(plan, shape=shape)
    return None


def _splits(n: int, depth: int):
    """``n`` as products of 2..``depth`` factors > 1 (outer first)."""
    for a in range(2, n):
        if n % a == 0:
            yield (a, n // a)
            if depth > 2:
                for rest in _splits(n // a, depth - 1):
                    yield (a,) + rest


def _box(idx: np.ndarray, repeats: bool = False) -> Strided | None:
    """The affine box of static indices ``idx`` (:func:`_plan`), or None; ``repeats``: of a read, whose
    indices may repeat along axes (grid points reading one tile)."""
    return _plan(np.ascontiguousarray(idx, np.int64).tobytes(), idx.shape, repeats)


def _distinct(flat_idx: np.ndarray) -> bool:
    """Whether no element index repeats (a sort: ``np.unique`` hashes, slower on millions)."""
    ordered = np.sort(flat_idx)
    return not np.any(ordered[1:] == ordered[:-1])


def gather(flat, idx: np.ndarray):
    """``flat[..., idx]`` for static ``idx``: slices where they are an affine box (broadcast along the
    axes they repeat along), else a gather."""
    plan = _box(idx, repeats=True)
    if plan is not None:
        return plan.read(flat)
    return jnp.take(flat, jnp.asarray(idx.astype(np.int32)), axis=-1)


def scatter(flat, idx: np.ndarray, values):
    """``flat`` with ``flat[..., idx] = values`` for static ``idx`` (distinct)."""
    plan = _box(idx)
    if plan is not None:
        return plan.write(flat, values)
    return flat.at[..., jnp.asarray(idx.astype(np.int32))].set(values)


def plain_store(flat, idx, values):
    """``flat`` (1-D) with ``flat[idx] = values`` as an element scatter, for a store into a kernel input's
    own buffer that the same step reads: XLA:CPU (jaxlib 0.10) updates a reshaped parameter in place with
    a ``dynamic_update_slice`` fusion that reads the rows it has already written when the update is
    computed from that same parameter (``x.at[1:].set(x[:-1])``)."""
    return flat.at[idx.reshape(-1).astype(np.int32)].set(values.reshape(-1).astype(flat.dtype), mode="drop")


def apply_store(flat, idx, values, atomic: bool, plain: bool = False):
    """``flat`` after stores of ``values`` (n, ...) at element indices ``idx`` (NumPy (n, ...) or traced
    (n, size)), point after point: a later point's element wins; ``atomic`` adds as ``tadd`` does.
    ``plain``: an element scatter, never a ``dynamic_update_slice`` (see :func:`plain_store`)."""
    values = values.reshape(idx.shape)
    if not isinstance(idx, np.ndarray):                       # traced: one point (serial walks)
        idx, values = idx.reshape(-1), values.reshape(-1)
        if atomic:
            values = SEMANTICS["tadd"](jnp.take(flat, idx, mode="clip"), values)
        return flat.at[idx].set(values, mode="drop")
    flat_idx = idx.reshape(-1)
    if _box(idx) is not None or _distinct(flat_idx):          # a box's elements are distinct
        if atomic:
            values = SEMANTICS["tadd"](gather(flat, idx), values)
        return plain_store(flat, idx, values) if plain else scatter(flat, idx, values)
    vals = values.reshape(-1)
    if not atomic:                                            # the last point's value of each element
        _, last = np.unique(flat_idx[::-1], return_index=True)
        keep = np.sort(flat_idx.size - 1 - last)
        return flat.at[jnp.asarray(flat_idx[keep].astype(np.int32))].set(vals[jnp.asarray(keep)])
    seen: dict = {}
    rounds = np.array([seen.__setitem__(i, seen.get(i, -1) + 1) or seen[i] for i in flat_idx.tolist()])
    for k in range(int(rounds.max()) + 1):                    # each element's k-th add, in point order
        at = np.nonzero(rounds == k)[0]
        where = jnp.asarray(flat_idx[at].astype(np.int32))
        flat = flat.at[where].set(SEMANTICS["tadd"](flat[where], vals[jnp.asarray(at)]))
    return flat


__all__ = ["Strided", "apply_store", "gather", "plain_store", "scatter"]
