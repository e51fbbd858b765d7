"""A kernel's replay as native code called by XLA itself, under ``jax.jit``: no host callback.

Under ``jax.jit`` a ``sim`` kernel runs in a host callback: XLA hands the arrays to Python, which
orchestrates the first call and replays its plan after that. Once a replay is one native function
(``mpmd.fused``, ``ascend.nativecode``), XLA can call it without Python. The lowering emits an XLA
FFI custom call (:func:`call`) to a handler — one Numba C function per process, made by
``_runtime`` — with a slot number; the handler runs the :class:`Entry` installed in that slot, if any, and returns whether it ran; a
``lax.cond`` runs the host callback where it did not. So the first calls (no entry yet), a call
that finds the entry in use by another thread, and a call whose native code fails a check all take
the host callback, which orchestrates, replays, or reports the error as it always does.

An entry runs the plan's native function on XLA's buffers (the kernel's inputs and outputs), its
own arrays for the kernel's intermediates and its own simulated core, under a lock of its own, and
with the float unit's flush-to-zero modes off (XLA turns them on; see ``_fpenv``). x86-64 only (the
modes are set with ``ldmxcsr``); elsewhere jitted kernels keep their host callback.

The handler reads XLA's call frame (``xla/ffi/api/c_api.h``, API 0.x) at fixed offsets on a 64-bit
machine: ``args.args`` at 72, ``rets.rets`` at 112, a buffer's ``data`` at 24, the execution stage at
32; the metadata extension XLA may query at registration is answered with API version 0.1.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import platform
import threading

import numpy as np

_SLOTS = 4096
_FRAME_ARGS, _FRAME_RETS, _BUFFER_DATA, _FRAME_STAGE, _STAGE_EXECUTE = 72, 112, 24, 32, 3
_EXTENSION_METADATA = 1
_FTZ_DAZ = 0x8040                               # MXCSR: flush-to-zero (bit 15), denormals-are-zero (bit 6)
TARGET = "ptojax_native_replay"

_slots = itertools.count()
_entries: dict = {}                             # slot -> the Entry installed there (kept alive)
_installing = threading.Lock()


def available() -> bool:
    """Whether jitted kernels may run as native entries here (x86-64, Numba installed)."""
    return platform.machine().lower() in ("x86_64", "amd64") and _numba() is not None


@functools.cache
def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


def new_slot() -> int:
    """A slot for a jitted kernel's entry, or -1 when every slot is taken."""
    slot = next(_slots)
    return slot if slot < _SLOTS else -1


