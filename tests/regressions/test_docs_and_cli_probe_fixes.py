"""A new user's walk through the docs and the command line: an empty ``--shape`` was a scalar; ``demo
--out`` of a file was a raw FileExistsError; without matplotlib ``demo`` said swimlanes were written and
``profile --swimlane`` failed after the whole run; ``pj.ops.permute`` was missing from ``ptojax ops``;
misspelt keywords of ``pj.report.write`` / ``save_summary`` named internal functions."""
import builtins
import re

import numpy as np
import pytest

import ptojax as pj
from ptojax.cli import main


def _fails(capsys, argv, message):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and re.search(r"^ptojax: .*" + message, err, re.M) and "Traceback" not in err, (code, err)


@pytest.mark.parametrize("spec", ["", ":f16"])
def test_a_shape_without_dims_is_a_usage_error(tmp_path, capsys, spec):
    src = tmp_path / "k.py"
    src.write_text("def f(x):\n    return x + 1.0\n")
    _fails(capsys, ["lower", f"{src}:f", "--shape", spec], re.escape(f"--shape {spec!r} is not DIMSxDIMS:DTYPE"))


def test_demo_out_of_a_file_names_the_flag(tmp_path, capsys):
    (tmp_path / "taken").write_text("x")
    _fails(capsys, ["demo", "--out", str(tmp_path / "taken")], r"--out .*taken: File exists \(a folder for the traces")


def _no_matplotlib(monkeypatch):
    real = builtins.__import__

    def imports(name, *args, **kw):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *args, **kw)
    monkeypatch.setattr(builtins, "__import__", imports)


def test_without_matplotlib_a_swimlane_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    src = tmp_path / "k.py"
    src.write_text("def f(x):\n    return x + 1.0\n")
    _no_matplotlib(monkeypatch)
    _fails(capsys, ["profile", f"{src}:f", "--shape", "8x8", "--summary", str(tmp_path / "s.json"),
                    "--swimlane", str(tmp_path / "x.png")], r"--swimlane: the swimlane image needs matplotlib")
    assert not (tmp_path / "s.json").exists()


def test_ops_lists_permute_as_a_layout_op(capsys):
    assert main(["ops", "--family", "layout"]) == 0
    rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines()[1:]]
    assert ["permute", "layout"] in rows and ["transpose", "layout"] in rows


def test_report_keywords_are_named_by_the_functions(tmp_path):
    compiled = pj.kernel(lambda x: x + 1.0).lower(np.ones((8, 8), np.float32)).compile()
    profile = compiled.profile()
    with pytest.raises(TypeError, match=r"write\(\) got an unexpected keyword argument 'titel'"):
        pj.report.write(tmp_path / "r.html", profile, compiled, titel="x")
    with pytest.raises(TypeError, match=r"save_summary\(\) got an unexpected keyword argument 'nmae'"):
        pj.report.save_summary(profile, tmp_path / "s.json", nmae="x")
    pj.report.write(tmp_path / "r.html", profile, compiled, title="mine")
    assert "mine" in (tmp_path / "r.html").read_text()
    pj.report.save_summary(profile, tmp_path / "s.json", name="mine")
    assert pj.report.load_summary(tmp_path / "s.json")["name"] == "mine"
