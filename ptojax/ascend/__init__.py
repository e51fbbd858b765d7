"""The Ascend A2/A3 backend: targets, the PTO ISA, PTO-AS emission and parsing, interpreter, cost model."""
