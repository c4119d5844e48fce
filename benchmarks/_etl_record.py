"""The record (``benchmarks/_record.py``) of one ``bench_etl_compare.py`` or ``bench_breakdown.py`` run, for their
``--record PATH``.

One round per (size, round number), in the order the rounds ran; its label says the size, the round and the order
of the configurations in it. Its values, per configuration ``c``: ``c_s`` (wall time without a failure) and
``c_fail_s`` (with the late failure), and ours ÷ each other configuration, ``ours_over_c`` and
``ours_over_c_fail``; for ``auto`` also ``auto_over_app``, the model's prediction of the run (``auto_predicted_s``)
and its ratio to the measured wall (``auto_predicted_over_measured``); and, where a round ran auto, ours and (a) both
with and without the failure, the issue's expected completion time at a rate ``r`` of runs with a late failure,
``E(r) = (1 − r) · T(no failure) + r · T(late failure)``, as auto's ÷ the better of ours' (every AUTO result
BLOCKING) and (a)'s, ``auto_expected_over_best_r<r>`` for each r of :data:`RATES`. With more than one size
every name ends in ``@<size>`` (``ours_fail_s@5gb``), so that a figure never mixes sizes. The figures: each ratio,
and ours' and (a)'s wall times, over the rounds.
"""

from __future__ import annotations

from typing import Any

from _record import SCHEMA, Figure, Record, Round, Value

NAMES = {"app": "(a) one Spark application", "plain": "(b) plain Airflow with Spark's s3a writer",
         "plain_store": "(b) plain Airflow on the provider's store"}
RATES = (0.0, 0.05, 0.2, 0.5)
"""The rates of runs with a late failure that E(r) is figured at (issue 47's targets)."""


def _rounds(runs: list[dict[str, Any]], several: bool) -> list[Round]:
    """The runs (as ``--json`` writes them: size, config, fail, wall_s) grouped into rounds, in run order."""
    seen: dict[tuple[str, bool, str], int] = {}
    walls: dict[tuple[str, int], dict[tuple[str, bool], float]] = {}
    predicted: dict[tuple[str, int], dict[bool, float]] = {}
    for run in runs:
        key = (run["size"], run["fail"], run["config"])
        number = seen[key] = seen.get(key, 0) + 1
        walls.setdefault((run["size"], number), {})[(run["config"], run["fail"])] = float(run["wall_s"])
        chosen = (run.get("predicted") or {}).get("chosen")
        if chosen:
            predicted.setdefault((run["size"], number), {})[run["fail"]] = float(chosen["expected_s"])
    rounds = []
    for (size, number), wall in walls.items():
        suffix = f"@{size}" if several else ""
        values = [Value(f"{config}{'_fail' if fail else ''}_s{suffix}", w) for (config, fail), w in wall.items()]
        values += [Value(f"ours_over_{config}{'_fail' if fail else ''}{suffix}", round(wall[("ours", fail)] / w, 3))
                   for (config, fail), w in wall.items() if config != "ours" and ("ours", fail) in wall]
        values += [Value(f"auto_over_app{'_fail' if fail else ''}{suffix}", round(w / wall[("app", fail)], 3))
                   for (config, fail), w in wall.items() if config == "auto" and ("app", fail) in wall]
        for fail, expected in predicted.get((size, number), {}).items():  # the model against the auto run
            failed = "_fail" if fail else ""
            values += [Value(f"auto_predicted{failed}_s{suffix}", round(expected, 1)),
                       Value(f"auto_predicted_over_measured{failed}{suffix}", round(expected / wall[("auto", fail)],
                                                                                    3))]
        values += _expected(wall, suffix)
        order = list(dict.fromkeys(config for config, _ in wall))
        rounds.append(Round(f"{size}, round {number} ({', '.join(order)})", tuple(values)))
    return rounds


