"""``benchmarks/replay_predictions.py``: a prediction kept with its history is computed again, offline, as the
plugin computed it; one kept without is listed as such.

    gen_orders -PIPELINED-> clean_orders -AUTO "orders"---+
                                                          +-> join -AUTO-> aggregate -AUTO-> report
    gen_lineitem -PIPELINED-> clean_lineitem -AUTO "lineitem"-+
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_region_failover.planning.history import History
from airflow_region_failover.plugins.advice import advise
from tests.unit.cli.test_advise import HISTORY, _etl_job

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their siblings

from replay_predictions import Saved, expected_of, replay  # noqa: E402 - after the path


def _bench(history: object, job: object = None) -> list[object]:
    """A bench ``--json`` file's shape: a measured run with its prediction and history (and ``job``, if any), a
    history run without."""
    predicted = {"chosen": {"expected_s": 123.4}, "history": history, **({"job": job} if job else {})}
    kept = {"run_id": "m1", "dag_id": "etl", "wall_s": 400.0, "predicted": predicted}
    old = {"run_id": "h1", "wall_s": None, "predicted": {"chosen": {"expected_s": 99.0}}}
    return [{"size": {"label": "5gb"}, "runs": {"ours@60": kept}, "history": [old]}]


def test_a_kept_history_replays_the_advice_and_one_without_is_listed(tmp_path: Path) -> None:
    history = json.loads(Path(HISTORY).read_text())
    spec = _etl_job()
    expected = expected_of(advise("etl", spec, Saved(History.from_json(history))))
    rows = replay(_bench(history), spec, "etl")
    assert [r["run"] for r in rows] == ["0/runs/ours@60/m1", "0/history/0/h1"]
    assert rows[0]["replayed_s"] == round(expected, 1) and rows[0]["predicted_then_s"] == 123.4
    assert rows[0]["history_runs"] == len(history["runs"]) and rows[1]["replayed_s"] is None

    (tmp_path / "bench.json").write_text(json.dumps(_bench(history)))
    (tmp_path / "job.json").write_text(json.dumps(spec.to_document()))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "replay_predictions.py"), "--json",
                           str(tmp_path / "bench.json"), "--job", str(tmp_path / "job.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"{expected:.1f}" in lines[1] and f"{expected / 400.0:.2f}" in lines[1]
    assert lines[2].endswith("(no history kept)")


def test_the_job_kept_beside_a_prediction_is_the_one_replayed() -> None:
    history = json.loads(Path(HISTORY).read_text())
    spec = _etl_job()
    assert replay(_bench(history, spec.to_document()), None) == replay(_bench(history), spec, "etl")
    with pytest.raises(SystemExit, match="no job document kept beside its prediction; pass --job FILE"):
        replay(_bench(history), None)
