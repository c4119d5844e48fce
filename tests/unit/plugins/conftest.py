"""The metadata database the plugins' SQL is tested against: a throw-away SQLite Airflow schema (no server, a unit
test) and, marked ``integration``, the same schema on a real PostgreSQL server (``devtools.databases.Postgres``),
which is what a production scheduler's watcher queries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One PostgreSQL server for the test session (``devtools.databases.Postgres``)."""
    from devtools.databases import Postgres

    server = Postgres(tmp_path_factory.mktemp("postgres"))
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def postgres_metadata_engine(postgres_server: Any) -> Iterator[Any]:
    """A SQLAlchemy engine on a private PostgreSQL database holding Airflow's schema (``create_all``)."""
    import airflow.models as models
    from airflow.models.base import Base
    from airflow.utils.orm_event_handlers import setup_event_handlers
    from sqlalchemy import create_engine

    engine = create_engine(postgres_server.create_database("airflow_probes"))
    setup_event_handlers(engine)
    models.import_all_models()
    Base.metadata.create_all(engine)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def metadata_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The engine Airflow's ``create_session`` uses during the test, with Airflow's schema created: the unit
    tests' SQLite database as configured, or PostgreSQL put in its place (``airflow.settings`` engine and
    sessions monkeypatched, as Airflow's own tests switch databases)."""
    import airflow.models as models
    from airflow import settings
    from airflow.models.base import Base
    from sqlalchemy.orm import scoped_session, sessionmaker

    if request.param == "sqlite":
        models.import_all_models()
        Base.metadata.create_all(settings.engine)
        assert settings.engine.dialect.name == "sqlite"
        return settings.engine
    engine = request.getfixturevalue("postgres_metadata_engine")
    factory = sessionmaker(engine, autocommit=False, autoflush=False, expire_on_commit=False)
    monkeypatch.setattr(settings, "engine", engine)
    monkeypatch.setattr(settings, "NonScopedSession", factory)
    monkeypatch.setattr(settings, "Session", scoped_session(factory))
    return engine
