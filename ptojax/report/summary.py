"""The saved form of a profile and the comparison of two: summaries, Chrome-trace import, diffs.

A summary is a JSON object with ``"format": "ptojax.profile-summary/1"``, ``makespan_us``,
``lower_bound_us``, ``bound_us`` (per term), ``tasks``, ``utilisation`` and ``idle_us`` per core kind,
``label_us`` and ``label_tasks`` per label, the critical path's labels, and ``load`` (``load.py``:
busy µs per core, the mean of the busy cores per core kind, the busy µs per core of each block call and
the cores off that call's mean, the idle cores and the labels whose tiles all ran on one core). A Chrome trace (``Profile.save``) reads back as a summary
without the lower bound.
"""
from __future__ import annotations

import dataclasses
import json
import unicodedata
from pathlib import Path

from ..errors import PtoArgumentError
from ..mpmd.trace import Profile, output_path
from .load import chrome_spans, flags, load, profile_spans

SUMMARY_FORMAT = "ptojax.profile-summary/1"


def kind_order(kind: str) -> tuple:
    """Sort key of a core kind: AIC, AIV, then the others by name."""
    return ({"AIC": 0, "AIV": 1}.get(kind, 2), kind)


def runs(labels) -> list:
    """Run-length encode a label sequence: [[label, count], ...]."""
    out: list = []
    for lab in labels:
        if out and out[-1][0] == lab:
            out[-1][1] += 1
        else:
            out.append([lab, 1])
    return out


_WHAT = {"NoneType": "None", "Compiled": "a Compiled kernel (arguments in the wrong order?)",
         "Profile": "a Profile (arguments in the wrong order?)", "Lowered": "a Lowered kernel: call .compile() first",
         "Trace": "a Trace: call .profile() on it",
         "PolymorphicCompiled": "a PolymorphicCompiled kernel: its .report(path, ...) writes its report"}


def wrong(where: str, name: str, want: str, got) -> PtoArgumentError:
    """The error of ``where`` for an argument ``name`` that is not ``want``: what it got, and what to do."""
    what = _WHAT.get(type(got).__name__, f"a {type(got).__name__} ({got!r:.60})")
    return PtoArgumentError(f"{where}: {name} must be {want}, not {what}")


def check_profile(where: str, profile) -> None:
    """Raise :func:`wrong` unless ``profile`` is a :class:`~ptojax.mpmd.Profile`."""
    if not isinstance(profile, Profile):
        raise wrong(where, "profile", "a Profile (compiled.profile(*args))", profile)


def summary(profile, *, name: str | None = None, options=None) -> dict:
    """The saved form of a profile (see the module docstring); JSON-able. The single-core check counts
    the grid points (tiles) the tasks ran, several per task with ``tiles_per_block``."""
    check_profile("pj.report.summary", profile)
    trace = profile.trace
    tasks = trace.graph.tasks
    counts: dict = {}
    for r in trace.records:
        counts[r.title] = counts.get(r.title, 0) + 1
    return {
        "format": SUMMARY_FORMAT, "name": name, "machine": getattr(trace.machine, "name", ""), "mode": trace.mode,
        "makespan_us": profile.makespan_us, "lower_bound_us": profile.lower_bound_us,
        "bound_us": {k: v * 1e6 for k, v in dataclasses.asdict(profile.bound).items()},
        "tasks": profile.tasks, "utilisation": dict(profile.utilisation), "idle_us": dict(profile.idle_us),
        "label_us": dict(profile.label_us), "label_tasks": {k: counts.get(k, 0) for k in profile.label_us},
        "critical_path": runs([tasks[t].label or tasks[t].name for t in profile.critical_path]),
        "load": load(profile_spans(trace), dict(profile.lanes)),
        "options": options,
    }


def save_summary(profile, path, *, name: str | None = None, options=None) -> Path:
    """Write :func:`summary` of ``profile`` as JSON to ``path`` (for ``ptojax diff``); returns the path."""
    check_profile("pj.report.save_summary", profile)
    path = output_path(path, "pj.report.save_summary")
    path.write_text(json.dumps(summary(profile, name=name, options=options), indent=1, default=str))
    return path


