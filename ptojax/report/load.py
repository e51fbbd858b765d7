"""Per-core load: busy time per simulated core, its mean per core kind, the cores far from that mean,
and the labels whose tiles all went to one core.

Rule: among the cores of a kind that ran tasks (``busy``), a core is flagged ``over`` when its busy time
is above ``HIGH`` (1.25) x their mean busy time, ``under`` when below ``LOW`` (0.75) x that mean; the
cores that ran no task are ``idle``, counted apart and not flagged (a small kernel leaves most cores
idle; that is its grid, shown by the idle count, not an imbalance). A label is flagged ``single_core``
when it has more than one tile (grid point) on a core kind, all of its tasks there ran on one core, and
the machine has more cores of that kind. Figures come from task spans ``(kind, core, label, µs)``: a
profile's records or a Chrome trace's events.
"""
from __future__ import annotations

HIGH, LOW = 1.25, 0.75
RULE = (f"a core that ran tasks is flagged when its busy time is above {HIGH}x or below {LOW}x the mean of the "
        "cores of its kind that ran tasks; cores that ran none are counted as idle, not flagged; a label when all "
        "of its tiles (more than one) on a core kind ran on one core of several")


def load(spans, cores: dict, tiles: dict | None = None) -> dict:
    """The load figures (JSON-able) of ``spans`` — ``(kind, core, label, busy µs)`` per task — on a machine
    with ``cores`` (kind -> count; a kind met in ``spans`` but not listed counts its distinct cores).
    ``tiles``: label -> kind -> grid points, where known; else each task counts as one tile."""
    busy: dict = {}
    tasks: dict = {}
    where: dict = {}                        # (label, kind) -> {core: tasks}
    for kind, core, label, us in spans:
        busy.setdefault(kind, {}).setdefault(core, 0.0)
        busy[kind][core] += us
        tasks.setdefault(kind, {}).setdefault(core, 0)
        tasks[kind][core] += 1
        on = where.setdefault((label, kind), {})
        on[core] = on.get(core, 0) + 1
    kinds = {}
    for kind in sorted(busy, key=lambda k: ({"AIC": 0, "AIV": 1}.get(k, 2), k)):
        n = max(cores.get(kind, 0), len(busy[kind]), 1 + max(busy[kind]))
        kinds[kind] = flags([busy[kind].get(c, 0.0) for c in range(n)], [tasks[kind].get(c, 0) for c in range(n)])
    labels = []
    for (label, kind), on in sorted(where.items()):
        n_tiles = (tiles or {}).get(label, {}).get(kind, sum(on.values()))
        single = len(on) == 1 and n_tiles > 1 and kinds[kind]["cores"] > 1
        labels.append({"label": label, "kind": kind, "tasks": sum(on.values()), "tiles": n_tiles,
                       "cores": sorted(on), "single_core": single})
    return {"rule": RULE, "high": HIGH, "low": LOW, "kinds": kinds, "labels": labels,
            "single_core": [f"{x['label']} ({x['kind']} {x['cores'][0]})" for x in labels if x["single_core"]]}


def flags(per: list, count: list) -> dict:
    """A core kind's load figures from its cores' busy µs ``per`` and task counts ``count`` (the rule
    above): the mean, max and min of the busy cores, and the ``over``, ``under`` and ``idle`` cores."""
    used = [c for c in range(len(per)) if count[c]]
    busy = [per[c] for c in used] or [0.0]
    mean = sum(busy) / len(busy)
    return {"cores": len(per), "busy_us": per, "tasks": count, "busy_cores": len(used), "mean_us": mean,
            "max_us": max(busy), "min_us": min(busy), "max_over_mean": max(busy) / mean if mean else 0.0,
            "over": [c for c in used if mean and per[c] > HIGH * mean],
            "under": [c for c in used if mean and per[c] < LOW * mean],
            "idle": [c for c in range(len(per)) if not count[c]]}


def profile_spans(trace) -> list:
    """``(kind, core, label, busy µs)`` per task of a :class:`~ptojax.mpmd.Trace` (host lanes: kind ``host``)."""
    return [("host" if r.host else r.kind, r.core, r.title, (r.end - r.start) * 1e6) for r in trace.records]


def chrome_spans(events) -> tuple[list, dict, dict]:
    """``(spans, cores per kind, tiles)`` of a Chrome trace's events (``Profile.save``); ``tiles`` is
    label -> kind -> grid points, from each event's ``points`` (1 where a trace has none)."""
    lanes = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            kind, _, core = e["args"]["name"].partition(" ")
            lanes[e["tid"]] = (kind, int(core))
    cores: dict = {}
    for kind, _ in lanes.values():
        cores[kind] = cores.get(kind, 0) + 1
    spans, tiles = [], {}
    for e in events:
        if e.get("ph") == "X":
            kind, core = lanes[e["tid"]]
            spans.append((kind, core, e["name"], e["dur"]))
            kinds = tiles.setdefault(e["name"], {})
            kinds[kind] = kinds.get(kind, 0) + e.get("args", {}).get("points", 1)
    return spans, cores, tiles


__all__ = ["HIGH", "LOW", "RULE", "chrome_spans", "flags", "load", "profile_spans"]
