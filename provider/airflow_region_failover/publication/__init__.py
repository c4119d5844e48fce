"""Publishing a sink step's final result exactly once per run as a Delta Lake table commit.

:mod:`.declaration` (what a published sink declares and which application transaction makes a run publish once —
pure, read at parse time), :mod:`.staging` (the table's data files before and after the commit), :mod:`.delta`
(the Delta commit through delta-rs) and :mod:`.operator` (the Airflow task that publishes once the sink's
subtasks succeeded)."""
