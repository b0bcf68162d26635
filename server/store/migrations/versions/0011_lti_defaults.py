"""Inside a real LMS on the defaults (an iframe, one-URL registration, grade passback):

- `lti_registration_urls` (new): one-time LTI Dynamic Registration URLs (token SHA-256, who made
  it, expiry, when it was used and for which platform);
- `lti_logins.storage_target`, `.binding_hash`, `.relaunch_json` (new, nullable): a login's
  postMessage storage frame, the SHA-256 of the value it stored there, and its parameters for a
  new-window relaunch;
- `assignments.grace_minutes` (new, integer, default 0): minutes after the deadline still on time.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lti_registration_urls",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_by", sa.String(254), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=True),
        sa.Column("platform_id", sa.Integer(), nullable=True),
    )
    with op.batch_alter_table("lti_logins") as batch:
        batch.add_column(sa.Column("storage_target", sa.String(255), nullable=True))
        batch.add_column(sa.Column("binding_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("relaunch_json", sa.Text(), nullable=True))
    with op.batch_alter_table("assignments") as batch:
        batch.add_column(sa.Column("grace_minutes", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("assignments") as batch:
        batch.drop_column("grace_minutes")
    with op.batch_alter_table("lti_logins") as batch:
        batch.drop_column("relaunch_json")
        batch.drop_column("binding_hash")
        batch.drop_column("storage_target")
    op.drop_table("lti_registration_urls")
