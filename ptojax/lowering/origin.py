"""Where an eqn came from, in the user's terms: the ``jnp``/``lax`` call and the source line.

An eqn that fails to lower is often an internal step of a library call (``jnp.fft.fft`` converts its
operand to complex64 first, inside a ``jit`` of its own); an error about ``pto.cast`` alone does not
tell the user which line of theirs to change. The walker keeps the eqns whose bodies it is inlining
(:data:`ENCLOSING`); :func:`origin` reads the traceback JAX recorded on the innermost of them that
has one, takes the user's frame, and names the public function it called. The user's frame is neither
JAX's nor ptojax's own (``pj.nn``, ``pj.ops`` and ``pj.kernel`` are library code, as ``jnp`` is). A
traceback ends where its trace began, so a kernel whose function is ptojax's (a ``pj.nn`` op's) holds no
user frame: then the user's frame is the innermost one on the Python stack, the call compiling it.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import os
import sys
import sysconfig

from .._jax import frames
from ..errors import PtoError, PtoUnsupportedError

ENCLOSING: list = []  # eqns whose bodies are being inlined: their source lines stand in for library code

# JAX source files (under jax/_src/) -> the public module whose functions they define, in order of
# precedence (the first prefix that matches).
_PUBLIC = (("numpy/fft.py", "jnp.fft", "jax.numpy.fft"), ("numpy/linalg.py", "jnp.linalg", "jax.numpy.linalg"),
           ("numpy/", "jnp", "jax.numpy"), ("lax/", "lax", "jax.lax"), ("nn/", "jax.nn", "jax.nn"),
           ("scipy/special.py", "jax.scipy.special", "jax.scipy.special"), ("random/", "jax.random", "jax.random"))
_OWN_PUBLIC = (("nn/", "pj.nn", "ptojax.nn"), ("primitives/", "pj.ops", "ptojax.ops"))   # the same, for ptojax's

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep     # .../ptojax/
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep

_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
              "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "neg": "-",
              "invert": "~", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
              "getitem": "[]"}


@functools.lru_cache(maxsize=4096)
def own_path(file_name: str) -> str | None:
    """The path of one of ptojax's source files in the package (``nn/_softmax.py``), else None (tests/,
    examples/ and benchmarks/ beside the package are the user's)."""
    real = os.path.realpath(file_name)
    return real[len(_PACKAGE):].replace(os.sep, "/") if real.startswith(_PACKAGE) else None


def _public_name(file_name: str, function: str) -> str | None:
    """``jnp.fft.fft`` for the frame of ``fft`` in ``jax/_src/numpy/fft.py`` (``pj.nn.softmax`` for
    ``softmax`` in ``ptojax/nn/``); None for a private helper."""
    own = own_path(file_name)
    if own is not None:
        path, table = own, _OWN_PUBLIC
    elif "/jax/_src/" in file_name:
        path, table = file_name.rsplit("/jax/_src/", 1)[1], _PUBLIC
    else:
        return None
    if path.startswith("numpy/array_methods.py") and (function.startswith("_operator_") or function == "_getitem"):
        name = function.removeprefix("_operator_").removeprefix("_")
        op = name if name in _OPERATORS else name.removeprefix("r")            # r: a reflected operator
        return f"operator {_OPERATORS[op]}" if op in _OPERATORS else None
    for prefix, shown, module in table:
        if path.startswith(prefix):
            if function.startswith("_") or "." in function:
                return None
            try:
                public = importlib.import_module(module)
            except ImportError:
                return None
            return f"{shown}.{function}" if callable(getattr(public, function, None)) else None
    return None


def _live() -> list:
    """The Python stack now as :func:`frames` gives a traceback's: innermost first, each frame marked
    whether it is the user's (neither ptojax's, JAX's nor the standard library's)."""
    stack, frame = [], sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        library = "/jax/_src/" in name or "/jaxlib/" in name or os.path.realpath(name).startswith(_STDLIB)
        stack.append((name, frame.f_code.co_qualname, frame.f_lineno, not library))
        frame = frame.f_back
    return stack


def raised_at(err: BaseException) -> str | None:
    """``file.py:12 (fn)``: the user's innermost frame in ``err``'s traceback, None if it holds none."""
    tb, at = err.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename
        library = "/jax/_src/" in name or "/jaxlib/" in name or os.path.realpath(name).startswith(_STDLIB)
        if not library and own_path(name) is None:
            at = f"{name}:{tb.tb_lineno} ({code.co_name})"
        tb = tb.tb_next
    return at


def _call_at(eqn, stack=None) -> str | None:
    """``jnp.fft.fft at file.py:12 (fn)`` for an eqn whose traceback (or ``stack``, :func:`_live`'s)
    holds a user frame, else None."""
    stack = frames(eqn.source_info) if stack is None else stack
    user = next((i for i, (f, *_, mine) in enumerate(stack) if mine and own_path(f) is None), None)
    if user is None:
        return None
    file_name, function, line, _ = stack[user]
    # The frames the user's line called, outermost first: the first public name is the user's call.
    call = next((name for f, fn, *_ in reversed(stack[:user]) if (name := _public_name(f, fn))), None)
    if call is None and eqn.primitive.name == "jit":   # a jitted jnp function: its body's outermost frame
        inner = [frames(e.source_info) for e in eqn.params["jaxpr"].jaxpr.eqns]
        call = next((name for st in inner if st and (name := _public_name(*st[-1][:2]))), None)
    if call is None and eqn.primitive.name == "pto_call":   # a pj.kernel called inside the kernel
        call = f"pj.kernel '{eqn.params['call'].name}'"
    at = f"{file_name}:{line} ({function.rsplit('.', 1)[-1]})"
    return f"{call} at {at}" if call else f"at {at}"


def origin(eqn) -> str:
    """The user's call and line behind ``eqn`` (an eqn of library code: the innermost inlined call's;
    of a kernel traced from library code only: the user's call on the stack now)."""
    return next((c for c in (_call_at(e) for e in [eqn, *reversed(ENCLOSING)]) if c), None) \
        or _call_at(eqn, _live()) or "at an unknown line"


def user_traceback(eqn):
    """The traceback :func:`origin` reads for ``eqn`` (its own or the innermost inlined call's that holds
    a user frame; None if none does): what the eqns standing for ``eqn`` carry to later passes."""
    for e in (eqn, *reversed(ENCLOSING)):
        tb = e.source_info.traceback
        if tb is not None and any(mine and own_path(f) is None for f, *_, mine in frames(e.source_info)):
            return tb
    return None


def _located(err: PtoError, where: str) -> PtoError:
    """``err`` (same type) with the message ``<where>: <message>`` (``where``: the user's call and line)."""
    located = copy.copy(err)
    located.args = (f"{where}: {err}",)
    located.located = True
    return located


@contextlib.contextmanager
def blame(eqn, live: bool = True):
    """Re-raise a ptojax error raised while translating ``eqn`` with the user's call and line in front
    (found in ``eqn``'s traceback; with ``live``, else on the stack now; ``eqn`` None: as it was raised)."""
    try:
        yield
    except PtoError as err:
        where = None if eqn is None or getattr(err, "located", False) else origin(eqn) if live else _call_at(eqn)
        if where is None:
            raise
        raise _located(err, where).with_traceback(err.__traceback__) from None


def unsupported(eqn, why=""):
    """The error for an eqn a pass cannot take, at the user's call and line."""
    err = PtoUnsupportedError(f"primitive '{eqn.primitive.name}' {why or 'has no ptojax translation'}")
    return _located(err, origin(eqn))
