"""The selection rules: codegen's tile mnemonic -> a function that emits its real instructions.

A rule is ``rule(sel, instr, ins, outs)``: ``sel`` is the :class:`~.selector.Selector` of the kernel
being printed (its helpers allocate tiles and print instructions), ``instr`` codegen's instruction,
``ins`` / ``outs`` its operand names. Each module of this package registers the rules of one family.
"""
from __future__ import annotations

RULES: dict = {}


def rule(*mnemonics):
    """Register the decorated function as the rule of codegen's ``mnemonics``."""
    def register(fn):
        for mnemonic in mnemonics:
            RULES[mnemonic] = fn
        return fn
    return register
