"""Per-core load: busy time per simulated core, its mean per core kind, the cores a block call loaded
more or less than the others it ran on, and the labels whose tiles all went to one core.

Rule: a core is judged within each block call (stage), against the other cores of its kind that ran
tasks of that call: it is flagged ``over`` when its busy time in the call is above ``HIGH`` (1.25) x
their mean, ``under`` when below ``LOW`` (0.75) x that mean -- more tiles than the others, or costlier
ones (a tail tile). Busy time summed over the whole run is not judged: block calls that run one after
another with fewer tasks than cores leave the lowest-numbered cores busier, and no redistribution
shortens that. The cores that ran no task are ``idle``, counted apart and not flagged (a small kernel
leaves most cores idle; that is its grid, shown by the idle count, not an imbalance). A label is
flagged ``single_core`` when a block call gave it more than one tile (grid point) on a core kind, all of
that call's tasks of it ran on one core, and the machine has more cores of that kind (one-tile calls
that run one after another, a loop's trips, are not: nothing can spread them). Figures come from task
spans ``(kind, core, label, µs, block call, grid points)``: a profile's records or a Chrome trace's
events (without the block call, as an older trace, the run counts as one call).
"""
from __future__ import annotations

HIGH, LOW = 1.25, 0.75
RULE = (f"a core is flagged when its busy time in a block call is above {HIGH}x or below {LOW}x the mean of the "
        "cores of its kind that ran tasks of that call (busy time over the whole run is not judged: calls that "
        "cannot use every core leave the first cores busier); cores that ran none are counted as idle, not "
        "flagged; a label when all of its tiles (more than one) on a core kind in one block call ran on one core of "
        "several")


def load(spans, cores: dict) -> dict:
    """The load figures (JSON-able) of ``spans`` — ``(kind, core, label, busy µs[, block call[, grid
    points]])`` per task — on a machine with ``cores`` (kind -> count; a kind met in ``spans`` but not
    listed counts its distinct cores). A span without its grid points counts one."""
    busy: dict = {}
    tasks: dict = {}
    where: dict = {}                        # (label, kind) -> {core: tasks}
    calls: dict = {}                        # kind -> block call -> core -> [busy µs, tasks, labels]
    grids: dict = {}                        # (label, kind) -> block call -> [grid points, cores]
    for span in spans:
        kind, core, label, us = span[:4]
        call = span[4] if len(span) > 4 else None
        busy.setdefault(kind, {}).setdefault(core, 0.0)
        busy[kind][core] += us
        tasks.setdefault(kind, {}).setdefault(core, 0)
        tasks[kind][core] += 1
        on = where.setdefault((label, kind), {})
        on[core] = on.get(core, 0) + 1
        mine = calls.setdefault(kind, {}).setdefault(call, {}).setdefault(core, [0.0, 0, set()])
        mine[0] += us
        mine[1] += 1
        mine[2].add(label)
        grid = grids.setdefault((label, kind), {}).setdefault(call, [0, set()])
        grid[0] += span[5] if len(span) > 5 else 1
        grid[1].add(core)
    kinds = {}
    for kind in sorted(busy, key=lambda k: ({"AIC": 0, "AIV": 1}.get(k, 2), k)):
        n = max(cores.get(kind, 0), len(busy[kind]), 1 + max(busy[kind]))
        stages = [{"stage": call, "labels": sorted(set().union(*(x[2] for x in on.values()))), "cores": sorted(on),
                   "busy_us": [on[c][0] for c in sorted(on)], "tasks": [on[c][1] for c in sorted(on)]}
                  for call, on in sorted(calls[kind].items(), key=lambda kv: (kv[0] is not None, kv[0] or 0))
                  if len(on) > 1]       # a call on one core has no other core to be judged against
        kinds[kind] = flags([busy[kind].get(c, 0.0) for c in range(n)], [tasks[kind].get(c, 0) for c in range(n)],
                            stages)
    labels = []
    for (label, kind), on in sorted(where.items()):
        per_call = grids[(label, kind)].values()
        lone = [next(iter(cs)) for points, cs in per_call if points > 1 and len(cs) == 1]
        single = bool(lone) and kinds[kind]["cores"] > 1
        labels.append({"label": label, "kind": kind, "tasks": sum(on.values()),
                       "tiles": sum(points for points, _ in per_call), "cores": sorted(on), "single_core": single,
                       "single_core_on": lone[0] if single else None})
    return {"rule": RULE, "high": HIGH, "low": LOW, "kinds": kinds, "labels": labels,
            "single_core": [f"{x['label']} ({x['kind']} {x['single_core_on']})" for x in labels if x["single_core"]]}


