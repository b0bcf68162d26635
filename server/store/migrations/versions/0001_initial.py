"""The schema as the judge had it before migrations (the "legacy" schema).

Until then the tables were made by `Base.metadata.create_all` and grown by adding missing columns
by hand. A database made that way is adopted by `server.store.migrate.upgrade`: it is brought to
exactly this schema (`legacy_metadata`), stamped "0001" and upgraded from there.

Frozen: `server.store.migrate` reads `legacy_metadata` from this module. Never change it; change the
schema in a new revision.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _users() -> list[sa.schema.SchemaItem]:
    return [
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("display_name", sa.String(80), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Index("ix_users_email", "email", unique=True),
    ]


def _submissions() -> list[sa.schema.SchemaItem]:
    return [
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("problem", sa.String(64), nullable=False),
        sa.Column("problem_version", sa.String(32), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),  # queued | running | done
        sa.Column("verdict", sa.String(32), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Index("ix_submissions_user_id", "user_id"),
        sa.Index("ix_submissions_problem", "problem"),
        sa.Index("ix_submissions_status", "status"),
    ]


def legacy_metadata() -> sa.MetaData:
    """The tables of this revision, as `create_all` made them (a new MetaData on each call)."""
    metadata = sa.MetaData()
    sa.Table("users", metadata, *_users())
    sa.Table("submissions", metadata, *_submissions())
    return metadata


def upgrade() -> None:
    op.create_table("users", *_users())
    op.create_table("submissions", *_submissions())


def downgrade() -> None:
    op.drop_table("submissions")
    op.drop_table("users")
