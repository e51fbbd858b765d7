"""The console script and the examples run."""
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert {line.split()[0] for line in lines[1:]} == set(OPS) | {"permute"} == set(ptojax.ops.__all__)


def test_ops_family_filter(capsys):
    assert main(["ops", "--family", "matmul"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["matmul"] and "int8" in rows[0]


def test_the_users_mistakes_are_one_line_not_a_traceback(tmp_path, capsys):
    """A malformed --shape, too few of them, an unknown family, a missing file or an option the kernel
    rejects: one ``ptojax: ...`` line and a non-zero exit (they printed Python tracebacks)."""
    src = tmp_path / "k.py"
    src.write_text("import jax.numpy as jnp\n\ndef f(a, b):\n    return jnp.exp(a) + b\n")
    options, broken = tmp_path / "options.json", tmp_path / "broken.json"
    options.write_text('{"tiles": {"Nope": {"vec": [8, 8]}}}')
    broken.write_text('{"tiles": ')
    cases = [(["lower", f"{src}:f", "--shape", "64by64:float32", "--shape", "64x64"], r"--shape '64by64:float32' is "
              r"not DIMSxDIMS:DTYPE"),
             (["lower", f"{src}:f", "--shape", "64x64:float99", "--shape", "64x64"],
              r"--shape '64x64:float99': no dtype 'float99'; the dtypes ptojax supports: float32 \(f32\)"),
             (["lower", f"{src}:f", "--shape", "64x64"], r"k.py:f takes 2 arguments \(a, b\), got 1 --shape"),
             (["ops", "--family", "bogus"], r"no op family 'bogus'; the families: composite, elementwise"),
             (["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")], r"FileNotFoundError"),
             (["lower", f"{src}:f", "--shape", "64x64", "--shape", "64x64", "--options", str(options)],
              r"PtoArgumentError: pto tiling: tile overrides for \['Nope'\]"),
             (["lower", f"{src}:f", "--shape", "64x64", "--shape", "64x64", "--options", str(broken)],
              r"JSONDecodeError")]
    for argv, message in cases:
        try:
            code = main(argv)
        except SystemExit as exit_:
            code, err = 1, str(exit_.code)
        else:
            err = capsys.readouterr().err
        assert code != 0 and re.search(r"ptojax: .*" + message, err) and "Traceback" not in err, (argv, err)


def test_python_dash_m_runs_the_command_line():
    out = subprocess.run([sys.executable, "-m", "ptojax", "ops", "--family", "matmul"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.splitlines()[1].split()[0] == "matmul"


def test_console_script_module_entry():
    out = subprocess.run([sys.executable, "-m", "ptojax.cli", "ops"], capture_output=True, text=True, check=True)
    assert "scatter_update" in out.stdout


def test_fused_example_matches_numpy():
    module = runpy.run_path(str(ROOT / "examples" / "fused_ops.py"))
    assert module["main"]() < 2e-3  # fp16 inputs, one fp16 rounding of A*c+B, fp32 accumulation


def test_demo_checks_every_kernel_and_writes_traces(tmp_path, capsys):
    from ptojax.demo import DEMOS

    assert main(["demo", "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    for name, _, _ in DEMOS:
        assert f"{name} " in text
        trace = json.loads((tmp_path / "out" / f"{name}.trace.json").read_text())
        assert any(e["ph"] == "X" for e in trace["traceEvents"])
        assert (tmp_path / "out" / f"{name}.swimlane.png").read_bytes()[:4] == b"\x89PNG"
    assert "FAIL" not in text and "seed_example     ok" in text


KERNEL_FILE = '''
import jax.numpy as jnp
import ptojax as pj

def scale_rows(x, w):
    with pj.tile(vec=(8, 64)):
        return jnp.sum(x * 2.0, axis=-1) + w
'''


def test_lower_and_profile_commands(tmp_path, capsys):
    path = tmp_path / "k.py"
    path.write_text(KERNEL_FILE)
    assert main(["lower", f"{path}:scale_rows", "--shape", "32x64:float32", "--shape", "32:float32",
                 "--level", "pto"]) == 0
    assert "pto.trowsum" in capsys.readouterr().out
    with pytest.raises(SystemExit):               # the levels are the lowering's and the real text's
        main(["lower", f"{path}:scale_rows", "--shape", "32x64:float32", "--level", "host"])
    assert "invalid choice: 'host'" in capsys.readouterr().err
    trace = tmp_path / "t.json"
    assert main(["profile", f"{path}:scale_rows", "--shape", "32x64:float32", "--shape", "32:float32",
                 "--trace", str(trace)]) == 0
    assert "makespan" in capsys.readouterr().out
    assert json.loads(trace.read_text())["traceEvents"]


def test_a_kernel_file_imports_the_modules_beside_it(tmp_path, capsys, monkeypatch):
    """As ``python FILE`` does: FILE's folder is on ``sys.path`` while the command imports it, and the
    module is in ``sys.modules`` (a dataclass under postponed annotations looks it up), not under the
    name of a module already imported (json.py)."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "cli_helpers_beside.py").write_text("def scale(x):\n    return x * 2.0 + 1.0\n")
    (folder / "kern.py").write_text("from __future__ import annotations\nimport dataclasses\n"
                                    "import jax.numpy as jnp\nfrom cli_helpers_beside import scale\n\n"
                                    "@dataclasses.dataclass\nclass Config:\n    axis: int = -1\n\n"
                                    "def f(x):\n    return jnp.sum(scale(x), axis=Config().axis)\n")
    (folder / "json.py").write_text("def f(x):\n    return x * 3.0\n")      # a stem that names a module
    monkeypatch.chdir(tmp_path)                  # not the file's folder
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["lower", "project/kern.py:f", "--shape", "32x64:float32", "--level", "tensor"]) == 0
    assert "pto.sum" in capsys.readouterr().out
    assert main(["lower", "project/json.py:f", "--shape", "8x8:float32", "--level", "tensor"]) == 0
    assert "pto.mul(%0, 3.0)" in capsys.readouterr().out and hasattr(sys.modules["json"], "dumps")


def test_a_kernel_object_keeps_its_options_and_target(tmp_path, capsys):
    """``FILE:NAME`` of a ``pj.kernel(fn, options=..., target=...)`` object (quickstart's ``f =
    pj.kernel(...)``): its pass options and target hold, ``--options`` / ``--target`` over them (they
    were dropped: 7 tasks instead of the kernel's 4, the a3 chip instead of a2)."""
    path = tmp_path / "k.py"
    path.write_text("import jax, jax.numpy as jnp\nimport ptojax as pj\n\n"
                    "def fn(a, b):\n    with pj.tile(vec=(32, 32)), jax.named_scope('Scale'):\n"
                    "        return a * 2.0 + b\n\n"
                    "tuned = pj.kernel(fn, target='a2', options={'tiles_per_block': {'Scale': 4}})\n")
    options = tmp_path / "o.json"
    options.write_text('{"tiles_per_block": {"Scale": 2}}')
    tasks = {}
    for extra in ([], ["--options", str(options)], ["--target", "a3"]):
        summary = tmp_path / "s.json"
        assert main(["profile", f"{path}:tuned", "--shape", "64x64:float16", "--shape", "64x64:float16",
                     "--summary", str(summary), *extra]) == 0
        capsys.readouterr()
        got = json.loads(summary.read_text())
        tasks[" ".join(extra)] = (got["tasks"], got["machine"], got["options"])
    assert tasks == {"": (1, "a2", {"tiles_per_block": {"Scale": 4}}),
                     f"--options {options}": (2, "a2", {"tiles_per_block": {"Scale": 2}}),
                     "--target a3": (1, "a3", {"tiles_per_block": {"Scale": 4}})}, tasks
