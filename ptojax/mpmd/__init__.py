"""The MPMD task runtime: orchestration, dependency-driven dispatch to cube and vector cores, traces."""
