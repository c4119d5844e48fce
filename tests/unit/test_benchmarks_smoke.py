"""Smoke test of the benchmarks: both scripts' ``--quick`` mode runs and prints its result table.

No timing is asserted (the machine is shared and noisy); only that the scripts run, print their tables, and that
the planner benchmark's fast path and brute force agree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _table_rows(output: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in output.splitlines() if line.startswith("|")]


def test_bench_planner_quick_prints_both_tables() -> None:
    out = _run("bench_planner.py")
    assert "## Fast path at full size" in out
    assert "## Side by side at the brute force's size" in out
    rows = _table_rows(out)
    cases = {"a-blocking", "a-pipelined", "b-flink-batch", "b-flink-stream", "c-random-dag", "d-pipelines"}
    assert {r[0] for r in rows} >= cases
    side_by_side = [r for r in rows if r[0] in cases and r[-1] in {"yes", "NO"} and "x" in r[-4]]
    assert len(side_by_side) == len(cases)
    assert all(r[-1] == "yes" for r in side_by_side), out
    assert "fast and brute force agree: yes" in out


def test_sim_recovery_quick_prints_the_table() -> None:
    out = _run("sim_recovery.py")
    rows = _table_rows(out)
    header = rows[0]
    assert header[0] == "family"
    column = {name: header.index(name) for name in ("reuse/min mean", "region/min mean", "full/min mean")}
    assert {"reuse/min p95", "region/min p95", "full/min p95", "reuse = min"} <= set(header)
    families = [r[0].split(" ")[0] for r in rows[2:] if not r[0].startswith("…")]
    assert families == ["pipelines", "tpch", "shuffles"]
    for row in rows[2:]:
        reuse, region, full = (float(row[i]) for i in column.values())
        assert 1.0 <= reuse <= region <= full  # minimal ⊆ region+reuse ⊆ region ⊆ full: every ratio is >= 1


def test_bench_chunking_quick_prints_ratios_for_every_share() -> None:
    out = _run("bench_chunking.py", "--patterns", "uniform")
    rows = [r for r in _table_rows(out) if r[0].startswith(("plain", "chunked"))]
    versions = {r[1] for r in rows}
    assert versions == {"0% uniform", "1% uniform", "10% uniform", "50% uniform"}
    for row in rows:
        ratio = float(row[2])
        assert 0.0 <= ratio <= 1.0
        if row[1] == "0% uniform":
            assert ratio == 0.0, row  # an unchanged result re-encodes to the very same bytes
    assert "## lower bound: the changed rows alone" in out
