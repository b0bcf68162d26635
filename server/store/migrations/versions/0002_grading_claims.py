"""Grading claims: statuses and roles checked by the database; the lease columns of a claim.

- `submissions.status` may only be queued, running, done or failed (CHECK constraint
  "submission_status", as `server.store.db` declares it: a string column, no native PostgreSQL enum);
- `users.role` may only be student or instructor (CHECK constraint "user_role");
- new nullable columns on `submissions`: `enqueued_at` (when the job queue accepted the job),
  `lease_expires_at` and `worker_id` (who holds the claim, until when).

Rows keep their data. Queued rows get `enqueued_at` NULL, so the sweeper enqueues them again;
running rows left by an old process keep their status and get no lease (NULL): a claim with no
lease counts as expired, so the sweeper enqueues them again and any worker may take them over.

Downgrade drops the columns and constraints; "failed" rows (a stored INTERNAL_ERROR verdict)
become "done", the status the old code gave such rows.

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-20
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = ("queued", "running", "done", "failed")
ROLES = ("student", "instructor")


def _in(column: str, values: tuple[str, ...]) -> str:
    """The CHECK expression SQLAlchemy's `Enum(native_enum=False, create_constraint=True)` emits."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _refuse_unknown(table: str, column: str, allowed: tuple[str, ...]) -> None:
    """Raises RuntimeError naming the rows' values outside `allowed` (the CHECK would refuse them)."""
    if context.is_offline_mode():
        return
    found = (
        op.get_bind()
        .execute(
            sa.text(
                f"SELECT {column}, COUNT(*) FROM {table} WHERE {column} IS NULL OR NOT ({_in(column, allowed)}) "
                f"GROUP BY {column}"
            )
        )
        .all()
    )
    if found:
        listed = ", ".join(f"{value!r} ({count} rows)" for value, count in found)
        raise RuntimeError(
            f"{table}.{column} holds values outside {', '.join(allowed)}: {listed}; "
            f"correct those rows, then migrate again"
        )


def upgrade() -> None:
    _refuse_unknown("submissions", "status", STATUSES)
    _refuse_unknown("users", "role", ROLES)
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("enqueued_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("worker_id", sa.String(64), nullable=True))
        batch.create_check_constraint("submission_status", _in("status", STATUSES))
    with op.batch_alter_table("users") as batch:
        batch.create_check_constraint("user_role", _in("role", ROLES))


def downgrade() -> None:
    op.execute("UPDATE submissions SET status = 'done' WHERE status = 'failed'")
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint("user_role", type_="check")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint("submission_status", type_="check")
        batch.drop_column("worker_id")
        batch.drop_column("lease_expires_at")
        batch.drop_column("enqueued_at")
