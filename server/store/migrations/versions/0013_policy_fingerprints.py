"""Insight for teachers (policy clusters, identical programs): `submissions.policy_fingerprint` (16 hex digits,
graders/insight.py) and `submissions.program_digest` (64 hex digits, the exported programs blind
to names), indexed by (problem, policy_fingerprint); `courses.peer_insight` (boolean, default false): whether
a student's panel may say how many others in the course made the same mistake and fixed it.

Backfill: every graded submission's fingerprint is computed from its stored verdict JSON (the
fingerprint needs nothing else), in batches of 500; INTERNAL_ERROR verdicts get none. Program
digests need the exported programs, which are not kept, so older submissions have none (a
regrade computes them).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
BATCH = 500


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("policy_fingerprint", sa.String(16), nullable=True))
        batch.add_column(sa.Column("program_digest", sa.String(64), nullable=True))
    op.create_index("ix_submissions_problem_fingerprint", "submissions", ["problem", "policy_fingerprint"])
    with op.batch_alter_table("courses") as batch:
        batch.add_column(sa.Column("peer_insight", sa.Boolean(), nullable=False, server_default=sa.false()))
    backfill(op.get_bind())


def backfill(connection: sa.engine.Connection) -> int:
    """Fingerprints every graded submission without one; returns how many it fingerprinted."""
    from graders.insight import fingerprint

    table = sa.table(
        "submissions",
        sa.column("id", sa.String),
        sa.column("verdict", sa.String),
        sa.column("result_json", sa.Text),
        sa.column("policy_fingerprint", sa.String),
    )
    done, after = 0, ""
    while True:
        rows = connection.execute(
            sa.select(table.c.id, table.c.result_json)
            .where(
                table.c.id > after,
                table.c.result_json.is_not(None),
                table.c.policy_fingerprint.is_(None),
                table.c.verdict.is_not(None),
                table.c.verdict != "INTERNAL_ERROR",
            )
            .order_by(table.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return done
        for submission_id, result_json in rows:
            try:
                found = fingerprint(json.loads(result_json))
            except Exception:  # noqa: BLE001 - an unreadable old report keeps no fingerprint
                found = None
            if found is not None:
                connection.execute(
                    sa.update(table).where(table.c.id == submission_id).values(policy_fingerprint=found.key)
                )
                done += 1
        after = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("courses") as batch:
        batch.drop_column("peer_insight")
    op.drop_index("ix_submissions_problem_fingerprint", table_name="submissions")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("program_digest")
        batch.drop_column("policy_fingerprint")
