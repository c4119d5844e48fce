"""One source for configuration: every ``[region_failover]`` option is declared once in ``provider_info`` (its one
default), read by one typed getter of ``conf`` named after it and nowhere else, and a bad value names the option.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import airflow_region_failover
from airflow_region_failover import conf
from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.provider_info import CONFIG_OPTIONS, CONFIG_SECTION, get_provider_info, options_table

ROOT = Path(airflow_region_failover.__file__).parent
READERS = {"_text", "_optional", "_seconds", "_json_object", "_choice", "_limit"}
CONF_READS = {"get", "getboolean", "getint", "getfloat", "getjson", "getlist", "getenum", "has_option", "getsection"}


def env(key: str) -> str:
    return f"AIRFLOW__{CONFIG_SECTION.upper()}__{key.upper()}"


def getter(key: str) -> Callable[[], Any]:
    found: Callable[[], Any] = getattr(conf, key)
    return found


def read_keys(function: ast.FunctionDef) -> set[str]:
    """The option names a getter of conf.py passes to its readers."""
    return {call.args[0].value for call in ast.walk(function) if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name) and call.func.id in READERS
            and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)}


def sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text()) for p in sorted(ROOT.rglob("*.py"))}


def test_every_declared_option_has_one_getter_reading_it_and_nothing_else() -> None:
    tree = sources()["conf.py"]
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert set(CONFIG_OPTIONS) <= set(functions), f"declared without a getter: {set(CONFIG_OPTIONS) - set(functions)}"
    for key in CONFIG_OPTIONS:
        assert read_keys(functions[key]) == {key}, f"conf.{key}() reads {read_keys(functions[key])}"
    readers = {name for name, f in functions.items() if read_keys(f) and not name.startswith("_")}
    assert readers <= set(CONFIG_OPTIONS) | {"restart_defaults"}, "a getter of an undeclared option"


def test_every_getter_is_used_by_the_product() -> None:
    used: set[str] = set()
    for name, tree in sources().items():
        if name == "conf.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "conf":
                used.add(node.attr)
    used |= {"failover_strategy", "restart_strategy", "restart_strategy_options", "non_recoverable_errors"} \
        if "restart_defaults" in used \
        else set()
    assert set(CONFIG_OPTIONS) - used == set(), "declared options no module reads: remove them or use them"


def test_no_module_reads_the_section_past_the_getters() -> None:
    """No ``conf.get("region_failover", ...)``, no ``AIRFLOW__REGION_FAILOVER__*`` read from the environment, no
    option key passed to ``conf.value``-like helpers outside conf.py (the keys and defaults retyped at call sites
    this replaces: spark_master, max_start_delay, watch_interval, api_conn_id, enabled)."""
    offenders = []
    for name, tree in sources().items():
        if name == "conf.py":
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if node.func.attr in CONF_READS and CONFIG_SECTION in texts:
                offenders.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
            if node.func.attr in {"get", "getenv"} and any(t.startswith(env("")) for t in texts):
                offenders.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "conf" and set(texts) & set(
                    CONFIG_OPTIONS) and node.func.attr != "declared_default":
                offenders.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


@pytest.mark.parametrize("key", sorted(CONFIG_OPTIONS))
def test_unset_the_getter_answers_the_declared_default(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """Unset and set to its declared default, an option reads the same (or fails the same way: store_bucket)."""
    monkeypatch.delenv(env(key), raising=False)
    unset = _outcome(getter(key))
    monkeypatch.setenv(env(key), CONFIG_OPTIONS[key].default)
    assert unset == _outcome(getter(key))
    info = get_provider_info()["config"][CONFIG_SECTION]["options"][key]
    assert info["default"] == CONFIG_OPTIONS[key].default and info["description"]


def _outcome(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except OptionError as exc:
        return str(exc)


def test_the_typed_defaults() -> None:
    assert conf.enabled() is True and conf.api_conn_id() == "region_failover_api"
    assert (conf.watch_interval(), conf.watch_lookback(), conf.max_start_delay()) == (1.0, 600.0, 3600.0)
    assert conf.spark_master() == "local[*]" and conf.spark_conn_id() is None and conf.publish_root() is None
    assert conf.store_keep_last_runs() is None and conf.store_keep_days() is None
    assert conf.store_verify_jvm_reads() is False and conf.store_min_grace_seconds() == 900.0
    assert conf.store_prefix() == "region-failover" and conf.store_aws_conn_id() == "aws_default"
    assert conf.spark_conf() == {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
    assert conf.restart_defaults() == {"jobmanager.execution.failover-strategy": "region",
                                       "restart-strategy.type": "fixed-delay",
                                       "restart-strategy.fixed-delay.attempts": "3",
                                       "restart-strategy.fixed-delay.delay": "1 s",
                                       "restart-strategy.non-recoverable-errors":
                                           "AnalysisException;SyntaxError;NameError"}
    assert conf.non_recoverable_errors() == ("AnalysisException", "SyntaxError", "NameError")


def test_the_bucket_is_required_and_says_so() -> None:
    """The truth both places now tell: no default bucket (S3 bucket names are global)."""
    assert CONFIG_OPTIONS["store_bucket"].default == ""
    with pytest.raises(OptionError, match=r"\[region_failover\] store_bucket = '': set the S3 bucket .*"
                                          r"AIRFLOW__REGION_FAILOVER__STORE_BUCKET"):
        conf.store_bucket()


@pytest.mark.parametrize(("key", "value", "fix"), [
    ("store_spark_io", "s3a", "'executors' or 'driver'"), ("store_keep_last_runs", "-2", "whole number"),
    ("store_keep_days", "nan", "number of days"), ("spark_conf", "[1]", "JSON object"),
    ("restart_strategy_options", "{", "JSON object"), ("failover_strategy", "partial", "region"),
    ("restart_strategy", "sometimes", "fixed-delay"), ("api_conn_id", " ", "http connection"),
    ("store_aws_conn_id", "", "aws connection"), ("store_verify_jvm_reads", "yes", "True or False"),
    ("non_recoverable_errors", "Key Error", "exception class names")])
def test_a_bad_value_is_an_option_error_naming_the_option(monkeypatch: pytest.MonkeyPatch, key: str, value: str,
                                                          fix: str) -> None:
    monkeypatch.setenv(env(key), value)
    with pytest.raises(OptionError, match=rf"\[region_failover\] {key}\b") as caught:
        getter(key)()
    assert fix in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("key", "value"), [("watch_interval", "0"), ("watch_lookback", "nan"),
                                            ("max_start_delay", "-1"), ("enabled", "perhaps")])
def test_the_loops_own_settings_fall_back_with_a_warning_naming_the_option(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, key: str, value: str) -> None:
    """Read in the scheduler, where a plugin must never stop it: the declared default, and one line saying why."""
    monkeypatch.setenv(env(key), value)
    with caplog.at_level(logging.WARNING, logger=conf.__name__):
        assert _outcome(getter(key)) == _outcome(lambda: _default_of(monkeypatch, key))
    assert f"[region_failover] {key} = {value!r}" in caplog.text


def _default_of(monkeypatch: pytest.MonkeyPatch, key: str) -> Any:
    monkeypatch.delenv(env(key))
    return getter(key)()


@pytest.mark.parametrize("value", ["-5", "0", "fifteen minutes", "15 min", "nan", "inf", ""])
def test_a_grace_floor_that_is_not_a_positive_number_of_seconds_names_the_option(monkeypatch: pytest.MonkeyPatch,
                                                                                 value: str) -> None:
    monkeypatch.setenv(env("store_min_grace_seconds"), value)
    with pytest.raises(OptionError, match=r"\[region_failover\] store_min_grace_seconds = .*a number of seconds > 0 "
                                          r".*AIRFLOW__REGION_FAILOVER__STORE_MIN_GRACE_SECONDS"):
        conf.store_min_grace_seconds()


def test_the_grace_floor_may_be_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env("store_min_grace_seconds"), " 20 ")
    assert conf.store_min_grace_seconds() == 20.0


def test_max_start_delay_may_be_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env("max_start_delay"), "0")
    assert conf.max_start_delay() == 0.0


def test_the_documented_options_table_is_the_declared_one() -> None:
    """The options table of the docs (between ``<!-- options-table -->`` markers, wherever the docs keep it) is
    generated from the declarations: ``python -c 'from airflow_region_failover.provider_info import options_table;
    print(options_table(), end="")'``."""
    marker = "<!-- options-table -->"
    docs = ROOT.parents[1] / "docs"
    tables = [p for p in sorted(docs.rglob("*.md")) if marker in p.read_text()]
    assert tables, f"no page of {docs} holds the options table"
    for page in tables:
        body = page.read_text().split(marker)
        assert len(body) == 3 and body[1].strip() == options_table().strip(), f"{page}: regenerate the table"
