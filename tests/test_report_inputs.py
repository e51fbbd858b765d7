"""The tuning loop's answers to arguments of the wrong kind (a PtoArgumentError naming the function, the
argument and what it expects, before any work), to a profile and a kernel that do not belong together,
to output paths that cannot be written, and the figures it shows: tasks as run, the load rule, the diff
table."""
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from ptojax import report
from ptojax.cli import main as cli
from ptojax.report.load import load


def _exp(x):
    with pj.tile(vec=(16, 64)), jax.named_scope("E"):
        return jnp.exp(x)


def _compiled(rows=128, **options):
    return pj.kernel(_exp, options=options or None).lower(np.ones((rows, 64), np.float32)).compile()


@pytest.fixture(scope="module")
def small():
    compiled = _compiled()
    return compiled, compiled.profile()


# ------------------------------------------------------------------------------- tasks as run
def test_auto_tiles_per_block_shows_the_tasks_that_ran(tmp_path):
    """tiles_per_block="auto" groups 8 tiles into 4 tasks: the fusion table and the block graph said 8
    instances (the lowering's grid), the profile ran 4."""
    compiled = _compiled(tiles_per_block="auto")
    profile = compiled.profile()
    data = report.build(profile, compiled)
    ran = {}
    for r in profile.trace.records:
        ran[r.name] = ran.get(r.name, 0) + 1
    assert profile.tasks == 4 and sum(ran.values()) == 4
    assert [b["tasks"] for b in data["fusion"]["blocks"]] == [4]
    (node,) = [n for n in data["graph"]["nodes"] if n["kind"] == "block"]
    assert node["tasks"] == 4 and [p["tasks"] for p in node["parts"]] == [4] and node["instances"] == 8
    page = report.html(data)
    assert "<th class=\"n\">tasks run</th>" in page and "AIV · 4 tasks run" in page and "instances" not in page


# ------------------------------------------------------------------------- what belongs together
def test_a_profile_of_another_kernel_is_refused(small, tmp_path):
    compiled, profile = small
    big = _compiled(1024)
    for p, c in ((big.profile(), compiled), (profile, big)):
        with pytest.raises(pj.PtoArgumentError, match=r"pj.report: the profile is not a run of _exp\(float32\[\d+, 64\]\)"
                                                      r".*its tasks of exp cover other grids"):
            report.write(tmp_path / "r.html", p, c)
    assert not (tmp_path / "r.html").exists()
    other = pj.kernel(_exp, target="a2").lower(np.ones((128, 64), np.float32)).compile()
    with pytest.raises(pj.PtoArgumentError, match="it ran on a3, the kernel is compiled for a2"):
        report.build(profile, other)
    assert report.write(tmp_path / "ok.html", profile, compiled).stat().st_size > 1000


