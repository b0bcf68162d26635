"""Schema migrations of the judge's database: apply them (`upgrade`), ask where a database is
(`current`) and where the code is (`head`). Alembic, configured here (no alembic.ini): the
environment and the revisions are in `server/store/migrations/`.

`upgrade` is safe to call from several processes at start-up: it holds a lock for its whole
run (PostgreSQL: `pg_advisory_xact_lock`; SQLite: `flock` on `<database>.migrate.lock`) and
applies everything in one transaction, so a failed upgrade leaves the database as it was.

It also adopts a database made before migrations existed (tables made by `create_all`, no
`alembic_version` table): it adds what such a database may lack (columns, indexes, the foreign
key, NOT NULL that the old code's `ALTER TABLE ... ADD COLUMN` left out), stamps revision 0001
(the legacy schema) and upgrades from there.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy.engine import Connection, Engine

from server.store.db import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().with_name("migrations")
LEGACY_REVISION = "0001"
# pg_advisory_xact_lock key held while migrating: the first bytes of "remat-judge migrate"
PG_LOCK_KEY = int.from_bytes(b"rematmig", "big") & 0x7FFF_FFFF_FFFF_FFFF
# values for NULLs that the old code's added columns may hold where the legacy schema says NOT NULL
LEGACY_FILL = {("submissions", "attempts"): 0, ("users", "role"): "student"}


class MigrationError(RuntimeError):
    """The database cannot be brought to the code's schema; the message says why and what to do."""


def config(url: str | None = None) -> Config:
    """The Alembic configuration of the judge (script location `server/store/migrations/`); with `url`,
    Alembic commands run without a connection of ours connect there (e.g. `command.revision(...,
    autogenerate=True)` when writing a new revision)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.attributes["url"] = url
    return cfg


def head() -> str:
    """The newest revision of the code's migrations (e.g. "0002").

    Raises:
        MigrationError: the migrations have more than one head (two revisions revise the same one).
    """
    heads = ScriptDirectory.from_config(config()).get_heads()
    if len(heads) != 1:
        raise MigrationError(
            f"the migrations in {MIGRATIONS_DIR} have {len(heads)} heads ({', '.join(heads)}): merge them into one"
        )
    return heads[0]


def revisions() -> list[str]:
    """Every revision of the code's migrations, oldest first (e.g. ["0001", "0002"])."""
    return [script.revision for script in reversed(list(ScriptDirectory.from_config(config()).walk_revisions()))]


def _sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; None for other databases and in-memory SQLite."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def current(url: str) -> str | None:
    """The revision the database at `url` is at; None when it has none (a new or empty database,
    or a legacy one made before migrations: `upgrade` adopts it). Changes nothing: a SQLite file
    that does not exist is not created.

    Raises:
        sqlalchemy.exc.DBAPIError: the database is unreachable (or the SQLite file unreadable).
    """
    path = _sqlite_path(url)
    if path is not None and not path.exists():
        return None
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def upgrade(url: str) -> str:
    """Brings the database at `url` to the newest revision and returns it (e.g. "0002"). Creates the
    tables in an empty database and adopts a legacy one (see the module docstring). Waits while
    another process migrates the same database; does nothing when it is at the newest already.

    Raises:
        MigrationError: the database is at a revision this code does not know (made by newer code),
            or its rows cannot take the new schema (e.g. a status outside queued, running, done,
            failed, or a NULL the legacy schema forbids); nothing was changed.
        sqlalchemy.exc.DBAPIError: the database is unreachable (OperationalError) or refuses a
            statement (e.g. ProgrammingError: the user may not create tables).
        OSError: the SQLite lock file cannot be made next to the database.
    """
    engine = _migration_engine(url)
    try:
        with _file_lock(_sqlite_path(url)), engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(sa.select(sa.func.pg_advisory_xact_lock(PG_LOCK_KEY)))
            cfg = config()
            cfg.attributes["connection"] = connection
            at = MigrationContext.configure(connection).get_current_revision()
            if at is not None and at not in revisions():
                raise MigrationError(
                    f"{_safe(url)} is at revision {at}, which this code does not know (it knows "
                    f"{', '.join(revisions())}): newer code migrated it; run that version"
                )
            try:
                if _is_legacy(connection):
                    _adopt_legacy(connection, cfg)
                    command.stamp(cfg, LEGACY_REVISION)
                command.upgrade(cfg, "head")
            except MigrationError:
                raise
            except (CommandError, RuntimeError) as exc:
                raise MigrationError(f"cannot migrate {_safe(url)}: {exc}") from exc
            reached = MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
    if reached is None:  # pragma: no cover: alembic stamps every revision it applies
        raise MigrationError(f"{_safe(url)} has no revision after upgrading")
    return reached


