"""The migration chain (server/store/migrations, applied by server.store.migrate) on real SQLite and real
PostgreSQL: up, down and up again; adoption of databases made by the old `create_all` code, rows
kept; no drift between the migrated schema and server.store.db's models; concurrent upgrades."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import IntegrityError

from server.store import migrate
from server.store.accounts import UserStore
from server.store.db import Base, make_engine
from server.store.submissions import SubmissionStatus, SubmissionStore
from tests.support import REPO

T0 = datetime(2026, 5, 1, 12, 0, 0)

# The DDL of the old create_all code (server/store/db.py before migrations, commit e9fbe1c), as each dialect got it.
LEGACY_USERS = """CREATE TABLE users (
    id {serial} NOT NULL, email VARCHAR(254) NOT NULL, display_name VARCHAR(80) NOT NULL,
    password_hash VARCHAR(255) NOT NULL, role VARCHAR(16) NOT NULL, created_at {ts} NOT NULL,
    PRIMARY KEY (id))"""
LEGACY_SUBMISSIONS = """CREATE TABLE submissions (
    id VARCHAR(32) NOT NULL, user_id INTEGER, problem VARCHAR(64) NOT NULL, problem_version VARCHAR(32),
    source TEXT NOT NULL, status VARCHAR(16) NOT NULL, verdict VARCHAR(32), score FLOAT, result_json TEXT,
    attempts INTEGER NOT NULL, created_at {ts} NOT NULL, started_at {ts}, finished_at {ts},
    PRIMARY KEY (id), FOREIGN KEY(user_id) REFERENCES users (id))"""
LEGACY_INDEXES = [
    "CREATE UNIQUE INDEX ix_users_email ON users (email)",
    "CREATE INDEX ix_submissions_problem ON submissions (problem)",
    "CREATE INDEX ix_submissions_status ON submissions (status)",
    "CREATE INDEX ix_submissions_user_id ON submissions (user_id)",
]
# The first version's table (no accounts; attempts and the timestamps of grading came later and were
# added by the old code's ALTER TABLE ... ADD COLUMN, nullable, without index or foreign key).
FIRST_SUBMISSIONS = """CREATE TABLE submissions (
    id VARCHAR(32) NOT NULL, problem VARCHAR(64) NOT NULL, source TEXT NOT NULL, status VARCHAR(16) NOT NULL,
    verdict VARCHAR(32), score FLOAT, result_json TEXT, created_at {ts} NOT NULL, PRIMARY KEY (id))"""

HEAD = "0015"  # the latest revision (server/store/migrations/versions)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'judge.db'}"
    return request.getfixturevalue("postgres_url")


def _types(url: str) -> dict[str, str]:
    if url.startswith("sqlite"):
        return {"ts": "DATETIME", "serial": "INTEGER"}
    return {"ts": "TIMESTAMP WITHOUT TIME ZONE", "serial": "SERIAL"}


def _execute(url: str, *statements: str, params: list[dict[str, Any]] | None = None) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(sa.text(statement), params or [{}])
    finally:
        engine.dispose()


def _rows(url: str, query: str) -> list[tuple]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(r) for r in connection.execute(sa.text(query))]
    finally:
        engine.dispose()


def _insert(url: str, table: str, rows: list[dict[str, Any]]) -> None:
    """Inserts through the reflected table, so timestamps are stored as SQLAlchemy stores them."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.Table(table, sa.MetaData(), autoload_with=connection).insert(), rows)
    finally:
        engine.dispose()


def _select(url: str, table: str, columns: str) -> list[tuple]:
    """`columns` (comma-separated) of every row of `table`, sorted, read through the reflected table."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            t = sa.Table(table, sa.MetaData(), autoload_with=connection)
            query = sa.select(*(t.c[c.strip()] for c in columns.split(",")))
            return sorted(tuple(r) for r in connection.execute(query))
    finally:
        engine.dispose()


def _drift(url: str, metadata: sa.MetaData = Base.metadata) -> list:
    """What `alembic check` would report: the differences between `metadata` and the database."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": True}
            )
            return compare_metadata(context, metadata)
    finally:
        engine.dispose()