def flags(per: list, count: list, stages: list | None = None) -> dict:
    """A core kind's load figures from its cores' busy µs ``per`` and task counts ``count`` over the run
    (the mean, max and min of the busy cores, the ``idle`` cores) and, by the rule above, the ``over`` and
    ``under`` cores from ``stages``: per block call on more than one core, its ``cores`` and their
    ``busy_us`` (and ``tasks``, ``labels``) in it. ``stages`` None (a summary saved without them): the
    run counts as one call. ``ratio``: per core, its busy time in a call over that call's mean, the one
    farthest from 1 (1 for a core only ever alone in a call, 0 for an idle one); ``max_over_mean``: the
    largest such ratio."""
    used = [c for c in range(len(per)) if count[c]]
    if stages is None:
        stages = [{"stage": None, "labels": [], "cores": used, "busy_us": [per[c] for c in used],
                   "tasks": [count[c] for c in used]}] if len(used) > 1 else []
    busy = [per[c] for c in used] or [0.0]
    ratio = [1.0 if count[c] else 0.0 for c in range(len(per))]
    over, under, judged = set(), set(), []
    for st in stages:
        mean = sum(st["busy_us"]) / len(st["busy_us"]) if st["busy_us"] else 0.0
        rs = [b / mean if mean else 1.0 for b in st["busy_us"]]
        high = [c for c, r in zip(st["cores"], rs) if r > HIGH]
        low = [c for c, r in zip(st["cores"], rs) if r < LOW]
        over.update(high)
        under.update(low)
        for c, r in zip(st["cores"], rs):
            if c < len(ratio) and abs(r - 1.0) > abs(ratio[c] - 1.0):
                ratio[c] = r
        judged.append({**st, "mean_us": mean, "max_over_mean": max(rs, default=0.0), "over": high, "under": low})
    return {"cores": len(per), "busy_us": per, "tasks": count, "busy_cores": len(used),
            "mean_us": sum(busy) / len(busy), "max_us": max(busy), "min_us": min(busy),
            "max_over_mean": max([s["max_over_mean"] for s in judged] or [1.0 if used else 0.0]),
            "over": sorted(over), "under": sorted(under),
            "idle": [c for c in range(len(per)) if not count[c]], "ratio": ratio, "stages": judged}


def profile_spans(trace) -> list:
    """``(kind, core, label, busy µs, block call, grid points)`` per task of a :class:`~ptojax.mpmd.Trace`
    (host lanes: kind ``host``)."""
    tasks = trace.graph.tasks
    return [("host" if r.host else r.kind, r.core, r.title, (r.end - r.start) * 1e6, r.stage, tasks[r.tid].points)
            for r in trace.records]


def chrome_spans(events) -> tuple[list, dict]:
    """``(spans, cores per kind)`` of a Chrome trace's events (``Profile.save``); a span's grid points are
    its event's ``points`` (1 where a trace has none)."""
    lanes = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            kind, _, core = e["args"]["name"].partition(" ")
            lanes[e["tid"]] = (kind, int(core))
    cores: dict = {}
    for kind, _ in lanes.values():
        cores[kind] = cores.get(kind, 0) + 1
    spans = []
    for e in events:
        if e.get("ph") == "X":
            kind, core = lanes[e["tid"]]
            args = e.get("args", {})
            spans.append((kind, core, e["name"], e["dur"], args.get("stage"), args.get("points", 1)))
    return spans, cores


__all__ = ["HIGH", "LOW", "RULE", "chrome_spans", "flags", "load", "profile_spans"]