@functools.cache
def _runtime():
    """The intrinsics, the slot table and the registered handler: made on first use."""
    from llvmlite import ir
    from numba import cfunc, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)

    @intrinsic
    def word(typingctx, base, offset):
        """The pointer stored at byte ``offset`` of ``base``."""
        def codegen(context, builder, sig, args):
            return builder.load(builder.bitcast(builder.gep(args[0], [args[1]]), i8p.as_pointer()))
        return types.voidptr(types.voidptr, types.intp), codegen

    @intrinsic
    def int32_at(typingctx, base, offset):
        def codegen(context, builder, sig, args):
            return builder.load(builder.bitcast(builder.gep(args[0], [args[1]]), i32.as_pointer()))
        return types.int32(types.voidptr, types.intp), codegen

    @intrinsic
    def store_int32(typingctx, base, offset, value):
        def codegen(context, builder, sig, args):
            value = builder.trunc(args[2], i32) if args[2].type.width > 32 else args[2]
            builder.store(value, builder.bitcast(builder.gep(args[0], [args[1]]), i32.as_pointer()))
            return context.get_dummy_value()
        return types.none(types.voidptr, types.intp, types.intp), codegen

    @intrinsic
    def null(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(i8p, None)
        return types.voidptr(), codegen

    @intrinsic
    def is_null(typingctx, pointer):
        def codegen(context, builder, sig, args):
            return builder.icmp_unsigned("==", builder.ptrtoint(args[0], i64), i64(0))
        return types.boolean(types.voidptr), codegen

    @intrinsic
    def address(typingctx, value):
        """An integer address as a pointer."""
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], i8p)
        return types.voidptr(types.int64), codegen

    @intrinsic
    def call_entry(typingctx, function, frame):
        """Call the C function ``int32 (void *)`` at address ``function`` with ``frame``."""
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(i32, [i8p])
            return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]])
        return types.int32(types.int64, types.voidptr), codegen

    @intrinsic
    def try_lock(typingctx, word_address):
        """Atomically set the int64 at ``word_address`` from 0 to 1: whether it was 0."""
        def codegen(context, builder, sig, args):
            pointer = builder.inttoptr(args[0], i64.as_pointer())
            pair = builder.cmpxchg(pointer, i64(0), i64(1), "acquire", "monotonic")
            return builder.extract_value(pair, 1)
        return types.boolean(types.int64), codegen

    @intrinsic
    def unlock(typingctx, word_address):
        def codegen(context, builder, sig, args):
            pointer = builder.inttoptr(args[0], i64.as_pointer())
            builder.store_atomic(i64(0), pointer, "release", 8)
            return context.get_dummy_value()
        return types.none(types.int64), codegen

    @intrinsic
    def ieee_enter(typingctx):
        """Turn MXCSR's flush-to-zero and denormals-are-zero off: the register as it was."""
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.VoidType(), [i8p])
            stmxcsr = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.stmxcsr")
            ldmxcsr = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.ldmxcsr")
            slot = cgutils.alloca_once(builder, i32)
            builder.call(stmxcsr, [builder.bitcast(slot, i8p)])
            saved = builder.load(slot)
            builder.store(builder.and_(saved, i32(~_FTZ_DAZ & 0xffffffff)), slot)
            builder.call(ldmxcsr, [builder.bitcast(slot, i8p)])
            return saved
        return types.int32(), codegen

    @intrinsic
    def ieee_exit(typingctx, saved):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.VoidType(), [i8p])
            ldmxcsr = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.ldmxcsr")
            slot = cgutils.alloca_once(builder, i32)
            builder.store(args[0], slot)
            builder.call(ldmxcsr, [builder.bitcast(slot, i8p)])
            return context.get_dummy_value()
        return types.none(types.int32), codegen

    @intrinsic
    def int64_table(typingctx, base, index):
        def codegen(context, builder, sig, args):
            pointer = builder.inttoptr(args[0], i64.as_pointer())
            return builder.load(builder.gep(pointer, [builder.sext(args[1], i64)]))
        return types.int64(types.int64, types.int32), codegen

    table = np.zeros(_SLOTS, np.int64)          # slot -> its entry's address (0: none)
    table_address = table.ctypes.data

    @cfunc(types.voidptr(types.voidptr))
    def handler(frame):
        extension = word(frame, 8)
        if not is_null(extension):
            if int32_at(extension, 8) == _EXTENSION_METADATA:     # XLA_FFI_Metadata: api_version 0.1, no traits
                metadata = word(extension, 24)
                store_int32(metadata, 24, 0)
                store_int32(metadata, 28, 1)
                store_int32(metadata, 32, 0)
            return null()
        if int32_at(frame, _FRAME_STAGE) != _STAGE_EXECUTE:
            return null()
        args, rets = word(frame, _FRAME_ARGS), word(frame, _FRAME_RETS)
        slot = int32_at(word(word(args, 0), _BUFFER_DATA), 0)
        done = word(word(rets, 0), _BUFFER_DATA)
        ran = 0
        if 0 <= slot < _SLOTS:
            function = int64_table(table_address, slot)
            if function != 0:
                ran = call_entry(function, frame)
        store_int32(done, 0, ran)
        return null()

    import jax

    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype, capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    jax.ffi.register_ffi_target(TARGET, capsule_new(handler.address, b"xla._CUSTOM_CALL_TARGET", None), platform="cpu")
    namespace = dict(_word=word, _address=address, _try_lock=try_lock, _unlock=unlock, _ieee_enter=ieee_enter,
                     _ieee_exit=ieee_exit)
    return table, handler, namespace


