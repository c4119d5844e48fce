"""The failover view drawn without Airflow calls: :mod:`.layout` (a small layered layout, no Graphviz binary on the
API server), :mod:`.svg` (steps, subtask cells coloured by state, regions as bands, each decision's reasons) and
:mod:`.page` (the run view's JSON model, its timeline, the HTML of the run and dry-run pages). The routes are
:mod:`~airflow_region_failover.plugins.views`."""
