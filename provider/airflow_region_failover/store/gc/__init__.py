"""When stored results are deleted: the sweeper and its rules (:mod:`.lifecycle`: runs past their retention, holds,
a live writer's heartbeat and the run record the write path leaves, :func:`~.lifecycle.record_run`), and which
shared content-addressed objects are still referenced (:mod:`.registry`)."""
