"""The command line's answers to a new user's mistakes: one ``ptojax: ...`` line and exit status 2 (not a
traceback), files a closed pipe does not stop, and runs of no tasks or of random scalars said plainly."""
import json
import os
import re
import subprocess
import sys

from ptojax import cli
from ptojax.cli import main

KERNELS = '''
import jax.numpy as jnp

def add(a, b):
    return jnp.exp(a) + b

def constant():
    return jnp.ones((8, 8))

def scaled(x, n):
    return x * n

notfunc = 3
'''


def _fails(capsys, argv, message):
    """``main(argv)`` returns 2 with one ``ptojax: ...`` line matching ``message`` on stderr."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, code, err)
    assert re.search(r"^ptojax: .*" + message, err, re.M) and "Traceback" not in err, (argv, err)


def test_kernel_files_that_do_not_load_are_one_line(tmp_path, capsys):
    src = tmp_path / "k.py"
    src.write_text(KERNELS)
    for name, text, message in [("syntax.py", "def f(a:\n", r"cannot import .*syntax.py: SyntaxError: "),
                                ("raises.py", "raise RuntimeError('boom')\n",
                                 r"cannot import .*raises.py: RuntimeError: boom"),
                                ("missing.py", "import no_such_module_xyz\n",
                                 r"cannot import .*missing.py: ModuleNotFoundError: No module named 'no_such_mod")]:
        (tmp_path / name).write_text(text)
        _fails(capsys, ["lower", f"{tmp_path / name}:f", "--shape", "8x8"], message)
    _fails(capsys, ["profile", f"{src}:notfunc"], r"k.py: 'notfunc' is 3 \(int\), not a function")
    _fails(capsys, ["lower", f"{src}:add", "--shape", "8x8:float32", "--shape", "4x4:float32"],
           r"k.py:add fails to trace with --shape 8x8:float32 --shape 4x4:float32: "
           r"TypeError: add got incompatible shapes")


def test_a_path_with_a_colon_loads(tmp_path, capsys):
    folder = tmp_path / "a:b"
    folder.mkdir()
    (folder / "k.py").write_text(KERNELS)
    assert main(["lower", f"{folder / 'k.py'}:add", "--shape", "8x8", "--shape", "8x8", "--level", "tensor"]) == 0
    assert "exp" in capsys.readouterr().out
    _fails(capsys, ["lower", str(folder / "k.py")], r"expected FILE:FUNC, got '.*a:b/k.py'")


def test_usage_errors_exit_2(tmp_path, capsys):
    """They exited 1 (SystemExit) where library errors exited 2."""
    src = tmp_path / "k.py"
    src.write_text(KERNELS)
    _fails(capsys, ["lower", f"{src}:nope"], r"k.py has no function 'nope'")
    _fails(capsys, ["lower", f"{src}:add", "--shape", "8by8", "--shape", "8x8"], r"--shape '8by8' is not DIMSxDIMS")
    _fails(capsys, ["lower", f"{src}:add", "--shape", "8x8x", "--shape", "8x8"], r"--shape '8x8x' is not DIMSxDIMS")
    _fails(capsys, ["lower", f"{src}:add", "--shape=-3x8", "--shape", "8x8"], r"--shape '-3x8': a dimension is negative")
    _fails(capsys, ["lower", f"{src}:add", "--shape", "-4x8", "--shape", "8x8"], r"--shape '-4x8': a dimension is negative")
    _fails(capsys, ["lower", f"{src}:add", "--shape", "8x8"], r"takes 2 arguments \(a, b\), got 1 --shape")
    _fails(capsys, ["ops", "--family", "bogus"], r"no op family 'bogus'")


def test_bad_summaries_traces_and_options_name_the_file(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"traceEvents": []}))
    files = {"fields.json": {"format": "ptojax.profile-summary/1"},
             "dur.json": {"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": "x"}]}}
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
    (tmp_path / "broken.json").write_text("{oops")
    _fails(capsys, ["diff", str(tmp_path / "fields.json"), str(good)],
           r"fields.json: not a valid profile summary \(fields missing or of the wrong type: makespan_us, tasks")
    _fails(capsys, ["diff", str(good), str(tmp_path / "dur.json")],
           r"dur.json: not a valid Chrome trace of a profile \(ValueError: event 'a': ts and dur must be numbers\)")
    _fails(capsys, ["diff", str(tmp_path / "broken.json"), str(good)], r"broken.json: not JSON \(JSONDecodeError: ")
    src = tmp_path / "k.py"
    src.write_text(KERNELS)
    (tmp_path / "o.yaml").write_text("tiles: {}\n")
    (tmp_path / "o.toml").write_text("tiles = [\n")
    for name, kind in (("o.yaml", "JSON"), ("o.toml", "TOML")):
        _fails(capsys, ["lower", f"{src}:add", "--shape", "8x8", "--shape", "8x8", "--options",
                        str(tmp_path / name)], rf"{name}: not valid {kind} .*; only JSON, or TOML in a .toml file")


def test_a_closed_pipe_exits_quietly_after_writing_the_files(tmp_path):
    """``| head`` closed stdout: 'ptojax: BrokenPipeError' and status 2, and the profile stopped before
    writing its summary and trace. The command writes its files first and exits 141 (128 + SIGPIPE)."""
    src = tmp_path / "k.py"
    src.write_text(KERNELS)
    summary, trace = tmp_path / "s.json", tmp_path / "t.json"
    for argv in (["ops"], ["profile", f"{src}:add", "--shape", "8x8", "--shape", "8x8", "--summary", str(summary),
                           "--trace", str(trace)]):
        read, write = os.pipe()
        os.close(read)                                  # the reader is gone before the first line
        run = subprocess.run([sys.executable, "-m", "ptojax", *argv], stdout=write, stderr=subprocess.PIPE,
                             text=True)
        os.close(write)
        assert run.returncode == 141 and "Error" not in run.stderr, (argv, run.returncode, run.stderr)
    assert json.loads(summary.read_text())["tasks"] >= 1 and json.loads(trace.read_text())["traceEvents"]


def test_no_tasks_and_random_scalars_are_said(tmp_path, capsys):
    """A kernel of no tasks printed '(0.00x, bound by critical_path)' and an empty 'time per label:'; a
    random scalar argument was not printed."""
    src = tmp_path / "k.py"
    src.write_text(KERNELS)
    assert main(["profile", f"{src}:constant"]) == 0
    out = capsys.readouterr().out
    assert "the kernel runs no tasks on the chip" in out and "time per label" not in out
    assert main(["profile", f"{src}:scaled", "--shape", "8x8", "--shape", "scalar:int32"]) == 0
    n = cli._arrays(cli._shapes(["8x8", "scalar:int32"]))[1]
    assert n.shape == () and f"random scalar arguments: n = {int(n)}\n" in capsys.readouterr().out
