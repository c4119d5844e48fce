"""PURE: which plan of its AUTO exchanges a run should get, from what earlier runs measured.

What runs measured (:mod:`.history`), the figures and failure rate drawn from it (:mod:`.estimates`,
:mod:`.rate`), the one formula for a plan's expected completion time and spread (:mod:`.model`), the choice with
its minimum history and hysteresis (:mod:`.choice`), and checkpointed steps' epochs (:mod:`.epochs`,
Young/Daly). Imports only the standard library and :mod:`airflow_region_failover.graph`.
"""
