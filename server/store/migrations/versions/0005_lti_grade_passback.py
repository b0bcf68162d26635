"""LTI grade passback (AGS): one row per (resource link, platform user) of a student's launch.

- table `lti_grade_passbacks`: resource_link_id (foreign key "fk_lti_grade_passbacks_link", ON
  DELETE CASCADE), lti_user_id ("fk_lti_grade_passbacks_lti_user"), the two unique together
  ("uq_lti_grade_passbacks_link_user"); user_id (the judge account, "fk_lti_grade_passbacks_user",
  indexed); best_score; the score waiting to be sent (pending_score, pending_verdict_at,
  pending_submitted_at, pending_submission_id, pending_seq); what was sent (last_sent_score,
  last_sent_timestamp) and the timestamp reserved before each POST (reserved_timestamp); status
  (checked by the constraint "lti_passback_status"), attempts, next_at (indexed; also the claim
  lease), last_code, last_error, created_at, updated_at.

New table only: existing rows are untouched.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = ("idle", "pending", "delivered", "failed", "refused")


def upgrade() -> None:
    statuses = ", ".join(repr(v) for v in STATUSES)
    op.create_table(
        "lti_grade_passbacks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("resource_link_id", sa.Integer(), nullable=False),
        sa.Column("lti_user_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("best_score", sa.Float(), nullable=True),
        sa.Column("pending_score", sa.Float(), nullable=True),
        sa.Column("pending_verdict_at", sa.DateTime(), nullable=True),
        sa.Column("pending_submitted_at", sa.DateTime(), nullable=True),
        sa.Column("pending_submission_id", sa.String(32), nullable=True),
        sa.Column("pending_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_sent_score", sa.Float(), nullable=True),
        sa.Column("last_sent_timestamp", sa.DateTime(), nullable=True),
        sa.Column("reserved_timestamp", sa.DateTime(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("next_at", sa.DateTime(), nullable=True),
        sa.Column("last_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(300), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["resource_link_id"], ["lti_resource_links.id"], name="fk_lti_grade_passbacks_link", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["lti_user_id"], ["lti_users.id"], name="fk_lti_grade_passbacks_lti_user"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_lti_grade_passbacks_user"),
        sa.UniqueConstraint("resource_link_id", "lti_user_id", name="uq_lti_grade_passbacks_link_user"),
        sa.CheckConstraint(f"status IN ({statuses})", name="lti_passback_status"),
    )
    op.create_index("ix_lti_grade_passbacks_user_id", "lti_grade_passbacks", ["user_id"])
    op.create_index("ix_lti_grade_passbacks_next_at", "lti_grade_passbacks", ["next_at"])


def downgrade() -> None:
    op.drop_index("ix_lti_grade_passbacks_next_at", table_name="lti_grade_passbacks")
    op.drop_index("ix_lti_grade_passbacks_user_id", table_name="lti_grade_passbacks")
    op.drop_table("lti_grade_passbacks")
