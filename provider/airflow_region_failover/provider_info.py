"""Provider metadata read by Airflow's ``ProvidersManager`` through the ``apache_airflow_provider`` entry point.

Rule: this module imports nothing but ``typing`` (Airflow calls it during provider discovery), so it is a leaf of
the import layers that :mod:`.conf` reads. ``package-name`` equals the distribution name; the
``[region_failover]`` section (:data:`CONFIG_OPTIONS`) is the one source of every option the provider reads: its
name, its one default and its description. ``airflow config list`` shows them, and :mod:`.conf` has one typed
getter per option that falls back to the default declared here (``tests/unit/test_conf.py`` checks both ways).
Each option is typed as its getter in :mod:`.conf` returns it (``boolean``, ``integer``, ``float``; JSON objects and
the rest ``string``; ``tests/unit/packaging/test_provider_info_typed.py``). The plugin is registered through the
``airflow.plugins`` entry point, which is what loads it (provider-info plugins are ignored under lazy provider
discovery); ``plugins`` lists the same class so ``airflow providers get`` shows it. The integration's doc link is
this provider's docs (``docs/`` of the source distribution: there is no public site yet).
"""

from __future__ import annotations

from typing import Any, NamedTuple

PACKAGE_NAME = "airflow-provider-region-failover"
CONFIG_SECTION = "region_failover"

#: connection type -> the provider defining it, and what this provider uses it for.
CONNECTION_TYPES_USED: tuple[str, ...] = (
    "spark_connect (apache-spark provider): Spark Connect server for Python steps",
    "spark (apache-spark provider): master URL for Python steps, spark-submit for script steps",
    "aws (amazon provider): credentials and endpoint_url of the S3 result store",
)



class Option(NamedTuple):
    """A declared option: its default (as airflow.cfg text; ``""``: unset), its description and its type in the
    provider schema's terms (``string``, ``boolean``, ``integer``, ``float``)."""

    default: str
    description: str
    type: str = "string"


#: option -> its declared default, description and type. Failover/restart options use Flink's key names as values.
CONFIG_OPTIONS: dict[str, Option] = {k: Option(*v) for k, v in {
    "enabled": ("True", "Whether the failover loop (the plugin's listener) acts on failed tasks of rendered jobs.",
                "boolean"),
    "api_conn_id": (
        "region_failover_api",
        "Connection (http://login:password@host:port of the api-server; extra 'token' optional) through which the "
        "failover loop clears task instances with Airflow's public REST API.",
    ),
    "watch_interval": (
        "1.0",
        "Seconds between two passes of the scheduler-side watcher that applies pending restart decisions and "
        "detects failed step tasks that fired no listener (e.g. a SIGKILLed task process).",
        "float",
    ),
    "watch_lookback": (
        "600.0",
        "Seconds of history the watcher re-reads when the scheduler starts, so a decision still pending in the "
        "decision log survives a scheduler restart; also how long it keeps watching a run after the run ended.",
        "float",
    ),
    "max_start_delay": (
        "3600.0",
        "Upper bound, in seconds, of the restart delay a restarted task waits before executing (a guard against a "
        "misconfigured backoff).",
        "float",
    ),
    "failover_strategy": (
        "region",
        "Default failover strategy of a job (Flink's jobmanager.execution.failover-strategy): 'region' restarts "
        "the failed region, producers whose BLOCKING results are unavailable and every downstream consumer "
        "region; 'full' restarts every task of the run.",
    ),
    "restart_strategy": (
        "fixed-delay",
        "Default restart backoff strategy (Flink's restart-strategy.type): none, fixed-delay, failure-rate or "
        "exponential-delay.",
    ),
    "restart_strategy_options": (
        '{"restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "1 s"}',
        "Further default failover/restart options as a JSON object of Flink keys to values, e.g. "
        '{"restart-strategy.exponential-delay.initial-backoff": "1 s"}. A job\'s own options override them.',
    ),
    "non_recoverable_errors": (
        "AnalysisException;SyntaxError;NameError",
        "Default exception classes (Flink's restart-strategy.non-recoverable-errors: names separated by ';', simple "
        "or qualified, matched against the failure's class and its base classes) whose failure ends the run with "
        "a 'not-recoverable' decision instead of a restart: Spark's AnalysisException (a misspelt column or table, "
        "a type mismatch, bad SQL: the plan is wrong, every try fails alike) and Python's SyntaxError and NameError "
        "(the code is wrong). Empty: none. A job's restart-strategy.non-recoverable-errors and a step's "
        "non_recoverable_errors override it.",
        "string",
    ),
    "store_keep_last_runs": ("", "Retention: keep the results of the last N finished runs per DAG (empty: no limit).",
                             "integer"),
    "store_keep_days": ("", "Retention: keep the results of finished runs for D days (empty: no limit).", "float"),
    "store_min_grace_seconds": (
        "900",
        "The grace floor, in seconds: the shortest grace a sweep of the store accepts (region-failover gc --grace), "
        "and what every writer relies on: while it writes and commits it renews its heartbeat every quarter of it, "
        "and its commit refreshes the objects it lists that are older than half of it and must be issued within "
        "an eighth of it after confirming them (else it confirms again). Set the same value on every worker and "
        "wherever gc runs. Lower it (a number of seconds > 0) only where every commit reaches the store within "
        "an eighth of it: a test stack, a store on the same host.",
        "float",
    ),
    "spark_conn_id": (
        "",
        "Connection used by step operators that name none. Empty: an embedded local Spark session "
        "(spark_master). A 'spark_connect' connection: a Spark Connect server (sc://host:port). A 'spark' "
        "connection: its master URL for Python steps and spark-submit (SparkSubmitHook) for script steps.",
    ),
    "spark_submit_conn_id": (
        "",
        "'spark' connection used to spark-submit script steps that name none (SparkSubmitHook). Empty: "
        "spark-submit on spark_master (local).",
    ),
    "spark_master": ("local[*]", "Master URL of the embedded Spark session used when no connection is set."),
    "spark_conf": (
        '{"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}',
        "Extra Spark configuration (JSON object) for embedded sessions and spark-submit.",
    ),
    "store_bucket": (
        "",
        "S3 bucket of the result store (BLOCKING results, PIPELINED scratch, decision logs). Required: there is no "
        "default, since S3 bucket names are global and a guessed one may belong to someone else; a task or the "
        "failover loop that needs the store without it stops with an error naming this option.",
    ),
    "store_prefix": ("region-failover", "Key prefix of the result store inside the bucket."),
    "store_spark_io": (
        "executors",
        "How Spark reads and writes the store's Parquet objects: 'executors' (each Spark task uploads or reads its "
        "own objects; executors need boto3 and pyarrow and must reach S3) or 'driver' (the step's session "
        "collects a result as Arrow and uploads it; for executors that cannot reach S3, bounded by driver "
        "memory).",
    ),
    "store_verify_jvm_reads": (
        "False",
        "Whether every object Spark's own Parquet reader (store_jvm_io) reads is also streamed and hashed: that "
        "reader trusts the SHA-256 the S3 server keeps with each object, never the bytes it serves. True: a "
        "thread GETs and hashes each object while Spark works, and the step commits nothing if one differs (the "
        "try fails naming the partition and the object, which is moved aside and heals). Costs one extra GET of "
        "every input object; off Spark's critical path.",
        "boolean",
    ),
    "store_jvm_io": (
        "auto",
        "Whether the result store's reads use Spark's own Parquet reader through s3a:// (several times faster "
        "than Python workers): 'auto' when the Spark session's JVM has hadoop-aws (spark.jars.packages="
        "org.apache.hadoop:hadoop-aws:3.5.0) and the store's connection has long-lived keys or none (S3A's own "
        "credential chain), each object's SHA-256 kept by S3 checked first; 'cluster' also with temporary "
        "credentials, the cluster reaching the bucket with its own S3A configuration; 'off': always the Python "
        "path (store_spark_io). Writes (store_spark_io = executors), unless 'off': Spark's own Parquet writer to "
        "a temporary directory on the driver's disk, each file then stored content-addressed from the driver, "
        "where the session's executors share the driver's host (local Spark, a Spark Connect server on the same "
        "machine; probed once per session), else Python workers. Each session logs once which path it uses and "
        "why.",
    ),
    "publish_root": (
        "",
        "Where steps declared with publish='<table>' commit their Delta tables: <publish_root>/<table>, an "
        "s3://bucket/prefix URI on the result store's S3 server (credentials of store_aws_conn_id) or a local "
        "directory. Empty: s3://<store_bucket>/<store_prefix>/tables.",
    ),
    "store_aws_conn_id": (
        "aws_default",
        "Amazon ('aws') connection of the S3 result store; its extra may set endpoint_url for S3-compatible "
        "servers.",
    ),
}.items()}


