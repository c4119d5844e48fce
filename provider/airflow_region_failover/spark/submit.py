"""Script steps: a PySpark script spark-submitted as its own application (the apache-spark provider's
``SparkSubmitHook``), reading and writing partitions through the same store protocol as Python steps.

A script step's file ends with::

    from airflow_region_failover import run_script_step

    def transform(spark, inputs, context):
        return inputs["clean"].groupBy("k").count()

    if __name__ == "__main__":
        run_script_step(transform)

Rules: the operator passes the subtask's spec (graph, input refs, its attempt, store location) as one base64 JSON
argument ``--region-failover-spec``; S3 credentials travel only in the environment of a local or standalone
spark-submit (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``), never in arguments or logs — on YARN and
Kubernetes not at all (:func:`script_environment`). After the application exits successfully the operator
checks that every output partition is committed *by this try's attempt* and hands the refs back for
publication; anything else fails the task naming the partition. The script side runs the same
:func:`~.compute.compute` as a function step, so its manifests record the input versions it read too. The
``spark`` connection is the step's ``spark_conn_id`` if it is of type ``spark``, else ``[region_failover]
spark_submit_conn_id``, else none: spark-submit on ``[region_failover] spark_master``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.graph import jsonformat
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.subtasks import consumed_partitions
from airflow_region_failover.job import StepImpl
from airflow_region_failover.spark.compute import compute
from airflow_region_failover.spark.context import StepContext, input_name
from airflow_region_failover.spark.exchange import PartitionRef
from airflow_region_failover.spark.run import SubtaskRun, current_inputs, input_versions
from airflow_region_failover.spark.session import CLUSTER, default_conf, resolve_target
from airflow_region_failover.spark.store_io import StoreIO
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.result_store import ResultStore
from airflow_region_failover.store.s3.clients import S3Access, S3Credentials, portable

SPEC_ARG = "--region-failover-spec"
LOCAL_CONN_ID = "region_failover_local_spark"


def encode_spec(spec: Mapping[str, Any]) -> str:
    """The spec as one URL-safe base64 argument."""
    return base64.urlsafe_b64encode(json.dumps(spec, sort_keys=True).encode()).decode()


def decode_spec(argv: Sequence[str]) -> dict[str, Any]:
    """Find and decode ``--region-failover-spec`` in ``argv``; ``SystemExit`` naming the argument otherwise."""
    args = list(argv)
    if SPEC_ARG not in args or args.index(SPEC_ARG) + 1 >= len(args):
        raise SystemExit(f"{SPEC_ARG} <spec> missing: run this script as a region-failover step")
    spec: dict[str, Any] = json.loads(base64.urlsafe_b64decode(args[args.index(SPEC_ARG) + 1]))
    return spec


def build_spec(run: SubtaskRun, store: ResultStore) -> dict[str, Any]:
    """What the script needs: graph, subtask, input refs, its attempt, the script's code fingerprint and the
    store location (no secrets)."""
    config, sctx = store.config, run.contexts[0]
    return {
        "graph": jsonformat.to_dict(run.graph), "subtask": str(run.head),
        "inputs": [[input_name(e), [r.to_json() for r in rs]] for e, rs in run.refs.items()],
        "context": {"dag_id": sctx.dag_id, "run_id": sctx.run_id, "try_number": sctx.try_number,
                    "params": _jsonable(sctx.params)},
        "code": run.code,
        "store": {"bucket": config.bucket, "prefix": config.prefix, "endpoint_url": config.access.endpoint_url,
                  "region": config.access.region, "spark_io": config.spark_io},
    }


def _jsonable(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if isinstance(v, (str, int, float, bool, type(None), list, dict))}


def script_environment(store: ResultStore, master: str) -> dict[str, str]:
    """The script's environment: this Python, and — for a local or standalone master, where it stays in the
    spark-submit process's environment — the store's credentials frozen now (the script must finish within their
    remaining lifetime: :func:`~airflow_region_failover.store.s3.clients.portable`). For YARN and Kubernetes the
    apache-spark provider puts env vars on the spark-submit command line (``--conf spark.*Env.*=``), which every
    user of the host can read: there the script uses the cluster's own identity (instance profile, IRSA)."""
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if "yarn" in master or master.startswith("k8s"):
        return env
    credentials = portable(store.config.access).credentials
    if credentials is not None:
        env["AWS_ACCESS_KEY_ID"] = credentials.access_key
        env["AWS_SECRET_ACCESS_KEY"] = credentials.secret_key
        if credentials.session_token:
            env["AWS_SESSION_TOKEN"] = credentials.session_token
    return env


