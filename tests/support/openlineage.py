"""Validation of OpenLineage events against the official JSON schemas (vendored in ``openlineage_schemas/``) and
our own facet's schema (shipped in the package): the event against ``RunEvent``, then every facet in it against the
schema its ``_schemaURL`` names — a facet naming a schema that is not known here fails."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).parent / "openlineage_schemas"
OURS = (Path(__file__).parents[2] / "provider" / "airflow_region_failover" / "observability" / "schemas")


@cache
def registry() -> Registry:
    """Every vendored schema and ours, by ``$id``."""
    paths = [SCHEMAS / "OpenLineage.json", *sorted((SCHEMAS / "facets").glob("*.json")), *sorted(OURS.glob("*.json"))]
    resources = [Resource.from_contents(json.loads(p.read_text())) for p in paths]
    return Registry().with_resources((r.contents["$id"], r) for r in resources)


def _check(instance: Any, url: str, where: str) -> None:
    """Validate ``instance`` against the schema at ``url`` (``<$id>#/$defs/<Name>``); ``AssertionError`` naming
    ``where`` and every violation."""
    base, _, pointer = url.partition("#")
    assert base in {str(k) for k in registry()}, f"{where}: schema {url} is not vendored"
    validator = Draft202012Validator({"$ref": url}, registry=registry())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance)]
    assert not errors, f"{where} is not valid against {url}: {errors}"
    del pointer


def _facets(event: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for key, facet in event.get("run", {}).get("facets", {}).items():
        yield f"run.facets.{key}", facet
    for key, facet in event.get("job", {}).get("facets", {}).items():
        yield f"job.facets.{key}", facet
    for side in ("inputs", "outputs"):
        for i, dataset in enumerate(event.get(side, [])):
            for group in ("facets", "inputFacets", "outputFacets"):
                for key, facet in dataset.get(group, {}).items():
                    yield f"{side}[{i}].{group}.{key}", facet


def validate_event(event: Mapping[str, Any]) -> None:
    """``event`` (its JSON form) is a valid ``RunEvent`` and every facet in it valid against its own schema."""
    _check(event, event["schemaURL"].replace("BaseEvent", "RunEvent"), "event")
    for where, facet in _facets(event):
        _check(facet, facet["_schemaURL"], where)