def _safe(url: str) -> str:
    """`url` without its password, for messages."""
    return sa.engine.make_url(url).render_as_string(hide_password=True)


def _migration_engine(url: str) -> Engine:
    """`make_engine(url)`, with SQLite made transactional for DDL too: the driver's own transaction
    handling commits before `CREATE`/`ALTER`, so it is turned off and `BEGIN` is issued here."""
    engine = make_engine(url)
    if engine.dialect.name == "sqlite":

        @sa.event.listens_for(engine, "connect")
        def _no_driver_transactions(dbapi_connection, _record) -> None:
            dbapi_connection.isolation_level = None

        @sa.event.listens_for(engine, "begin")
        def _begin(connection: Connection) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def _file_lock(database: Path | None) -> Iterator[None]:
    """Holds an exclusive `flock` on `<database>.migrate.lock` (nothing for other databases)."""
    if database is None:
        yield
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{database}.migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _is_legacy(connection: Connection) -> bool:
    """Whether the database has the judge's tables but no revision (made before migrations)."""
    inspector = sa.inspect(connection)
    if MigrationContext.configure(connection).get_current_revision() is not None:
        return False
    return inspector.has_table("submissions") or inspector.has_table("users")


def _adopt_legacy(connection: Connection, cfg: Config) -> None:
    """Brings a database made by the old `create_all` code to exactly the schema of revision 0001:
    creates a missing table, adds missing columns, fills the NULLs of `LEGACY_FILL` and sets
    NOT NULL where 0001 has it, adds a missing foreign key and missing indexes.

    Raises:
        MigrationError: a NOT NULL column of 0001 holds NULLs there is no value to put in for.
    """
    legacy = ScriptDirectory.from_config(cfg).get_revision(LEGACY_REVISION).module.legacy_metadata()
    ops = Operations(MigrationContext.configure(connection, opts={"render_as_batch": True}))
    for table in legacy.sorted_tables:
        inspector = sa.inspect(connection)
        if not inspector.has_table(table.name):
            table.create(connection)
            continue
        present = {c["name"]: c for c in inspector.get_columns(table.name)}
        missing = [c for c in table.columns if c.name not in present]
        if missing:
            with ops.batch_alter_table(table.name) as batch:
                for column in missing:
                    batch.add_column(sa.Column(column.name, column.type, nullable=True))
        must_set = [
            c
            for c in table.columns
            if not c.nullable and not c.primary_key and (c.name not in present or present[c.name]["nullable"])
        ]
        for column in must_set:
            _fill_nulls(connection, table.name, column.name)
        foreign_keys = {tuple(fk["constrained_columns"]) for fk in inspector.get_foreign_keys(table.name)}
        new_keys = [fk for fk in table.foreign_key_constraints if tuple(c.name for c in fk.columns) not in foreign_keys]
        if must_set or new_keys:
            with ops.batch_alter_table(table.name) as batch:
                for column in must_set:
                    batch.alter_column(column.name, nullable=False, existing_type=column.type)
                for fk in new_keys:
                    local = [c.name for c in fk.columns]
                    batch.create_foreign_key(
                        f"{table.name}_{'_'.join(local)}_fkey",
                        fk.referred_table.name,
                        local,
                        [e.column.name for e in fk.elements],
                    )
        indexes = {tuple(i["column_names"]): i for i in sa.inspect(connection).get_indexes(table.name)}
        for index in table.indexes:
            if tuple(c.name for c in index.columns) not in indexes:
                ops.create_index(index.name, table.name, [c.name for c in index.columns], unique=index.unique)


def _fill_nulls(connection: Connection, table: str, column: str) -> None:
    """Puts `LEGACY_FILL`'s value into the NULLs of `table.column`.

    Raises:
        MigrationError: there are NULLs and no value for them.
    """
    t = sa.table(table, sa.column(column))
    nulls = connection.execute(sa.select(sa.func.count()).select_from(t).where(t.c[column].is_(None))).scalar_one()
    if not nulls:
        return
    if (table, column) not in LEGACY_FILL:
        raise MigrationError(
            f"{table}.{column} must not be NULL but {nulls} rows have NULL there: fill them in, then migrate again"
        )
    connection.execute(sa.update(t).where(t.c[column].is_(None)).values({column: LEGACY_FILL[table, column]}))