class Entry:
    """A replay's native function ``plan`` — called as ``plan(points, views, *buffers)``, returning -1
    or the number of a call whose check failed — as the C function a slot holds.

    ``buffers``: per argument of ``plan`` after the first two, ``(kind, where, shape, dtype)``: kind
    ``"arg"`` / ``"ret"``, the kernel's input / output number ``where`` (XLA's buffer), or
    ``"memory"``, an array ``where`` the entry keeps; ``dtype`` as ``plan`` reads it. ``fills``:
    ``(argument number, value)`` to fill before the call, the value a NumPy scalar of that dtype. ``points``, ``views``: arrays kept here."""

    def __init__(self, plan, points: tuple, views: tuple, buffers: list, fills: list):
        numba = _numba()
        self.lock = np.zeros(1, np.int64)
        self.keep = (points, views, [where for kind, where, _, _ in buffers if kind == "memory"])
        lines = ["def entry(frame):", f"    if not _try_lock({self.lock.ctypes.data}): return 0",
                 f"    args, rets = _word(frame, {_FRAME_ARGS}), _word(frame, {_FRAME_RETS})"]
        names = []
        for n, (kind, where, shape, dtype) in enumerate(buffers):
            if kind == "memory":
                pointer = f"_address({where.ctypes.data})"
            else:
                table = "args" if kind == "arg" else "rets"
                pointer = f"_word(_word({table}, {8 * (1 + where)}), {_BUFFER_DATA})"   # 0: slot / done
            lines.append(f"    b{n} = _carray({pointer}, {tuple(shape)!r}, _np.{np.dtype(dtype).name})")
            names.append(f"b{n}")
        for group, arrays in (("p", points), ("v", views)):
            for k, a in enumerate(arrays):
                lines.append(f"    _{group}{k} = _carray(_address({a.ctypes.data}), {a.shape!r}, _np.{a.dtype.name})")
        constants = {}
        for n, value in fills:
            constants[f"_fill{n}"] = value
            lines.append(f"    b{n}.fill(_fill{n})")
        points_tuple = "".join(f"_p{k}, " for k in range(len(points)))
        views_tuple = "".join(f"_v{k}, " for k in range(len(views)))
        lines += ["    saved = _ieee_enter()",
                  f"    failed = _plan(({points_tuple}), ({views_tuple}), {', '.join(names)})",
                  "    _ieee_exit(saved)",
                  f"    _unlock({self.lock.ctypes.data})",
                  "    return 1 if failed < 0 else 0", ""]
        self.source = "\n".join(lines)
        ns = dict(_runtime()[2], _plan=plan, _carray=numba.carray, _np=np, **constants)
        exec(compile(self.source, "<pto native entry>", "exec"), ns)   # noqa: S102 - our own text
        self.fn = numba.cfunc(numba.types.int32(numba.types.voidptr))(ns["entry"])


def install(slot: int, entry: Entry) -> None:
    """Run ``entry`` for the calls of ``slot`` from now on."""
    table = _runtime()[0]
    with _installing:
        _entries[slot] = entry
        table[slot] = entry.fn.address


def call(slot: int, *args, avals):
    """Inside a jitted function: (whether slot ``slot``'s entry ran, then the kernel's outputs, of
    ``avals``, which are only defined where it ran)."""
    import jax
    import jax.numpy as jnp

    _runtime()
    results = [jax.ShapeDtypeStruct((), jnp.int32), *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals)]
    done, *outs = jax.ffi.ffi_call(TARGET, results)(jnp.int32(slot), *args)
    return done, outs