def _expected(wall: dict[tuple[str, bool], float], suffix: str) -> list[Value]:
    """E(r) of auto ÷ min(E(r) of ours, E(r) of (a)) for each r of :data:`RATES` (module rule); none unless the
    round ran all three with and without the failure."""
    if any((config, fail) not in wall for config in ("auto", "ours", "app") for fail in (False, True)):
        return []

    def expected(config: str, rate: float) -> float:
        return (1 - rate) * wall[(config, False)] + rate * wall[(config, True)]

    return [Value(f"auto_expected_over_best_r{rate:g}{suffix}",
                  round(expected("auto", rate) / min(expected("ours", rate), expected("app", rate)), 3))
            for rate in RATES]


def _figures(rounds: list[Round], only: str) -> list[Figure]:
    """The figures over ``rounds``; ``only``: the size's label when there is one size (the names carry no size)."""
    names = sorted({v.name for r in rounds for v in r.values})
    figures = []
    for name in names:
        base, _, size = name.partition("@")
        fail = "one late failure" if "_fail" in base else "no failure"
        where = f"ETL {size or only}, {fail}"
        if base.startswith("auto_expected_over_best_r"):
            rate = base.removeprefix("auto_expected_over_best_r")
            figures.append(Figure(f"ETL {size or only}, expected time E(r) at r = {rate} of runs with a late failure: "
                                  f"auto ÷ min(ours, {NAMES['app']})", "×", 2, name, None, None, False, None))
        elif base.startswith("auto_over_app"):
            figures.append(Figure(f"{where}: auto ÷ {NAMES['app']}", "×", 2, name, None, None, False, None))
        elif base.startswith("auto_predicted_over_measured"):
            figures.append(Figure(f"{where}: the model's prediction ÷ auto's wall", "×", 2, name, None, None, False,
                                  None))
        elif base.startswith("ours_over_"):
            other = base.removeprefix("ours_over_").removesuffix("_fail")
            figures.append(Figure(f"{where}: ours ÷ {NAMES.get(other, other)}", "×", 2, name, None, None, False,
                                  None))
        elif base in ("ours_s", "ours_fail_s", "app_s", "app_fail_s"):
            who = "ours" if base.startswith("ours") else "(a)"
            figures.append(Figure(f"{where}: {who}", "s", 1, name, None, None, False, None))
    return figures


def etl_record(record_id: str, runs: list[dict[str, Any]], sizes: list[dict[str, Any]], meta: dict[str, Any],
               script: str = "benchmarks/bench_etl_compare.py") -> Record:
    """The record of ``runs`` at ``sizes`` (``label``, ``orders``, ``customers``, ``gb`` once measured);
    ``meta``: question, command, date, time_utc, commit, machine, load (free text, as the script found them)."""
    rounds = _rounds(runs, several=len(sizes) > 1)
    data = "; ".join(f"{s['label']}: {s['orders']:,} orders, {s['customers']:,} customers"
                     + (f", ours commits {s['gb']:.3f} GB" if "gb" in s else "") for s in sizes)
    return Record(SCHEMA, record_id, meta["question"], script, meta["command"],
                  meta["date"], meta["time_utc"], meta["commit"], data, meta["machine"], meta["load"],
                  tuple(rounds), tuple(_figures(rounds, sizes[0]["label"])), None, None,
                  f"Written by {script.split('/')[-1]} --record; the configurations' order rotates from round to "
                  "round." + _auto_plans(runs))


def _auto_plans(runs: list[dict[str, Any]]) -> str:
    """What the ``auto`` runs ran: each distinct plan (its fused results) per history, with the runs that ran it."""
    seen: dict[tuple[bool, tuple[str, ...]], int] = {}
    why: dict[tuple[bool, tuple[str, ...]], str] = {}
    for run in runs:
        if run["config"] == "auto" and run.get("plan") is not None:
            key = (bool(run["fail"]), tuple(run["plan"]))
            seen[key] = seen.get(key, 0) + 1
            why.setdefault(key, run.get("decision") or "")
    if not seen:
        return ""
    told = [f"{'with the late failure, after late failures' if fail else 'without a failure, after a quiet history'}"
            f": fused {', '.join(plan) if plan else 'nothing (every AUTO result BLOCKING)'} ({count} run(s)"
            + (f"; the decision: {why[(fail, plan)]}" if why[(fail, plan)] else "") + ")"
            for (fail, plan), count in sorted(seen.items())]
    return " The auto runs' plans — " + "; ".join(told) + "."