def _from_chrome(trace: dict) -> dict:
    """A summary from a Chrome trace (``Profile.save``): no lower bound (the trace does not hold it).
    A malformed trace raises AttributeError, KeyError, TypeError or ValueError."""
    lanes, kinds, busy, label_us, label_tasks, span = {}, {}, {}, {}, {}, 0.0
    events = trace["traceEvents"]
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            kind = e["args"]["name"].split(" ")[0]
            lanes[kind] = lanes.get(kind, 0) + 1
            kinds[e.get("pid"), e.get("tid")] = kind
    n = 0
    for e in events:
        if e.get("ph") != "X":
            continue
        if not all(isinstance(e.get(k), (int, float)) for k in ("ts", "dur")):
            raise ValueError(f"event {e.get('name')!r}: ts and dur must be numbers")
        n += 1
        kind = kinds.get((e.get("pid"), e.get("tid")), e.get("cat", ""))     # the lane's kind: "host" on a host run
        busy[kind] = busy.get(kind, 0.0) + e["dur"]
        label_us[e["name"]] = label_us.get(e["name"], 0.0) + e["dur"]
        label_tasks[e["name"]] = label_tasks.get(e["name"], 0) + 1
        span = max(span, e["ts"] + e["dur"])
    name = next((e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"), "")
    util = {k: busy.get(k, 0.0) / (max(span, 1e-12) * c) for k, c in lanes.items()}
    label_us = dict(sorted(label_us.items(), key=lambda kv: -kv[1]))
    spans, cores = chrome_spans(events)
    return {"format": SUMMARY_FORMAT, "name": name, "machine": name, "mode": "", "makespan_us": span,
            "lower_bound_us": None, "bound_us": {}, "tasks": n, "utilisation": util,
            "idle_us": {k: span * lanes[k] - busy.get(k, 0.0) for k in lanes}, "label_us": label_us,
            "label_tasks": {k: label_tasks[k] for k in label_us}, "critical_path": [],
            "load": load(spans, cores), "options": None}


_FIELDS = {"makespan_us": (int, float), "tasks": int, "utilisation": dict, "label_us": dict, "label_tasks": dict}


def load_summary(source) -> dict:
    """A summary from a :class:`Profile`, a summary dict, or a path to a summary or Chrome trace JSON; a
    source that is none of these raises :class:`PtoArgumentError` saying why (and naming the file)."""
    if hasattr(source, "trace") and hasattr(source, "makespan_us"):
        return summary(source)
    where = ""
    if isinstance(source, (str, Path)):
        where = f"{source}: "
        try:
            with open(source) as f:
                source = json.load(f)
        except ValueError as err:                       # JSONDecodeError, UnicodeDecodeError
            raise PtoArgumentError(f"ptojax diff: {where}not JSON ({type(err).__name__}: {err})") from None
        except OSError as err:                          # no such file, a folder, no permission
            raise PtoArgumentError(f"ptojax diff: {where}cannot read it ({type(err).__name__}: "
                                   f"{err.strerror or err})") from None
    if isinstance(source, dict) and "traceEvents" in source:
        try:
            return _from_chrome(source)
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise PtoArgumentError(f"ptojax diff: {where}not a valid Chrome trace of a profile "
                                   f"({type(err).__name__}: {err})") from None
    if isinstance(source, dict) and source.get("format") == SUMMARY_FORMAT:
        bad = [k for k, types in _FIELDS.items() if not isinstance(source.get(k), types)]
        if bad:
            raise PtoArgumentError(f"ptojax diff: {where}not a valid profile summary (fields missing or of the "
                                   f"wrong type: {', '.join(bad)})")
        return source
    got = "" if where else f", not {_WHAT.get(type(source).__name__, 'a ' + type(source).__name__)}"
    raise PtoArgumentError(f"ptojax diff: {where}expected a Profile, a profile summary (ptojax.report.save_summary, "
                           "ptojax profile --summary) or a Chrome trace JSON (Profile.save, ptojax profile --trace)"
                           + got)


@dataclasses.dataclass
class Diff:
    """Two profile summaries side by side; ``str(diff)`` is the table, ``rows`` its lines as tuples
    ``(what, before, after, change)`` (numbers; None where a side lacks the figure)."""

    before: dict
    after: dict
    rows: list

    @property
    def makespan_ratio(self) -> float:
        """Makespan after / before (below 1: faster; 1 for two runs of no time, inf from none to some)."""
        before, after = self.before["makespan_us"], self.after["makespan_us"]
        return after / before if before else (1.0 if not after else float("inf"))

    def __str__(self) -> str:
        return format_diff(self)


def diff(before, after) -> Diff:
    """Compare two profiles (see :func:`load_summary` for what each may be)."""
    a, b = load_summary(before), load_summary(after)
    rows = [("makespan us", a["makespan_us"], b["makespan_us"]),
            ("lower bound us", a.get("lower_bound_us"), b.get("lower_bound_us")),
            ("tasks", a["tasks"], b["tasks"])]
    for kind in sorted(set(a["utilisation"]) | set(b["utilisation"]), key=kind_order):
        rows.append((f"utilisation {kind} %", _pct(a["utilisation"].get(kind)), _pct(b["utilisation"].get(kind))))
    ka, kb = _kinds(a), _kinds(b)
    for kind in sorted(set(ka) | set(kb), key=kind_order):
        x, y = ka.get(kind), kb.get(kind)
        rows.append((f"{kind} busy max / mean", x and x["max_over_mean"], y and y["max_over_mean"]))
        rows.append((f"{kind} flagged cores", x and len({*x["over"], *x["under"]}),
                     y and len({*y["over"], *y["under"]})))
        rows.append((f"{kind} idle cores", x and len(x["idle"]), y and len(y["idle"])))
    if "load" in a or "load" in b:
        rows.append(("single-core labels", _single(a), _single(b)))
    labels = list(a["label_us"]) + [k for k in b["label_us"] if k not in a["label_us"]]
    for lab in labels:                                  # "label ...": never one of the rows above
        rows.append((f"label {lab} us", a["label_us"].get(lab), b["label_us"].get(lab)))
        rows.append((f"label {lab} tasks", a["label_tasks"].get(lab), b["label_tasks"].get(lab)))
    out = [(w, x, y, None if x is None or y is None else y - x) for w, x, y in rows]
    return Diff(a, b, out)


def _kinds(s: dict) -> dict:
    """The load figures per core kind, flagged by the current rule (a summary saved by an older one too)."""
    return {kind: flags(k["busy_us"], k["tasks"], k.get("stages")) for kind, k in s.get("load", {}).get("kinds", {}).items()}


def _single(s: dict):
    return len(s["load"]["single_core"]) if "load" in s else None


def _pct(u):
    return None if u is None else 100.0 * u


def _num(v, integer=False) -> str:
    if v is None:
        return "-"
    return f"{v:d}" if integer else f"{v:.2f}"


def format_diff(d: Diff) -> str:
    """The text table of a :class:`Diff` (what ``str(diff)`` returns); its columns widen to fit."""
    if not isinstance(d, Diff):
        raise wrong("pj.report.format_diff", "d", "a Diff (pj.report.diff(before, after))", d)
    cells = [("", "before", "after", "change", "")]
    for what, x, y, change in d.rows:
        integer = what == "tasks" or what.endswith((" tasks", " cores", " labels"))
        rel = ""
        if change is not None and x and not what.startswith("utilisation"):
            pct = 100.0 * change / x
            rel = f"{pct:+.1f}%" if round(pct, 1) else "+0.0%"          # (no -0.0%)
        if change is not None and not integer:          # the change of the figures as printed
            change = round(y, 2) - round(x, 2) + 0.0    # (+ 0.0: no -0.00)
        ch = "-" if change is None else (f"{change:+d}" if integer else f"{change:+.2f}")
        cells.append((what, _num(x, integer), _num(y, integer), ch, rel))
    widths = [max(minimum, 2 + max(_width(row[i]) for row in cells)) for i, minimum in enumerate((22, 11, 11, 11, 9))]
    return "\n".join((row[0] + " " * (widths[0] - _width(row[0]))
                      + "".join(" " * (w - _width(c)) + c for c, w in zip(row[1:], widths[1:]))).rstrip()
                     for row in cells)


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal: two for a wide (CJK, emoji) character, none for a combining one."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


__all__ = ["SUMMARY_FORMAT", "Diff", "check_profile", "diff", "format_diff", "kind_order", "load_summary", "runs",
           "save_summary", "summary", "wrong"]
