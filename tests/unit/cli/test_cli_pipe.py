"""``region-failover regions big.json | head -c 10``: the reader closing the pipe early ends the command quietly
(exit 1, nothing on stderr), not with a ``BrokenPipeError`` traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_a_closed_pipe_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    steps = [{"id": f"s{i}", "parallelism": 4} for i in range(3000)]  # regions JSON of ~1 MB: more than a pipe holds
    edges = [{"from": f"s{i}", "to": f"s{i + 1}", "exchange": "BLOCKING", "distribution": "POINTWISE"}
             for i in range(2999)]
    graph = tmp_path / "big.json"
    graph.write_text(json.dumps({"version": 2, "steps": steps, "edges": edges}))
    command = subprocess.Popen([sys.executable, "-m", "airflow_region_failover", "regions", str(graph)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert command.stdout is not None and command.stderr is not None
    assert command.stdout.read(10)
    command.stdout.close()  # what `head -c 10` does
    errors = command.stderr.read().decode()
    assert command.wait(timeout=60) == 1 and errors == "", errors
