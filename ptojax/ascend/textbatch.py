"""Grid points of one function of the real PTO-AS text run together: :func:`run` is
:func:`~ptojax.ascend.engine.run` for many block indices, bit for bit, in as few walks of the text
as the points allow (the interpreter's batch, :class:`~ptojax.ascend.engine._Run`).

A walk of many points is the engine's point-after-point order exactly where the points do not see
each other's stores: so the points run together only when no GM array the function loads from can
share memory with one it stores into, and at most one ``atomic_add`` store outside loops adds per
array (it adds in point order). Control flow that differs between points (an ``scf.if`` on a
per-point condition, loop bounds, tile shapes or views per point) splits the batch: it restarts as
groups of points that agree — stores are idempotent there (nothing stored is read back), and the
arrays an atomic store adds into are restored first (a function with one runs point by point
instead, as do those whose points may see each other's stores).

A batch whose run depends on no value read from GM is recorded as it runs — a tape of steps over its
tile buffers — and the next run of the same blocks on arguments of the same shapes replays the tape
instead of interpreting the text.
"""
from __future__ import annotations

import collections
import functools
import threading
import types

import numpy as np

from . import engine
from .engine import _flat, _Run, _Split, _Stale
from .engine_parse import For, Function, If, Instr, PtrType, Scalar, View


# ------------------------------------------------------------------------------------- static facts
def _gm_use(func: Function) -> tuple[set, set, list]:
    """(pointer parameters loaded from, stored into, ``atomic_add`` stores as (parameter, in a loop))."""
    params = {name for name, t in func.params if isinstance(t, PtrType)}
    root = {p: p for p in params}
    loads, stores, atomic = set(), set(), []

    def walk(body, looped):
        for s in body:
            if isinstance(s, View) and s.src in root:
                root[s.result] = root[s.src]
            elif isinstance(s, Scalar) and s.op == "load_scalar" and s.src in root:
                loads.add(root[s.src])
            elif isinstance(s, Instr):
                loads.update(root[n] for n in s.ins if n in root)
                stores.update(root[n] for n in s.outs if n in root)
                if s.op == "tstore" and dict(s.attrs).get("atomicType") == "atomic_add":
                    atomic.extend((root[n], looped) for n in s.outs if n in root)
            elif isinstance(s, For):
                walk(s.body, True)
            elif isinstance(s, If):
                walk(s.then, looped)
                walk(s.orelse, looped)
    walk(func.body, False)
    return loads, stores, atomic


_FACTS: dict = {}   # id of a function -> (the function, its facts)


def _facts(func: Function):
    """(argument positions loaded from, stored into, added into atomically, whether the points of a
    batch may run together as far as atomic stores go), once per function."""
    found = _FACTS.get(id(func))
    if found is None or found[0] is not func:
        if len(_FACTS) > 1024:                     # it keeps the functions alive: bounded
            _FACTS.clear()
        found = _FACTS[id(func)] = (func, _find_facts(func))
    return found[1]


def _find_facts(func: Function):
    loads, stores, atomic = _gm_use(func)
    index = {name: i for i, (name, _) in enumerate(func.params)}
    per_array = [p for p, _ in atomic]
    together = not any(looped for _, looped in atomic) and len(per_array) == len(set(per_array))
    return ([index[p] for p in sorted(loads)], [index[p] for p in sorted(stores)],
            sorted({index[p] for p in per_array}), together)


def _independent(func: Function, args) -> tuple[bool, list]:
    """Whether the points of a batch cannot see each other's stores (see the module docstring), and
    the argument positions an atomic store adds into."""
    loads, stores, atomic, together = _facts(func)
    if not together:
        return False, atomic
    for i in loads:
        for j in stores:
            if i == j or np.may_share_memory(args[i], args[j]):
                return False, atomic
    return True, atomic


# ---------------------------------------------------------------------------------------- the batches
def _groups(key: np.ndarray) -> list[np.ndarray]:
    """Positions of the points with equal rows of ``key``, groups in order of their first point."""
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [np.flatnonzero(inverse == g) for g in np.argsort(first)]


_TAPES: collections.OrderedDict = collections.OrderedDict()   # recorded batches, the latest used last
_TAPES_LOCK = threading.Lock()                     # the threaded executor's cores record and reorder them
TAPES = 256                                        # the most kept
TAPE_BYTES = 256 << 20                             # the most bytes they keep (:func:`_kept_bytes`)


def _tape_key(func: Function, args, blocks: np.ndarray) -> tuple:
    """What a batch's run depends on besides the values in GM: the function, the block indices, the
    pointer arguments' shapes and dtypes and the scalar arguments' values."""
    return (id(func), blocks.tobytes(), len(args), tuple(
        (a.shape, a.dtype.str) if isinstance(t, PtrType) and isinstance(a, np.ndarray)
        else (np.asarray(a).dtype.str, np.asarray(a).tobytes()) for (_, t), a in zip(func.params, args)))


