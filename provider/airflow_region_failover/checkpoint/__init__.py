"""Checkpointed steps (Flink's checkpoints for PySpark batch steps: its stream fault tolerance,
incremental checkpoints and key groups): a step processes its
BLOCKING input in ordered epochs with keyed state, commits a checkpoint at epoch boundaries, and a later try resumes
from the latest complete checkpoint that matches it. The declaration and options are
:mod:`airflow_region_failover.failover.checkpointing`; a checkpoint's record is :mod:`~..store.checkpoint_manifest`.

Modules, each answering one question:

* how the input is cut into epochs — :mod:`.plan` (pure);
* how keyed state is stored as sorted runs, diffed and merged — :mod:`.lsm` (Arrow only);
* when runs are compacted and which checkpoints are retained — :mod:`.policy` (pure);
* where checkpoints live in the store — :mod:`.storage`;
* which checkpoint a try resumes and with which state it starts — :mod:`.resume`;
* the epoch loop itself — :mod:`.runner` (any engine; the Spark one is :mod:`~..spark.checkpointed`).
"""