def _schema(url: str) -> dict[str, Any]:
    """Everything reflection sees of the judge's tables, CHECK constraints included."""
    engine = make_engine(url)
    out: dict[str, Any] = {}
    try:
        with engine.connect() as connection:
            inspector = sa.inspect(connection)
            for table in ("users", "submissions"):
                out[table] = {
                    "columns": [
                        (c["name"], str(c["type"]), c["nullable"], c["default"]) for c in inspector.get_columns(table)
                    ],
                    "pk": inspector.get_pk_constraint(table)["constrained_columns"],
                    "indexes": sorted(
                        (i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table)
                    ),
                    "fks": sorted(
                        (
                            fk["name"] or "",
                            tuple(fk["constrained_columns"]),
                            fk["referred_table"],
                            tuple(fk["referred_columns"]),
                        )
                        for fk in inspector.get_foreign_keys(table)
                    ),
                    "checks": sorted((c["name"], c["sqltext"]) for c in inspector.get_check_constraints(table)),
                }
    finally:
        engine.dispose()
    return out


def _fresh_schema(url: str, tmp_path: Path, postgres_server: Any = None) -> dict[str, Any]:
    """The schema `Base.metadata.create_all` makes from server.store.db's models, on the same kind of database."""
    other = (
        f"sqlite:///{tmp_path / 'create_all.db'}" if url.startswith("sqlite") else postgres_server.url_for("create_all")
    )
    engine = make_engine(other)
    Base.metadata.create_all(engine)
    engine.dispose()
    return _schema(other)


def _legacy_rows() -> list[dict[str, Any]]:
    """Submissions in each status the old code had, with every column set."""
    return [
        dict(
            id=f"{status}{'0' * (32 - len(status))}",
            user_id=1,
            problem="checkpoint_dot_policy",
            problem_version="v1" if status == "done" else None,
            source=f"# {status}\n",
            status=status,
            verdict="ACCEPTED" if status == "done" else None,
            score=1.0 if status == "done" else None,
            result_json='{"verdict": "ACCEPTED"}' if status == "done" else None,
            attempts={"queued": 0, "running": 1, "done": 2}[status],
            created_at=T0 + timedelta(minutes=i),
            started_at=None if status == "queued" else T0 + timedelta(minutes=i, seconds=5),
            finished_at=T0 + timedelta(minutes=i, seconds=9) if status == "done" else None,
        )
        for i, status in enumerate(("queued", "running", "done"))
    ]


SUBMISSION_COLUMNS = (
    "id, user_id, problem, problem_version, source, status, verdict, score, result_json, attempts, "
    "created_at, started_at, finished_at"
)


def _insert_legacy_rows(url: str) -> None:
    """Accounts 1 and 2 (ids given by the database, as the old code let it), then `_legacy_rows`."""
    _insert(
        url,
        "users",
        [
            dict(
                email="ada@example.org",
                display_name="Ada",
                password_hash="$argon2id$x",
                role="instructor",
                created_at=T0,
            ),
            dict(
                email="bob@example.org", display_name="Bob", password_hash="$argon2id$y", role="student", created_at=T0
            ),
        ],
    )
    _insert(url, "submissions", _legacy_rows())


def _expected(row: dict[str, Any]) -> tuple:
    return tuple(row[c.strip()] for c in SUBMISSION_COLUMNS.split(","))


def _make_legacy(url: str) -> None:
    """A database as the old code's create_all made it, with two accounts and a submission in each status."""
    kinds = _types(url)
    _execute(url, LEGACY_USERS.format(**kinds), LEGACY_SUBMISSIONS.format(**kinds), *LEGACY_INDEXES)
    _insert_legacy_rows(url)


def _head() -> str:
    return ScriptDirectory.from_config(migrate.config()).get_current_head()


