"""``[region_failover] publish_root`` may not lie inside the result store's own trees, where gc would take a Delta
table's log and files for the store's garbage (``<prefix>/v1`` is swept, reproduced: the log was deleted): refused
with an :class:`OptionError` naming the option and the fix, wherever the root is read.

    <prefix>/v1/ (results, swept)   <prefix>/cas/v1/ (shared objects, swept)   <prefix>/failover/v1/ (logs)
    <prefix>/tables/<table>         the default publish_root: beside them, never swept
"""

from __future__ import annotations

import pytest

from airflow_region_failover.exceptions import OptionError
from airflow_region_failover.publication import operator as publishing


def configure(monkeypatch: pytest.MonkeyPatch, root: str) -> None:
    options = {"store_bucket": "bkt", "store_prefix": "rf", "publish_root": root}
    for key, value in options.items():  # what conf.py's getters read first (Airflow's environment rule)
        monkeypatch.setenv(f"AIRFLOW__REGION_FAILOVER__{key.upper()}", value)


@pytest.mark.parametrize("root", ["s3://bkt/rf/v1", "s3://bkt/rf/v1/tables", "s3://bkt/rf/cas/v1/t",
                                  "s3://bkt/rf/failover", "s3://bkt/rf", "s3://bkt/rf/"])
def test_a_publish_root_inside_the_stores_trees_is_refused_naming_the_option_and_the_fix(
        monkeypatch: pytest.MonkeyPatch, root: str) -> None:
    configure(monkeypatch, root)
    with pytest.raises(OptionError, match=r"\[region_failover\] publish_root .* s3://bkt/rf/tables"):
        publishing.table_location("totals")


@pytest.mark.parametrize(("root", "where"), [("s3://bkt/rf/tables", "s3://bkt/rf/tables/totals"),
                                             ("s3://bkt/rf/delta", "s3://bkt/rf/delta/totals"),
                                             ("s3://bkt/rf-tables", "s3://bkt/rf-tables/totals"),
                                             ("s3://other/rf/v1", "s3://other/rf/v1/totals")])
def test_a_publish_root_beside_the_stores_trees_is_used(monkeypatch: pytest.MonkeyPatch, root: str,
                                                        where: str) -> None:
    configure(monkeypatch, root)
    assert publishing.table_location("totals") == where


@pytest.mark.parametrize("root", ["s3://bkt/rf/tables/../v1", "s3://bkt/rf/./v1", "s3://bkt/rf//v1",
                                  "s3://bkt/other/../../bkt/rf/cas/v1", "s3://other/rf/tables/../x"])
def test_a_publish_root_with_dot_or_empty_segments_is_refused_naming_the_option_and_the_value(
        monkeypatch: pytest.MonkeyPatch, root: str) -> None:
    """delta-rs resolves ``.``/``..`` (``s3://bkt/rf/tables/../v1`` is ``s3://bkt/rf/v1``), so a root spelt with them
    slipped past the guard and gc then deleted the table's log (issue 48, L2): refused, whatever the bucket."""
    configure(monkeypatch, root)
    with pytest.raises(OptionError, match=r"\[region_failover\] publish_root '" + root.replace(".", r"\.") +
                       r"' has a '\.', '\.\.' or empty path segment"):
        publishing.table_location("totals")
