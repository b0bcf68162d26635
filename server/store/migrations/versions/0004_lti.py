"""LTI 1.3: registered platforms and their deployments, login initiations (state and nonce),
used nonces, platform users, resource links with their AGS endpoint, one-time launch tokens.

- table `lti_platforms`: issuer, client_id (unique together: "uq_lti_platforms_issuer_client"),
  auth_login_url, auth_token_url, keyset_url, token_audience (NULL: the token URL), created_at;
- table `lti_deployments`: platform_id (foreign key "fk_lti_deployments_platform", ON DELETE
  CASCADE), deployment_id; unique together ("uq_lti_deployments_platform_deployment");
- table `lti_logins`: state_hash (SHA-256 of the state, primary key), nonce, platform_id
  ("fk_lti_logins_platform"), created_at, expires_at (indexed);
- table `lti_nonces`: issuer, nonce (unique together: "uq_lti_nonces_issuer_nonce"), expires_at
  (indexed);
- table `lti_users`: issuer, sub (unique together: "uq_lti_users_issuer_sub"), user_id (foreign
  key "fk_lti_users_user" to users, indexed), name, email, role, created_at, last_launch_at;
- table `lti_resource_links`: platform_id ("fk_lti_resource_links_platform"), deployment_id,
  resource_link_id (the three unique together: "uq_lti_resource_links_link"), context_id, title,
  problem, ags_lineitem, ags_lineitems, ags_scope (JSON list), created_at, updated_at;
- table `lti_launch_tokens`: token_hash (primary key), user_id ("fk_lti_launch_tokens_user"),
  target, expires_at (indexed).

New tables only: existing rows are untouched.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lti_platforms",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("issuer", sa.String(255), nullable=False),
        sa.Column("client_id", sa.String(255), nullable=False),
        sa.Column("auth_login_url", sa.Text(), nullable=False),
        sa.Column("auth_token_url", sa.Text(), nullable=False),
        sa.Column("keyset_url", sa.Text(), nullable=False),
        sa.Column("token_audience", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("issuer", "client_id", name="uq_lti_platforms_issuer_client"),
    )
    op.create_table(
        "lti_deployments",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["lti_platforms.id"], name="fk_lti_deployments_platform", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("platform_id", "deployment_id", name="uq_lti_deployments_platform_deployment"),
    )
    op.create_table(
        "lti_logins",
        sa.Column("state_hash", sa.String(64), primary_key=True),
        sa.Column("nonce", sa.String(64), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["lti_platforms.id"], name="fk_lti_logins_platform", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_lti_logins_expires_at", "lti_logins", ["expires_at"])
    op.create_table(
        "lti_nonces",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("issuer", sa.String(255), nullable=False),
        sa.Column("nonce", sa.String(255), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("issuer", "nonce", name="uq_lti_nonces_issuer_nonce"),
    )
    op.create_index("ix_lti_nonces_expires_at", "lti_nonces", ["expires_at"])
    op.create_table(
        "lti_users",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("issuer", sa.String(255), nullable=False),
        sa.Column("sub", sa.String(255), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_launch_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_lti_users_user"),
        sa.UniqueConstraint("issuer", "sub", name="uq_lti_users_issuer_sub"),
    )
    op.create_index("ix_lti_users_user_id", "lti_users", ["user_id"])
    op.create_table(
        "lti_resource_links",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.String(255), nullable=False),
        sa.Column("resource_link_id", sa.String(255), nullable=False),
        sa.Column("context_id", sa.String(255), nullable=True),
        sa.Column("title", sa.String(255), nullable=True),
        sa.Column("problem", sa.String(64), nullable=False),
        sa.Column("ags_lineitem", sa.Text(), nullable=True),
        sa.Column("ags_lineitems", sa.Text(), nullable=True),
        sa.Column("ags_scope", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["lti_platforms.id"], name="fk_lti_resource_links_platform", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("platform_id", "deployment_id", "resource_link_id", name="uq_lti_resource_links_link"),
    )
    op.create_table(
        "lti_launch_tokens",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_lti_launch_tokens_user"),
    )
    op.create_index("ix_lti_launch_tokens_expires_at", "lti_launch_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_lti_launch_tokens_expires_at", table_name="lti_launch_tokens")
    op.drop_table("lti_launch_tokens")
    op.drop_table("lti_resource_links")
    op.drop_index("ix_lti_users_user_id", table_name="lti_users")
    op.drop_table("lti_users")
    op.drop_index("ix_lti_nonces_expires_at", table_name="lti_nonces")
    op.drop_table("lti_nonces")
    op.drop_index("ix_lti_logins_expires_at", table_name="lti_logins")
    op.drop_table("lti_logins")
    op.drop_table("lti_deployments")
    op.drop_table("lti_platforms")
