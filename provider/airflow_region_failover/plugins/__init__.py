"""The Airflow plugin: the failover listener (:mod:`.listener`), the scheduler's watcher (:mod:`.watcher`) with its
metadata-DB probes (:mod:`.metadata_db`), who performs a restart (:mod:`.clearing`, through Airflow's REST API,
:mod:`.rest`), and the failover history (:mod:`.history`, :mod:`.views`). :mod:`.plugin` registers them.

Importing this package imports nothing heavy; the plugin class lives in :mod:`.plugin`.
"""