def options_table() -> str:
    """The ``[region_failover]`` options as a Markdown table (option, environment variable, default, meaning): what
    the docs show between ``<!-- options-table -->`` markers, checked against :data:`CONFIG_OPTIONS` by the tests."""
    rows = ["| option | environment variable | default | what it sets |", "| --- | --- | --- | --- |"]
    for key, option in CONFIG_OPTIONS.items():
        default = f"`{option.default}`" if option.default else "(empty)"
        text = option.description.replace("|", "\\|")
        rows.append(f"| `{key}` | `AIRFLOW__{CONFIG_SECTION.upper()}__{key.upper()}` | {default} | {text} |")
    return "\n".join(rows) + "\n"


def _config_section() -> dict[str, Any]:
    options = {
        key: {"description": description, "version_added": "0.1.0", "type": kind, "example": None,
              "default": default}
        for key, (default, description, kind) in CONFIG_OPTIONS.items()
    }
    return {"description": "Region failover of PySpark pipelines (airflow-provider-region-failover).",
            "options": options}


def get_provider_info() -> dict[str, Any]:
    """The provider's metadata (``ProvidersManager`` validates it against Airflow's provider schema)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Region Failover",
        "description": "Flink-style fine-grained (region) failover for PySpark pipelines orchestrated by Airflow 3.",
        "versions": ["0.1.0"],
        "integrations": [
            {"integration-name": "Region Failover", "external-doc-url": "docs/index.md", "tags": ["software"]},
        ],
        "plugins": [{"name": "region_failover",
                     "plugin-class": "airflow_region_failover.plugins.plugin.RegionFailoverPlugin"}],
        "operators": [
            {"integration-name": "Region Failover",
             "python-modules": ["airflow_region_failover.operators.step"]},
        ],
        # Connection types this provider *uses* (defined by the apache-spark and amazon providers; listing them
        # under "connection-types" would register them twice).
        "connection-types-used": list(CONNECTION_TYPES_USED),
        "config": {CONFIG_SECTION: _config_section()},
        # `airflow region-failover ...` (Airflow 3 builds its CLI from these functions)
        "cli": ["airflow_region_failover.cli.airflow_command.get_cli_commands"],
    }
