"""API clients and what their submissions carry: ownership, the client's own id, callbacks.

- table `api_clients`: name (unique), SHA-256 of the API key (unique), the key's first
  characters, the callback signing secret, the problem scope (JSON list or NULL: all), the
  allowed callback URL prefixes (JSON list), created_at, revoked_at;
- on `submissions`: `client_id` (foreign key "fk_submissions_client_id"), `external_id` (the
  client's own student or attempt id), `callback_url`, and the callback's state
  (`callback_status` checked by the constraint "callback_status", `callback_attempts`,
  `callback_last_code`, `callback_last_error`, `callback_next_at`); an index on
  (client_id, external_id).

Existing rows belong to no client and have no callback.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CALLBACK_STATUSES = ("pending", "delivered", "failed", "refused")


def upgrade() -> None:
    op.create_table(
        "api_clients",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("key_prefix", sa.String(16), nullable=False),
        sa.Column("callback_secret", sa.String(128), nullable=False),
        sa.Column("problems", sa.Text(), nullable=True),
        sa.Column("callback_allow", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_api_clients_name", "api_clients", ["name"], unique=True)
    op.create_index("ix_api_clients_key_hash", "api_clients", ["key_hash"], unique=True)
    statuses = ", ".join(repr(v) for v in CALLBACK_STATUSES)
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("client_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("external_id", sa.String(128), nullable=True))
        batch.add_column(sa.Column("callback_url", sa.Text(), nullable=True))
        batch.add_column(sa.Column("callback_status", sa.String(16), nullable=True))
        batch.add_column(sa.Column("callback_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("callback_last_code", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("callback_last_error", sa.String(300), nullable=True))
        batch.add_column(sa.Column("callback_next_at", sa.DateTime(), nullable=True))
        batch.create_foreign_key("fk_submissions_client_id", "api_clients", ["client_id"], ["id"])
        batch.create_check_constraint("callback_status", f"callback_status IN ({statuses})")
        batch.create_index("ix_submissions_client_external", ["client_id", "external_id"])


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_index("ix_submissions_client_external")
        batch.drop_constraint("callback_status", type_="check")
        batch.drop_constraint("fk_submissions_client_id", type_="foreignkey")
        for column in (
            "callback_next_at",
            "callback_last_error",
            "callback_last_code",
            "callback_attempts",
            "callback_status",
            "callback_url",
            "external_id",
            "client_id",
        ):
            batch.drop_column(column)
    op.drop_index("ix_api_clients_key_hash", table_name="api_clients")
    op.drop_index("ix_api_clients_name", table_name="api_clients")
    op.drop_table("api_clients")
