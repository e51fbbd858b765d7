"""The console script and the examples run."""
import runpy
import subprocess
import sys
from pathlib import Path

import ptojax
from ptojax.cli import main
from ptojax.primitives import OPS

ROOT = Path(__file__).resolve().parents[1]


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert ptojax.__version__ in capsys.readouterr().out


def test_ops_lists_every_op(capsys):
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines[1:]} == set(OPS)


def test_ops_family_filter(capsys):
    assert main(["ops", "--family", "matmul"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["matmul"] and "int8" in rows[0]


def test_console_script_module_entry():
    out = subprocess.run([sys.executable, "-m", "ptojax.cli", "ops"], capture_output=True, text=True, check=True)
    assert "scatter_update" in out.stdout


def test_fused_example_matches_numpy():
    module = runpy.run_path(str(ROOT / "examples" / "fused_ops.py"))
    assert module["main"]() < 2e-3  # fp16 inputs, one fp16 rounding of A*c+B, fp32 accumulation


def test_readme_python_blocks_run(capsys):
    blocks = (ROOT / "README.md").read_text().split("```python")[1:]
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block.split("```")[0], "README.md", "exec"), {})
    assert "mul+add <AIV>" in capsys.readouterr().out
