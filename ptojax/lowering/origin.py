"""Where an eqn came from, in the user's terms: the ``jnp``/``lax`` call and the source line.

An eqn that fails to lower is often an internal step of a library call (``jnp.fft.fft`` converts its
operand to complex64 first, inside a ``jit`` of its own); an error about ``pto.cast`` alone does not
tell the user which line of theirs to change. The walker keeps the eqns whose bodies it is inlining
(:data:`ENCLOSING`); :func:`origin` reads the traceback JAX recorded on the innermost of them that
has one, takes the user's frame, and names the public function it called.
"""
from __future__ import annotations

import contextlib
import copy
import importlib

from .._jax import frames
from ..errors import PtoError, PtoUnsupportedError

ENCLOSING: list = []  # eqns whose bodies are being inlined: their source lines stand in for library code

# JAX source files (under jax/_src/) -> the public module whose functions they define, in order of
# precedence (the first prefix that matches).
_PUBLIC = (("numpy/fft.py", "jnp.fft", "jax.numpy.fft"), ("numpy/linalg.py", "jnp.linalg", "jax.numpy.linalg"),
           ("numpy/", "jnp", "jax.numpy"), ("lax/", "lax", "jax.lax"), ("nn/", "jax.nn", "jax.nn"),
           ("scipy/special.py", "jax.scipy.special", "jax.scipy.special"))

_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
              "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>", "neg": "-",
              "invert": "~", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
              "getitem": "[]"}


def _public_name(file_name: str, function: str) -> str | None:
    """``jnp.fft.fft`` for the frame of ``fft`` in ``jax/_src/numpy/fft.py``; None for a private helper."""
    if "/jax/_src/" not in file_name:
        return None
    path = file_name.rsplit("/jax/_src/", 1)[1]
    if path.startswith("numpy/array_methods.py") and function.startswith("_operator_"):
        op = function.removeprefix("_operator_").lstrip("r")
        return f"operator {_OPERATORS[op]}" if op in _OPERATORS else None
    for prefix, shown, module in _PUBLIC:
        if path.startswith(prefix):
            if function.startswith("_") or "." in function:
                return None
            try:
                public = importlib.import_module(module)
            except ImportError:
                return None
            return f"{shown}.{function}" if callable(getattr(public, function, None)) else None
    return None


def _call_at(eqn) -> str | None:
    """``jnp.fft.fft at file.py:12 (fn)`` for an eqn whose traceback holds a user frame, else None."""
    stack = frames(eqn.source_info)
    user = next((i for i, (*_, mine) in enumerate(stack) if mine), None)
    if user is None:
        return None
    file_name, function, line, _ = stack[user]
    # The frames the user's line called, outermost first: the first public name is the user's call.
    call = next((name for f, fn, *_ in reversed(stack[:user]) if (name := _public_name(f, fn))), None)
    if call is None and eqn.primitive.name == "jit":   # a jitted jnp function: its body's outermost frame
        inner = [frames(e.source_info) for e in eqn.params["jaxpr"].jaxpr.eqns]
        call = next((name for st in inner if st and (name := _public_name(*st[-1][:2]))), None)
    at = f"{file_name}:{line} ({function.rsplit('.', 1)[-1]})"
    return f"{call} at {at}" if call else f"at {at}"


def origin(eqn) -> str:
    """The user's call and line behind ``eqn`` (an eqn of library code: the innermost inlined call's)."""
    return next((c for c in (_call_at(e) for e in [eqn, *reversed(ENCLOSING)]) if c), "at an unknown line")


def _located(err: PtoError, eqn) -> PtoError:
    """``err`` (same type) with the message ``<user call> at <line>: <message>``."""
    located = copy.copy(err)
    located.args = (f"{origin(eqn)}: {err}",)
    located.located = True
    return located


@contextlib.contextmanager
def blame(eqn):
    """Re-raise a ptojax error raised while translating ``eqn`` with the user's call and line in front."""
    try:
        yield
    except PtoError as err:
        if getattr(err, "located", False):
            raise
        raise _located(err, eqn).with_traceback(err.__traceback__) from None


def unsupported(eqn, why=""):
    """The error for an eqn a pass cannot take, at the user's call and line."""
    err = PtoUnsupportedError(f"primitive '{eqn.primitive.name}' {why or 'has no ptojax translation'}")
    return _located(err, eqn)