@pytest.mark.parametrize("call, message", [
    (lambda c, p, path: report.write(path, c, p),
     r"pj.report.write: profile must be a Profile \(compiled.profile\(\*args\)\), not a Compiled kernel"),
    (lambda c, p, path: report.write(path, p, pj.kernel(_exp).lower(np.ones((128, 64), np.float32))),
     r"pj.report.write: compiled must be the Compiled kernel .* not a Lowered kernel: call .compile\(\) first"),
    (lambda c, p, path: report.write(path, None), r"pj.report.write: profile must be a Profile .*, not None"),
    (lambda c, p, path: report.write(path, p, p), r"pj.report.write: compiled must be .*, not a Profile"),
    (lambda c, p, path: report.build(p.trace), r"pj.report.build: profile .*not a Trace: call .profile\(\) on it"),
    (lambda c, p, path: report.save_summary(c, path), r"pj.report.save_summary: profile must be a Profile"),
    (lambda c, p, path: report.summary("x.json"), r"pj.report.summary: profile must be a Profile .*not a str"),
    (lambda c, p, path: report.html(p), r"pj.report.html: data must be pj.report.build\(profile, compiled\)'s dict"),
    (lambda c, p, path: report.format_diff(p), r"pj.report.format_diff: d must be a Diff"),
    (lambda c, p, path: report.diff(c, p), r"ptojax diff: expected a Profile, .*, not a Compiled kernel"),
])
def test_arguments_of_the_wrong_kind_are_named(small, tmp_path, call, message):
    """They were AttributeErrors from inside build.py or summary.py."""
    compiled, profile = small
    with pytest.raises(pj.PtoArgumentError, match=message):
        call(compiled, profile, tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


# ------------------------------------------------------------------------------------ paths
def test_output_paths_are_checked_before_writing(small, tmp_path, capfd):
    _, profile = small
    with pytest.raises(pj.PtoArgumentError, match=r"Profile.save: the path must be a str or os.PathLike, not int"):
        profile.save(1)                                # it wrote to stdout and closed it
    print("stdout still open")
    assert "stdout still open" in capfd.readouterr().out
    for call, where in ((profile.save, "Profile.save"), (profile.swimlane, "Profile.swimlane"),
                        (lambda p: report.write(p, profile), "pj.report.write"),
                        (lambda p: report.save_summary(profile, p), "pj.report.save_summary")):
        with pytest.raises(pj.PtoArgumentError, match=rf"{where}: cannot write '.*nodir/x.svg': no folder '.*nodir'"):
            call(tmp_path / "nodir" / "x.svg")
        with pytest.raises(pj.PtoArgumentError, match=rf"{where}: '.*' is a folder, not a file"):
            call(tmp_path)
    for bad in ("s.txt", "s", "s.jpg"):
        with pytest.raises(pj.PtoArgumentError, match=rf"Profile.swimlane: '.*{bad}' must end in .png or .svg"):
            profile.swimlane(tmp_path / bad)
    profile.save(str(tmp_path / "t.json"))
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_files_that_cannot_be_read_are_named(small, tmp_path):
    _, profile = small
    for path in (tmp_path / "missing.json", tmp_path):
        with pytest.raises(pj.PtoArgumentError, match=rf"ptojax diff: {re.escape(str(path))}: cannot read it"):
            report.diff(path, profile)
        with pytest.raises(pj.PtoArgumentError, match=rf"pass options {re.escape(str(path))}: cannot read it"):
            report.load_options(path)


# ---------------------------------------------------------------------------------------- CLI
SOURCE = '''
import jax, jax.numpy as jnp
import ptojax as pj

def f(x):
    with pj.tile(vec=(16, 64)):
        return jnp.exp(x)
'''


def _fails(capsys, argv, message):
    assert cli(argv) == 2, argv
    err = capsys.readouterr().err
    assert re.fullmatch(r"ptojax: " + message + r"\n", err), err


def test_cli_dtypes_are_read_as_the_docs_write_them(capsys):
    """f16 was NumPy's 16-byte float (float128)."""
    from ptojax.cli import _shapes

    names = ["f16", "float16", "bf16", "bfloat16", "f32", "float32", "i8", "int8", "i32", "int32", "bool", ""]
    got = [str(s.dtype) for s in _shapes([f"8x8:{n}" if n else "8x8" for n in names])]
    assert got == ["float16", "float16", "bfloat16", "bfloat16", "float32", "float32", "int8", "int8", "int32", "int32",
                   "bool", "float32"]
    for bad in ("float64", "f64", "f8", "int64", "float128", "complex64"):
        _fails(capsys, ["lower", "nofile.py:f", "--shape", f"8x8:{bad}"],
               rf"--shape '8x8:{bad}': no dtype '{bad}'; the dtypes ptojax supports: float32 \(f32\), float16 \(f16\), "
               r"bfloat16 \(bf16\), int8 \(i8\), int32 \(i32\), bool")
    with pytest.raises(SystemExit):
        cli(["profile", "--help"])
    assert "(default float32)" in " ".join(capsys.readouterr().out.split())


def test_cli_output_paths_fail_before_the_compile(tmp_path, capsys):
    """A bad --swimlane / --html / --trace / --summary failed after the whole compile and run, with
    matplotlib's or the OS's error; 'sw_noext' was reported written where matplotlib wrote sw_noext.png.
    The kernel file does not exist: the paths are checked first."""
    for flag, path, message in [("--swimlane", "sw.txt", r"'sw.txt' must end in .png or .svg"),
                                ("--swimlane", "sw_noext", r"'sw_noext' must end in .png or .svg"),
                                ("--html", str(tmp_path / "no" / "r.html"), r"cannot write '.*r.html': no folder '.*no'"),
                                ("--trace", str(tmp_path), r"'.*' is a folder, not a file"),
                                ("--summary", str(tmp_path / "no" / "s.json"), r"cannot write .*: no folder .*")]:
        _fails(capsys, ["profile", str(tmp_path / "missing.py:f"), flag, path], rf"{flag}: {message}")
    src = tmp_path / "k.py"
    src.write_text(SOURCE)
    assert cli(["profile", f"{src}:f", "--shape", "32x64:f16", "--swimlane", str(tmp_path / "sw.svg")]) == 0
    assert f"swimlane written to {tmp_path / 'sw.svg'}" in capsys.readouterr().out
    assert (tmp_path / "sw.svg").read_text().lstrip().startswith("<?xml")
    _fails(capsys, ["diff", str(tmp_path / "none.json"), str(tmp_path / "none.json")],
           r"PtoArgumentError: ptojax diff: .*none.json: cannot read it \(FileNotFoundError: No such file or directory\)")


# ---------------------------------------------------------------------------------- load rule
def test_load_flags_imbalance_among_the_cores_that_ran_and_counts_idle_ones():
    """Idle cores counted as 0 in the mean: every busy core was 'over', every idle one 'under' (a small
    kernel had all its cores flagged). Now: the mean of the busy cores, idle cores apart."""
    spans = [("AIV", c, "E", us) for c, us in enumerate([10.0, 10.0, 10.0, 2.0, 20.0])]
    k = load(spans, {"AIV": 48})["kinds"]["AIV"]
    assert k["mean_us"] == pytest.approx(10.4) and k["busy_cores"] == 5
    assert k["over"] == [4] and k["under"] == [3] and k["idle"] == list(range(5, 48))
    assert k["max_over_mean"] == pytest.approx(20 / 10.4)
    even = load([("AIC", c, "L", 5.0) for c in range(2)], {"AIC": 24})["kinds"]["AIC"]
    assert even["over"] == even["under"] == [] and len(even["idle"]) == 22 and even["max_over_mean"] == 1.0


def test_the_diff_flags_by_the_current_rule_and_counts_idle_cores(small):
    """A summary saved by the old rule (idle cores in the mean, flagged) is flagged by the new one."""
    _, profile = small
    new = report.summary(profile)
    old = json.loads(json.dumps(new))
    for k in old["load"]["kinds"].values():
        k.pop("idle")
        k["under"] = [c for c in range(k["cores"]) if not k["tasks"][c]]       # what the old rule flagged
    rows = {r[0]: r[1:3] for r in report.diff(old, new).rows}
    assert rows["AIV flagged cores"] == (0, 0) and rows["AIV idle cores"] == (40, 40)


# ------------------------------------------------------------------------------------- the diff
def test_diff_columns_stay_apart_and_label_rows_are_distinct():
    """Large values ran together ('+144874.55+746397.7%'); a label "makespan" made a second
    'makespan us' row."""
    def fn(x):
        with pj.tile(vec=(32, 64)), jax.named_scope("makespan"):
            y = jnp.exp(x)
        with pj.tile(vec=(32, 64)), jax.named_scope("lower bound"):
            return y + 1

    p = pj.kernel(fn).lower(np.ones((128, 128), np.float32)).compile().profile()
    d = report.diff(p, p)
    names = [r[0] for r in d.rows]
    assert len(names) == len(set(names))
    assert {"label makespan us", "label makespan tasks", "label lower bound us"} <= set(names)
    assert [r[1] for r in d.rows if r[0] == "makespan us"] == [p.makespan_us]
    big = report.Diff(d.before, d.after, [("makespan us", 19.41, 144893.96, 144874.55),
                                          ("label x tasks", 1, 123456789, 123456788)])
    lines = str(big).splitlines()
    assert lines[1].split() == ["makespan", "us", "19.41", "144893.96", "+144874.55", "+746391.3%"]
    assert lines[2].split() == ["label", "x", "tasks", "1", "123456789", "+123456788", "+12345678800.0%"]
    assert all(line == line.rstrip() for line in lines)


def test_a_run_of_no_tasks_says_so(tmp_path):
    """The report's cards said '0.00×' and 'bound set by critical path' for a run of no tasks."""
    def loop(x, n):
        return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)

    x = np.ones((40, 64), np.float32)
    compiled = pj.kernel(loop).lower(x, np.int32(0)).compile()
    profile = compiled.profile(x, np.int32(0))
    assert profile.tasks == 0
    page = report.write(tmp_path / "r.html", profile, compiled).read_text()
    cards = dict(re.findall(r"<div class='k'>([^<]*)</div><div class='v'>([^<]*)</div>", page))
    assert cards["makespan / bound"] == cards["bound set by"] == "- (no tasks)" and cards["tasks"] == "0"


