"""Class leaderboards of open (budget) problems: `courses.board_names` (boolean, default false):
whether a course's board shows its students' display names to the students (false: anonymous,
each student sees only their own row named). Staff and admins always see names.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("courses") as batch:
        batch.add_column(sa.Column("board_names", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("courses") as batch:
        batch.drop_column("board_names")
