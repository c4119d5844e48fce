"""The provider info Airflow reads: every ``[region_failover]`` option typed as its getter returns it, the
integration linked to this provider's docs (not Flink's), the plugin listed, and all of it valid against
Airflow's own provider schema."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import airflow
import jsonschema

from airflow_region_failover import conf
from airflow_region_failover.provider_info import CONFIG_OPTIONS, CONFIG_SECTION, get_provider_info

TYPE_OF = {"bool": "boolean", "float": "float", "float | None": "float", "int": "integer", "int | None": "integer"}
"""A getter's return annotation -> the provider schema's option type (anything else is read as text: string)."""


def test_every_option_is_typed_as_its_getter_returns_it() -> None:
    options = get_provider_info()["config"][CONFIG_SECTION]["options"]
    wrong = {key: (options[key]["type"], inspect.signature(getattr(conf, key)).return_annotation)
             for key in CONFIG_OPTIONS
             if options[key]["type"] != TYPE_OF.get(str(inspect.signature(getattr(conf, key)).return_annotation),
                                                    "string")}
    assert wrong == {}, wrong


def test_the_integration_links_to_this_providers_docs_and_the_plugin_is_listed() -> None:
    info = get_provider_info()
    (integration,) = info["integrations"]
    assert "flink" not in integration["external-doc-url"].lower(), integration
    assert integration["external-doc-url"].startswith("docs/") or "region-failover" in integration["external-doc-url"]
    assert info["plugins"] == [{"name": "region_failover",
                                "plugin-class": "airflow_region_failover.plugins.plugin.RegionFailoverPlugin"}]


def test_the_provider_info_is_valid_against_airflows_schema() -> None:
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)