def test_a_profile_of_no_tasks_says_so():
    """A kernel that computes nothing on the chip printed '(0.00x, bound by critical_path)' and had
    24 000 000 µs of idle cube time (a 1-second span stood in for the empty run)."""
    profile = pj.kernel(lambda x: jnp.zeros((3,)) + 1.0).lower(np.ones(2, np.float32)).compile().profile()
    assert profile.summary() == "simulated mpmd: 0 tasks (the kernel runs no tasks on the chip)"
    assert set(profile.idle_us.values()) == {0.0} and set(profile.utilisation.values()) == {0.0}


def test_the_report_names_what_dominates_a_binding_phase(tmp_path):
    """The report's 'bound set by' card said 'phases' where the summary says 'phases (scheduler)'."""
    def ew(x):
        with pj.tile(vec=(8, 512)):
            return x * 2.0 + 1.0

    x = np.ones((1024, 1024), np.float32)
    compiled = pj.kernel(ew).lower(x).compile()
    profile = compiled.profile(x)
    page = report.write(tmp_path / "r.html", profile, compiled).read_text()
    cards = dict(re.findall(r"<div class='k'>([^<]*)</div><div class='v'>([^<]*)</div>", page))
    assert cards["bound set by"] == profile.binding == "phases (scheduler)"


