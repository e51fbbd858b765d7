"""IEEE float arithmetic for a kernel run on the host: subnormals kept, never flushed.

XLA:CPU turns the float unit's flush-to-zero and denormals-are-zero modes on in the threads that run
a computation, and a ``sim`` kernel whose schedule data steers runs inside one under ``jax.jit`` (its
host callback; other jitted kernels are XLA code, the replay, and keep XLA's modes). NumPy would
flush subnormal results and operands there but not in an eager call, and the two would disagree.
:func:`ieee_call` runs such work on a thread with the modes off: threads inherit their creator's
float environment, so it has a thread started at import (from a thread with IEEE modes) start one
for each call.
"""
from __future__ import annotations

import queue
import threading
import warnings

import numpy as np

_SUBNORMAL = np.float32(1e-40)
_ONE = np.float32(1)


def flushing() -> bool:
    """Whether this thread's float unit flushes subnormals to zero (FTZ or DAZ on)."""
    return bool(_SUBNORMAL * _ONE == 0)


class _Call:
    """One function call made on a thread of its own: its result or its exception."""

    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result = self.error = None
        self.done = threading.Event()

    def __call__(self):
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as err:    # noqa: BLE001 - raised again in the caller's thread
            self.error = err
        self.done.set()


class _Starter(threading.Thread):
    """Starts a thread for each call it is given: threads that inherit its float modes."""

    def __init__(self):
        super().__init__(name="ptojax-ieee", daemon=True)
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        self.ieee = not flushing()                   # its creator's modes, which it inherits

    def run(self):
        while True:
            threading.Thread(target=self.calls.get(), name="ptojax-ieee-call", daemon=True).start()


_STARTER = _Starter()
_STARTER.start()


def ieee_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with IEEE subnormals: here where this thread keeps them, else on a thread
    that does (the caller waits for it; an exception is raised again here)."""
    if not flushing():
        return fn(*args, **kwargs)
    if not _STARTER.ieee:
        warnings.warn("ptojax: this thread's float unit flushes subnormals to zero and so did the thread that "
                      "imported ptojax; results with subnormal values may differ from IEEE arithmetic",
                      RuntimeWarning, stacklevel=2)
        return fn(*args, **kwargs)
    call = _Call(fn, args, kwargs)
    _STARTER.calls.put(call)
    call.done.wait()
    if call.error is not None:
        raise call.error
    return call.result