def test_head_is_the_api_clients_revision() -> None:
    assert migrate.head() == _head() == HEAD
    revisions = [r.revision for r in ScriptDirectory.from_config(migrate.config()).walk_revisions()]
    assert revisions == [
        "0015",
        "0014",
        "0013",
        "0012",
        "0011",
        "0010",
        "0009",
        "0008",
        "0007",
        "0006",
        "0005",
        "0004",
        "0003",
        "0002",
        "0001",
    ]


def test_upgrade_creates_the_models_schema_without_drift(
    url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert migrate.current(url) is None
    assert migrate.upgrade(url) == HEAD
    assert migrate.current(url) == HEAD
    assert _drift(url) == []
    command.check(migrate.config(url))  # `alembic check`: raises AutogenerateDiffsDetected on drift
    pg = request.getfixturevalue("postgres_server") if url.startswith("postgresql") else None
    assert _schema(url) == _fresh_schema(url, tmp_path, pg)  # CHECK constraints too, which autogenerate skips
    assert migrate.upgrade(url) == HEAD  # at head already: nothing to do


def test_the_database_enforces_statuses_and_roles(url: str) -> None:
    migrate.upgrade(url)
    engine = make_engine(url)
    store, users = SubmissionStore(engine), UserStore(engine)
    users.create(email="a@example.org", display_name="A", password_hash="h")
    record = store.create(problem="p", source="s")
    with pytest.raises(IntegrityError, match="submission_status"):
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE submissions SET status = 'lost' WHERE id = :id"), {"id": record.id})
    with pytest.raises(IntegrityError, match="user_role"):
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE users SET role = 'instructor'"))  # a course role, not a site one
    for status in SubmissionStatus:
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE submissions SET status = :s"), {"s": status.value})
    assert store.get(record.id).status == SubmissionStatus.FAILED
    engine.dispose()


def test_chain_down_and_up_again_keeps_rows(url: str) -> None:
    cfg = migrate.config(url)
    command.upgrade(cfg, "0001")
    assert migrate.current(url) == "0001"
    legacy = ScriptDirectory.from_config(cfg).get_revision("0001").module.legacy_metadata()
    assert _drift(url, legacy) == []
    _insert_legacy_rows(url)

    assert migrate.upgrade(url) == HEAD
    assert _drift(url) == []
    assert _select(url, "submissions", SUBMISSION_COLUMNS) == sorted(_expected(r) for r in _legacy_rows())
    _execute(
        url,
        "UPDATE submissions SET status = 'failed', verdict = 'INTERNAL_ERROR', worker_id = 'w1', "
        "lease_expires_at = NULL, enqueued_at = :t WHERE status = 'running'",
        params=[{"t": T0}],
    )

    command.downgrade(cfg, "0001")
    assert migrate.current(url) == "0001"
    assert _drift(url, legacy) == []
    assert sorted(_rows(url, "SELECT id, status, verdict FROM submissions")) == [
        ("done" + "0" * 28, "done", "ACCEPTED"),
        ("queued" + "0" * 26, "queued", None),
        ("running" + "0" * 25, "done", "INTERNAL_ERROR"),
    ]  # "failed" is "done" to the old code

    command.downgrade(cfg, "base")
    assert migrate.current(url) is None
    engine = make_engine(url)
    assert set(sa.inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()

    assert migrate.upgrade(url) == HEAD
    assert _drift(url) == []
    assert _rows(url, "SELECT COUNT(*) FROM submissions") == [(0,)]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_adopts_a_legacy_database_keeping_every_row(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'legacy.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    _make_legacy(url)
    assert migrate.current(url) is None

    assert migrate.upgrade(url) == HEAD
    assert migrate.current(url) == HEAD
    assert _drift(url) == []
    pg = request.getfixturevalue("postgres_server") if kind == "postgresql" else None
    assert _schema(url) == _fresh_schema(url, tmp_path, pg)
    assert _select(url, "submissions", SUBMISSION_COLUMNS) == sorted(_expected(r) for r in _legacy_rows())
    assert _select(url, "submissions", "id, status, enqueued_at, lease_expires_at, worker_id") == [
        ("done" + "0" * 28, "done", None, None, None),
        ("queued" + "0" * 26, "queued", None, None, None),
        ("running" + "0" * 25, "running", None, None, None),
    ]
    assert _select(url, "users", "id, email, role, created_at") == [
        (1, "ada@example.org", "admin", T0),
        (2, "bob@example.org", "user", T0),
    ]  # instructors became admins

    # the stores work on it: the queued row was never enqueued, and the running row (its process is
    # gone; it has no lease) is one anyone may claim: the sweeper enqueues both again
    engine = make_engine(url)
    store = SubmissionStore(engine)
    assert store.count_by_status() == {"queued": 1, "running": 1, "done": 1}
    assert sorted(store.to_enqueue()) == ["queued" + "0" * 26, "running" + "0" * 25]
    claim = store.claim("running" + "0" * 25, worker_id="w", lease_s=30, max_attempts=3)
    assert claim.record is not None and claim.record.attempts == 2  # its first attempt was counted then
    assert UserStore(engine).by_email("ada@example.org").role == "admin"
    new = UserStore(engine).create(email="cy@example.org", display_name="Cy", password_hash="h")
    assert new.id == 3  # the id sequence continues after the adopted rows
    engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_adopts_a_first_version_database_grown_by_alter_table(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The first version had no accounts; later versions added columns with a bare ALTER TABLE
    (nullable, no index, no foreign key), so old rows hold NULL where the schema now says NOT NULL."""
    url = f"sqlite:///{tmp_path / 'first.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    kinds = _types(url)
    _execute(
        url,
        FIRST_SUBMISSIONS.format(**kinds),
        "CREATE INDEX ix_submissions_problem ON submissions (problem)",
        "CREATE INDEX ix_submissions_status ON submissions (status)",
    )
    _insert(
        url,
        "submissions",
        [
            dict(
                id=f"{s:0<32}",
                problem="p",
                source="src",
                status=s,
                created_at=T0,
                verdict="ACCEPTED" if s == "done" else None,
            )
            for s in ("queued", "running", "done")
        ],
    )
    # what the old code's _add_missing_columns did when a newer version first opened it
    _execute(url, 'ALTER TABLE submissions ADD COLUMN "attempts" INTEGER')
    _execute(url, "UPDATE submissions SET attempts = 4 WHERE status = 'done'")

    assert migrate.upgrade(url) == HEAD
    assert _drift(url) == []
    assert _select(url, "submissions", "id, status, verdict, attempts, user_id, problem_version, started_at") == [
        (f"{'done':0<32}", "done", "ACCEPTED", 4, None, None, None),
        (f"{'queued':0<32}", "queued", None, 0, None, None, None),
        (f"{'running':0<32}", "running", None, 0, None, None, None),
    ]
    pg = request.getfixturevalue("postgres_server") if kind == "postgresql" else None
    # the same schema, but the added columns come last
    assert _unordered(_schema(url)) == _unordered(_fresh_schema(url, tmp_path, pg))


def _schema_without_fk_names(schema: dict[str, Any]) -> dict[str, Any]:
    return {table: {**parts, "fks": sorted((None, *fk[1:]) for fk in parts["fks"])} for table, parts in schema.items()}


def _unordered(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without foreign key names, its columns in name order."""
    return {
        table: {**parts, "columns": sorted(parts["columns"])}
        for table, parts in _schema_without_fk_names(schema).items()
    }


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_refused_upgrade_changes_nothing(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'odd.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_url")
    kinds = _types(url)
    _execute(url, FIRST_SUBMISSIONS.format(**kinds))
    _insert(url, "submissions", [dict(id="x", problem="p", source="s", status="paused", created_at=T0)])
    before = _schema_tables(url)

    with pytest.raises(migrate.MigrationError, match=r"submissions\.status holds values outside .*'paused' \(1 rows\)"):
        migrate.upgrade(url)
    assert migrate.current(url) is None
    assert _schema_tables(url) == before  # the adoption's added columns and tables were rolled back
    assert _rows(url, "SELECT id, status FROM submissions") == [("x", "paused")]

    _execute(url, "UPDATE submissions SET status = 'queued'")
    assert migrate.upgrade(url) == HEAD


def _schema_tables(url: str) -> dict[str, list[str]]:
    engine = make_engine(url)
    try:
        inspector = sa.inspect(engine)
        return {t: [c["name"] for c in inspector.get_columns(t)] for t in inspector.get_table_names()}
    finally:
        engine.dispose()


def test_a_database_of_newer_code_is_refused(url: str) -> None:
    migrate.upgrade(url)
    _execute(url, "UPDATE alembic_version SET version_num = '0099'")
    with pytest.raises(migrate.MigrationError, match="0099"):
        migrate.upgrade(url)
    assert migrate.current(url) == "0099"


def test_current_creates_no_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "none.db"
    assert migrate.current(f"sqlite:///{path}") is None
    assert not path.exists()


def _upgrade_at_once(url: str, processes: int) -> list[subprocess.CompletedProcess[str]]:
    """Runs `migrate.upgrade(url)` in `processes` Python processes that start it at the same instant."""
    start_at = time.time() + 4.0  # after every process has imported the server
    script = (
        "import sys, time; from server.store import migrate; time.sleep(max(0.0, float(sys.argv[2]) - time.time())); "
        "print(migrate.upgrade(sys.argv[1]))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, url, str(start_at)],
            cwd=REPO,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


@pytest.mark.parametrize("legacy", [False, True], ids=["empty", "legacy"])
def test_processes_upgrading_at_once_all_succeed(url: str, legacy: bool) -> None:
    if legacy:
        _make_legacy(url)
    results = _upgrade_at_once(url, 4)
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip() == HEAD
    assert _rows(url, "SELECT version_num FROM alembic_version") == [(HEAD,)]
    assert _drift(url) == []
    if legacy:
        assert _rows(url, "SELECT COUNT(*) FROM submissions") == [(3,)]


def test_db_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from server.cli.db import db_app

    runner = CliRunner()
    monkeypatch.delenv("REMAT_JUDGE_DATABASE_URL", raising=False)
    data = tmp_path / "data"

    behind = runner.invoke(db_app, ["current", "--data-dir", str(data)])
    assert behind.exit_code == 1
    assert f"revision none; code: revision {HEAD}" in behind.stdout
    assert not (data / "remat-judge.db").exists()

    upgraded = runner.invoke(db_app, ["upgrade", "--data-dir", str(data)])
    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.stdout.strip() == HEAD
    assert "upgraded from no revision" in upgraded.stderr
    assert migrate.current(f"sqlite:///{(data / 'remat-judge.db').resolve()}") == HEAD
    again = runner.invoke(db_app, ["upgrade", "--data-dir", str(data)])
    assert again.stdout.strip() == HEAD and "already at the latest revision" in again.stderr

    at_head = runner.invoke(db_app, ["current"], env={"REMAT_JUDGE_DATA_DIR": str(data)})
    assert at_head.exit_code == 0 and f"revision {HEAD}; code: revision {HEAD}" in at_head.stdout

    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert runner.invoke(db_app, ["upgrade", "--database-url", other]).exit_code == 0
    _execute(other, "UPDATE alembic_version SET version_num = '0099'")
    ahead = runner.invoke(db_app, ["current", "--database-url", other])
    assert ahead.exit_code == 1 and "unknown to this code" in ahead.stderr
    refused = runner.invoke(db_app, ["upgrade", "--database-url", other])
    assert refused.exit_code == 1 and "0099" in refused.stderr

    assert runner.invoke(db_app, ["upgrade", "--database-url", "not a url"]).exit_code == 2
    unreachable = runner.invoke(db_app, ["upgrade", "--database-url", "postgresql://judge:secret@127.0.0.1:1/x"])
    assert unreachable.exit_code == 1
    assert "cannot reach postgresql://judge:***@127.0.0.1:1/x: connection failed" in unreachable.stderr
    assert "secret" not in unreachable.output


def test_scoped_roles_migrate_instructors_to_admins_and_free_lti_emails(url: str) -> None:
    """0009: instructors become admins and students plain users; course instructors become staff;
    an LTI account gives its platform email back (kept as contact_email) for a synthetic one; LMS
    courses stop opening solutions after deadlines, courses made by hand keep doing so. Down and up
    again keeps the rows."""
    from server.store.lti import lti_email

    cfg = migrate.config(url)
    command.upgrade(cfg, "0008")
    _insert(
        url,
        "users",
        [
            dict(
                id=1, email="prof@uni.example", display_name="Prof", password_hash="h", role="instructor", created_at=T0
            ),
            dict(id=2, email="ada@uni.example", display_name="Ada", password_hash="h", role="student", created_at=T0),
            dict(
                id=3,
                email="lti-old@lti.invalid",
                display_name="Bo",
                password_hash="h",
                role="instructor",
                created_at=T0,
            ),
        ],
    )
    _insert(
        url,
        "lti_platforms",
        [
            dict(
                id=1,
                issuer="https://lms.example",
                client_id="c",
                deployment_ids='["d"]',
                auth_login_url="https://lms.example/a",
                auth_token_url="https://lms.example/t",
                keyset_url="https://lms.example/k",
                created_at=T0,
            )
        ],
    )
    _insert(
        url,
        "lti_users",
        [
            dict(
                issuer="https://lms.example",
                sub="7",
                user_id=2,
                name="Ada",
                email="ada@uni.example",
                role="student",
                created_at=T0,
                last_launch_at=T0,
            ),
            dict(
                issuer="https://lms.example",
                sub="8",
                user_id=3,
                name="Bo",
                email=None,
                role="instructor",
                created_at=T0,
                last_launch_at=T0,
            ),
        ],
    )
    _insert(
        url,
        "courses",
        [
            dict(
                id=1, key="made-here", title="M", platform_id=None, deployment_id=None, context_id=None, created_at=T0
            ),  # executemany: every row names every column
            dict(id=2, key="lti-abc", title="L", platform_id=1, deployment_id="d", context_id="ctx", created_at=T0),
        ],
    )
    _insert(
        url,
        "enrollments",
        [
            dict(course_id=2, user_id=3, role="instructor", created_at=T0),
            dict(course_id=2, user_id=2, role="student", created_at=T0),
        ],
    )
    assert migrate.upgrade(url) == HEAD
    assert _drift(url) == []
    assert sorted(_rows(url, "SELECT id, email, contact_email, role FROM users")) == [
        (1, "prof@uni.example", None, "admin"),
        (2, lti_email("https://lms.example", "7"), "ada@uni.example", "user"),  # the email is free for sign-up
        # an LTI account made an instructor by an LMS launch loses it (it keeps its staff enrollment)
        (3, lti_email("https://lms.example", "8"), None, "user"),
    ]
    assert sorted(_rows(url, "SELECT user_id, role FROM enrollments")) == [(2, "student"), (3, "staff")]
    assert sorted(_rows(url, "SELECT sub, role FROM lti_users")) == [("7", "student"), ("8", "staff")]
    assert sorted((k, bool(v)) for k, v in _rows(url, "SELECT key, solutions_after_deadline FROM courses")) == [
        ("lti-abc", False),
        ("made-here", True),
    ]
    command.downgrade(cfg, "0008")
    assert sorted(_rows(url, "SELECT id, role FROM users")) == [(1, "instructor"), (2, "student"), (3, "student")]
    assert sorted(_rows(url, "SELECT user_id, role FROM enrollments")) == [(2, "student"), (3, "instructor")]
    assert migrate.upgrade(url) == HEAD
