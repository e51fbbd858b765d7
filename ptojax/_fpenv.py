"""IEEE float arithmetic on the host thread that runs a kernel: subnormals kept, never flushed.

XLA:CPU turns the float unit's flush-to-zero and denormals-are-zero modes on while it executes a
computation, and a ``sim`` kernel whose schedule data steers runs inside one under ``jax.jit`` (its
host callback; threads started there inherit the modes; other jitted kernels are XLA code, the
replay, and keep XLA's modes). NumPy then flushes subnormal results and operands to zero there but
not in an eager call, and the two would disagree. ``with ieee():`` turns both modes off in the current
thread and restores them on exit; it costs one float multiply when they are already off.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
import warnings

import numpy as np

_SUBNORMAL = np.float32(1e-40)
_ONE = np.float32(1)

# (platform, machine) -> (offset of the float control register in libc's fenv_t, its C type, the mode bits)
_CONTROL = {
    ("Linux", "x86_64"): (28, ctypes.c_uint32, 0x8040),      # MXCSR: FTZ (bit 15), DAZ (bit 6)
    ("Linux", "aarch64"): (0, ctypes.c_uint32, 0x1080000),   # FPCR: FZ (bit 24), FZ16 (bit 19)
    ("Darwin", "x86_64"): (4, ctypes.c_uint32, 0x8040),
    ("Darwin", "arm64"): (8, ctypes.c_uint64, 0x1080000),
}
_ENV_BYTES = 64                                               # more than any fenv_t above


def flushing() -> bool:
    """Whether this thread's float unit flushes subnormals to zero (FTZ or DAZ on)."""
    return bool(_SUBNORMAL * _ONE == 0)


@functools.cache
def _libm():
    name = ctypes.util.find_library("m")
    control = _CONTROL.get((platform.system(), platform.machine()))
    if name is None or control is None:
        return None
    return ctypes.CDLL(name), control


def _disable_flushing():
    """Turn flush-to-zero / denormals-are-zero off: the saved environment, or None where that is not possible."""
    found = _libm()
    saved = ctypes.create_string_buffer(_ENV_BYTES)
    if found is not None:
        libm = found[0]
        if libm.fegetenv(saved) == 0:
            env = _without_flushing(saved.raw)
            if libm.fesetenv(env) == 0 and not flushing():
                return saved
            libm.fesetenv(saved)
    warnings.warn(f"ptojax: this thread's float unit flushes subnormals to zero and ptojax cannot turn that off on "
                  f"{platform.system()} {platform.machine()}; results with subnormal values may differ from IEEE "
                  f"arithmetic", RuntimeWarning, stacklevel=3)
    return None


@functools.lru_cache(maxsize=16)
def _without_flushing(raw: bytes):
    """The environment ``raw`` with the flushing modes off (made once per environment: XLA's is one)."""
    offset, ctype, bits = _libm()[1]
    env = ctypes.create_string_buffer(raw, _ENV_BYTES)
    register = ctype.from_buffer(env, offset)
    register.value &= ~bits
    return env


class ieee:
    """Context manager: IEEE subnormals in this thread inside the block, the thread's modes restored after."""

    __slots__ = ("_saved",)

    def __enter__(self):
        self._saved = _disable_flushing() if flushing() else None
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            _libm()[0].fesetenv(self._saved)
        return False