def submit_script(run: SubtaskRun) -> tuple[PartitionRef, ...]:
    """spark-submit the lone script step of ``run``, then verify its committed outputs; returns their refs."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook  # deferred: optional provider

    impl, subtask, store = run.impls[0], run.head, run.io.store
    assert impl.script is not None
    conn_id = submit_conn_id(impl.spark_conn_id)
    hook = SparkSubmitHook(
        conn_id=conn_id, conf=dict(default_conf()),
        name=f"{run.contexts[0].dag_id}.{subtask.step}.{subtask.index}",
        application_args=[SPEC_ARG, encode_spec(build_spec(run, store))],
        env_vars=script_environment(store, resolve_target(conn_id).url),
    )
    hook.submit(application=impl.script)
    written = []
    for result in run.outputs:
        ref = run.output_ref(result)
        manifest = store.manifest(ref.dag_id, ref.run_id, ref.partition)
        if manifest.attempt != ref.attempt:
            raise RuntimeError(f"script step {subtask} finished but {ref.partition} is committed by attempt "
                               f"{manifest.attempt}, not this try's attempt {ref.attempt}")
        written.append(replace(ref, rows=manifest.row_count))
    return tuple(written)


def submit_conn_id(step_conn_id: str | None) -> str:
    """The ``spark`` connection to spark-submit with: the step's if it is one (a job-wide ``spark_connect``
    connection is skipped), else ``[region_failover] spark_submit_conn_id``, else a ``local`` one."""
    if step_conn_id and resolve_target(step_conn_id).mode == CLUSTER:
        return step_conn_id
    return conf.spark_submit_conn_id() or _local_conn()


def _local_conn() -> str:
    """A ``spark`` connection on ``local[*]`` (environment-variable connection) for scripts without one."""
    master = conf.spark_master()
    os.environ.setdefault(f"AIRFLOW_CONN_{LOCAL_CONN_ID.upper()}", json.dumps({"conn_type": "spark", "host": master}))
    return LOCAL_CONN_ID


def run_script_step(fn: Callable[..., Any], argv: Sequence[str] | None = None) -> None:
    """The script side: :func:`~.compute.compute` with the subtask the operator passed (inputs, outputs, commit)."""
    from pyspark.sql import SparkSession  # deferred: only the spark-submitted application needs pyspark here

    spec = decode_spec(sys.argv if argv is None else argv)
    compute(SparkSession.builder.getOrCreate(), script_run(spec, fn))


def script_run(spec: Mapping[str, Any], fn: Callable[..., Any]) -> SubtaskRun:
    """The :class:`~.run.SubtaskRun` the operator passed in ``spec`` (a lone subtask that runs ``fn``; nothing is
    kept on this side, the operator decided that)."""
    graph = jsonformat.from_dict(spec["graph"])
    subtask = SubtaskId.parse(spec["subtask"])
    published = {name: rs for name, rs in spec["inputs"]}
    refs = {edge: tuple(PartitionRef.from_json(r, partition=p)
                        for r, p in zip(published[input_name(edge)], partitions, strict=True))
            for edge, partitions in consumed_partitions(graph, subtask).items()}
    context, step = spec["context"], graph.step(subtask.step)
    sctx = StepContext(subtask, step.parallelism, step.deterministic,
                       {input_name(e): tuple(r.partition for r in rs) for e, rs in refs.items()},
                       context["dag_id"], context["run_id"], int(context["try_number"]), context["params"])
    io = StoreIO(_store(spec["store"]))
    current = current_inputs(io, refs)
    return SubtaskRun(graph, (subtask,), (StepImpl(subtask.step, fn=fn),), (sctx,), refs, io, current,
                      input_versions(current, graph, subtask, refs), str(spec.get("code", "")))


def _store(location: Mapping[str, Any]) -> ResultStore:
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    credentials = S3Credentials(key, secret, os.environ.get("AWS_SESSION_TOKEN")) if key and secret else None
    access = S3Access(location.get("endpoint_url"), location.get("region") or "us-east-1", credentials)
    return ResultStore(StoreConfig(bucket=location["bucket"], prefix=location["prefix"], access=access,
                                   spark_io=location.get("spark_io", "executors")))
