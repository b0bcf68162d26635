"""Alembic's entry point for the judge's database.

`server.store.migrate` runs it with `config.attributes["connection"]`: a connection inside a transaction
that already holds the migration lock (the whole upgrade commits or rolls back as one). Without
one, it connects to `config.attributes["url"]` (or the `sqlalchemy.url` option) through
`server.store.db.make_engine`. SQLite gets batch mode (`render_as_batch`), so `ALTER`s that SQLite lacks
are done by copying the table. `target_metadata` holds every table of the judge: importing
`server.store` imports each of its modules.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from server.store import Base, make_engine  # the package registers every table on Base.metadata

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database to migrate: pass a connection or a URL (see server.store.migrate)")
    return str(url)


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_offline() -> None:
    """`--sql` mode: writes the DDL instead of running it."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