def test_a_run_on_host_threads_is_measured_on_its_threads(tmp_path):
    """The threads executor's profile divided host busy time over the chip's 24 + 48 simulated cores
    (utilisation 'AIC 7 %') and printed the chip's lower bound as the bound of a wall-clock run."""
    def ew(x):
        with pj.tile(vec=(32, 64)):
            return jnp.tanh(x) * 2.0

    x = np.ones((128, 64), np.float32)
    compiled = pj.kernel(ew, executor="threads", workers=3).lower(x).compile()
    profile = compiled.run(x)[1].profile()
    assert profile.lanes == (("host", 3),) and set(profile.utilisation) == set(profile.idle_us) == {"host"}
    busy = sum(r.end - r.start for r in profile.trace.records) * 1e6
    assert profile.utilisation["host"] == pytest.approx(busy / (3 * profile.makespan_us))
    first = profile.summary().splitlines()[0]
    assert "on the host's clock" in first and "bound by" not in first
    data = report.build(profile, compiled)
    assert [row["kind"] for row in data["idle"]] == ["host"]
    report.write(tmp_path / "threads.html", profile, compiled)
    profile.save(tmp_path / "threads.json")                 # its Chrome trace: every thread, busy time on the host
    from_trace = report.load_summary(str(tmp_path / "threads.json"))
    assert from_trace["utilisation"]["host"] == pytest.approx(profile.utilisation["host"])
    assert from_trace["idle_us"]["host"] == pytest.approx(profile.idle_us["host"])
    with pytest.raises(pj.PtoArgumentError, match="count must be an int >= 0, got -1"):
        profile.bubbles(-1)
