"""Hints opened one at a time (server/web/hint_opening.py): table `hint_reveals` with user_id
("fk_hint_reveals_user", indexed), problem, hint (from 1), reason ("hint_reveal_reason":
attempts, request), created_at; (user_id, problem, hint) unique
("uq_hint_reveals_user_problem_hint").

New table only: existing rows are untouched.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "hint_reveals",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("problem", sa.String(64), nullable=False),
        sa.Column("hint", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_hint_reveals_user"),
        sa.UniqueConstraint("user_id", "problem", "hint", name="uq_hint_reveals_user_problem_hint"),
        sa.CheckConstraint("reason IN ('attempts', 'request')", name="hint_reveal_reason"),
    )
    op.create_index("ix_hint_reveals_user_id", "hint_reveals", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_hint_reveals_user_id", table_name="hint_reveals")
    op.drop_table("hint_reveals")
