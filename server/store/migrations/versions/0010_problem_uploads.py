"""Problem uploads that report (server/problems/uploads.py): table `problem_uploads` with id, slug, version,
state ("upload_state": validating, done, failed), publish, requested_by, done_files, total_files,
detail, result_json, created_at, updated_at, finished_at.

New table only.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "problem_uploads",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("slug", sa.String(64), nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("publish", sa.Boolean(), nullable=False),
        sa.Column("requested_by", sa.String(254), nullable=False),
        sa.Column("done_files", sa.Integer(), nullable=False),
        sa.Column("total_files", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint("state IN ('validating', 'done', 'failed')", name="upload_state"),
    )


def downgrade() -> None:
    op.drop_table("problem_uploads")
