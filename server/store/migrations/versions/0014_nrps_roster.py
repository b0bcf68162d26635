"""Rosters from the LMS (LTI Names and Role Provisioning Services 2.0):

- `lti_contexts` (new): an LMS context's NRPS memberships URL (platform CASCADE, deployment,
  context id; unique per context), from the latest launch that offered one;
- `course_roster` (new): an LMS course's members as the last successful sync listed them: the
  LMS user id (`member_id`, unique per course), the judge account once they launched (nullable),
  name, email, roles (JSON), staff and active flags, the sync's time.

Both are new tables, so nothing is backfilled and SQLite needs no batch copy; the downgrade drops
them.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lti_contexts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.String(255), nullable=False),
        sa.Column("context_id", sa.String(255), nullable=False),
        sa.Column("memberships_url", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["lti_platforms.id"], name="fk_lti_contexts_platform", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("platform_id", "deployment_id", "context_id", name="uq_lti_contexts_context"),
    )
    op.create_table(
        "course_roster",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("course_id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.String(255), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("roles", sa.Text(), nullable=False),
        sa.Column("staff", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("synced_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["courses.id"], name="fk_course_roster_course", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_course_roster_user"),
        sa.UniqueConstraint("course_id", "member_id", name="uq_course_roster_member"),
    )


def downgrade() -> None:
    op.drop_table("course_roster")
    op.drop_table("lti_contexts")