def _together(func: Function, args, blocks: np.ndarray, guarded: bool) -> None:
    """Run ``blocks`` as one batch, restarting as groups where they split.

    A batch whose run depends on no value read from data (no ``tgetval`` or ``load_scalar``, no
    vector results) is recorded as it runs: a tape of its loads, instructions and stores over the
    same tile buffers, replayed on the next run of the same blocks and argument shapes without
    interpreting the text again. Where running again is harmless (``guarded``: nothing the function
    stores is read back, no atomic store), the values read from data are guards on the tape: a
    replay that reads other values stops and the batch runs from the text again."""
    key = _tape_key(func, args, blocks)
    found = _TAPES.get(key)
    if found is not None and found[0] is func and found[1] is None:     # it split: straight to the groups
        for group in found[2]:
            _together(func, args, blocks[group], guarded)
        return
    if found is not None and found[0] is func and found[2].acquire(blocking=False):
        try:
            with _TAPES_LOCK:
                if key in _TAPES:
                    _TAPES.move_to_end(key)
            flats = [_flat(t, a) for (_, t), a in zip(func.params, args) if isinstance(t, PtrType)]
            for step in found[1]:
                step(flats)
            return
        except _Stale:
            with _TAPES_LOCK:
                _TAPES.pop(key, None)
        finally:
            found[2].release()
    batch = _Run(func, args, blocks, [], guarded)
    try:
        batch.block(func.body)
    except _Split as split:
        groups = _groups(split.key)
        if batch.tape is not None and not batch.read_data:     # the split depends on nothing read from data
            _keep(key, (func, None, groups, sum(g.nbytes for g in groups)))
        for group in groups:
            _together(func, args, blocks[group], guarded)
        return
    if batch.tape is not None:
        _keep(key, (func, batch.tape, threading.Lock(), _kept_bytes(batch.tape)))


def _kept_bytes(tape: list) -> int:
    """The bytes of the arrays ``tape`` keeps alive, each counted once by the array that owns the
    memory (a view counts its base): its tile buffers, and as much again for f32 tiles in the int64
    per-point indices of its GM loads and stores (``engine._Gm.loader``/``storer``), the points'
    tile offsets and constant operands. Followed from the steps: the engine's closures, partials,
    bound methods, containers and the engine's own objects (tiles, GM views); not the instruction
    plans and semantics they call, which every tape shares."""
    seen, owners, total = set(), set(), 0
    todo = list(tape)
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            while isinstance(obj.base, np.ndarray):
                obj = obj.base
            if id(obj) not in owners:
                owners.add(id(obj))
                total += obj.nbytes
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, functools.partial):
            todo.extend((obj.func, *obj.args, *obj.keywords.values()))
        elif isinstance(obj, types.MethodType):
            todo.append(obj.__self__)
        elif isinstance(obj, types.FunctionType):
            if obj.__module__ == engine.__name__:
                for cell in obj.__closure__ or ():
                    try:
                        todo.append(cell.cell_contents)
                    except ValueError:             # a name not bound yet
                        pass
                todo.extend(obj.__defaults__ or ())
                todo.extend((obj.__kwdefaults__ or {}).values())
        elif type(obj).__module__ == engine.__name__:
            for cls in type(obj).__mro__:
                slots = getattr(cls, "__slots__", ())
                todo.extend(getattr(obj, name, None) for name in ((slots,) if isinstance(slots, str) else slots))
            todo.extend(getattr(obj, "__dict__", {}).values())
    return total


def _keep(key, entry) -> None:
    """Keep a tape (or a split), dropping the least recently used beyond ``TAPES`` or ``TAPE_BYTES``."""
    with _TAPES_LOCK:
        _TAPES[key] = entry
        total = sum(e[3] for e in _TAPES.values())
        while len(_TAPES) > TAPES or total > TAPE_BYTES and len(_TAPES) > 1:
            total -= _TAPES.popitem(last=False)[1][3]


def run(module, function_name: str, args: list, blocks) -> list:
    """:func:`~ptojax.ascend.engine.run` of ``function_name`` for every block index of ``blocks`` (in
    that order), the points together where that is the same (see the module docstring). Returns ``args``."""
    module = engine.parse(module) if isinstance(module, str) else module
    func = module.function(function_name)
    blocks = np.asarray(blocks, np.int64).reshape(-1)
    independent, atomic = _independent(func, args)
    if independent and not atomic or len(blocks) == 1:
        _together(func, args, blocks, independent and not atomic)
        return args
    if independent:                                # an atomic store: a split restarts point by point
        saved = [np.array(args[i]) for i in atomic]
        try:
            _Run(func, args, blocks).block(func.body)
            return args
        except _Split:
            for i, a in zip(atomic, saved):
                args[i][...] = a
    for b in blocks:
        engine.run(module, function_name, args, int(b))
    return args


__all__ = ["run"]
