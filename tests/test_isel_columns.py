"""Selection where a tile's matrix form matters: packed masks of compares over different dtypes, column
tiles (a value per row) broadcast in groups, and permutations that only regroup a column into rows.

Each kernel's real PTO-AS is accepted by ``ptoas`` (A3 and A5, level2 and level3, when the binary is
present) and, executed by the real-text engine (``Compiled.run()``), equals XLA's result.
"""
import pytest

import fuzz

F32 = ("uniform", -2.0, 2.0)
CASES = {
    # a compare's mask is as wide as its row pitch: 8 f32 elements per row of bits, 16 for i16
    "and of an f32 and a bool mask, 2 rows": {
        "seed": 2, "inputs": [((4, 8), "float32", F32), ((4, 8), "bool", ("bool",))],
        "steps": [("gt", {"scalar": 0.0, "swap": False}, None), ("and", {"y": 1}, {"vec": (2, 8)})]},
    "and of an f32 and a bool mask on a column": {
        "seed": 2, "inputs": [((5, 8, 1), "float32", F32), ((5, 8, 1), "bool", ("bool",))],
        "steps": [("gt", {"scalar": 0.0, "swap": False}, None), ("or", {"y": 1}, None)]},
    "an f16 mask selecting int32": {
        "seed": 3, "inputs": [((4, 8), "float16", F32), ((4, 8), "int32", ("ints", -1000, 1000))],
        "steps": [("gt", {"scalar": 0.0, "swap": False}, None), ("select", {"y": 1, "scalar": 7}, {"vec": (2, 8)})]},
    # a (2, 1, 1) operand of a (2, 2, 1) column: its values repeat in groups
    "fmod of a column by groups": {
        "seed": 0, "inputs": [((8, 5, 1), "float32", F32), ((8, 1, 1), "float32", F32)],
        "steps": [("fmod", {"y": 1, "swap": False}, {"vec": (2, 2, 8)})]},
    "groups minus a column, bfloat16": {
        "seed": 1, "inputs": [((6, 5, 1), "bfloat16", F32), ((6, 1, 1), "bfloat16", F32)],
        "steps": [("sub", {"y": 1, "swap": True}, {"vec": (2, 2, 16)})]},
    "both operands broadcast into a column": {
        "seed": 1, "inputs": [((3, 1), "float32", F32), ((2, 1, 1), "float32", F32)],
        "steps": [("sub", {"y": 1, "swap": False}, {"vec": (2, 3, 8)})]},
    "fmod of rows by groups": {
        "seed": 0, "inputs": [((4, 5, 16), "float32", F32), ((4, 1, 16), "float32", F32)],
        "steps": [("fmod", {"y": 1, "swap": False}, {"vec": (2, 2, 16)})]},
    "where and compare on a column by groups": {
        "seed": 1, "inputs": [((6, 5, 1), "float32", F32), ((6, 1, 1), "float32", F32), ((6, 1, 1), "float32", F32)],
        "steps": [("where", {"y": 1, "threshold": 0.0}, {"vec": (2, 2, 8)}), ("lt", {"y": 2, "swap": False}, None)]},
    "bitwise or of a column by groups, int8": {
        "seed": 5, "inputs": [((4, 3, 1), "int8", ("ints", -100, 100)), ((4, 1, 1), "int8", ("ints", -100, 100))],
        "steps": [("bitwise_or", {"y": 1, "swap": False}, {"vec": (2, 3, 32)})]},
    "a bool column expanded by groups": {
        "seed": 1, "inputs": [((3, 1, 1), "bool", ("bool",))],
        "steps": [("expand", {"shape": (3, 5, 1)}, {"vec": (2, 3, 8)})]},
    # permutations that keep the order of the longer axes: a column regrouped as rows, and back
    "a bool column as rows": {
        "seed": 0, "inputs": [((3, 8, 1), "float32", F32)],
        "steps": [("gt", {"scalar": 0.0, "swap": False}, None), ("permute", {"dims": (0, 2, 1)}, {"vec": (2, 1, 8)})]},
    "bool rows as a column": {
        "seed": 0, "inputs": [((3, 1, 8), "bool", ("bool",))],
        "steps": [("permute", {"dims": (0, 2, 1)}, {"vec": (2, 8, 32)})]},
    "a bfloat16 column as rows, 4-d": {
        "seed": 0, "inputs": [((2, 3, 8, 1), "bfloat16", F32)],
        "steps": [("permute", {"dims": (0, 1, 3, 2)}, {"vec": (2, 2, 8, 16)})]},
}


@pytest.mark.parametrize("spec", CASES.values(), ids=CASES.keys())
def test_real_text_is_accepted_and_computes_what_xla_does(spec):
    fuzz.check_real_text(*fuzz.build(spec))
