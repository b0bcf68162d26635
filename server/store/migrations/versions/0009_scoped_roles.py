"""Roles with a scope (server/authz.py): a site role on the account, a course role per enrollment.

- `users.role` ("user_role"): `user` or `admin` (was student or instructor): every instructor
  with a password account becomes an admin, every student a plain user. An LTI account (one with
  an `lti_users` row) becomes a plain user even when it was an instructor: launches with an LMS
  Instructor role made those, which is the hole this revision closes (their course roles stay,
  as staff enrollments); `remat-judge users role EMAIL admin` makes one an admin again;
- `enrollments.role` ("enrollment_role"): `staff` or `student` (was instructor or student);
- `lti_users.role`: the course role of the user's latest launch, `staff` or `student`;
- `users.contact_email` (new, nullable, not unique): the email a platform sent for an LTI account.
  LTI accounts no longer hold a real email in `users.email` (it would block a password sign-up
  with that email): each gets the synthetic `lti-<24 hex of SHA-256(issuer NUL sub)>@lti.invalid`
  it would get today, and its platform email moves to `contact_email`;
- `courses.solutions_after_deadline` (new, boolean): whether the reference solution opens for
  the course's students once their deadline has passed. True for courses an admin made, false
  for courses made by LMS launches (whoever can make an LMS course could otherwise read any
  problem's reference by setting a past deadline); an admin turns it on per course.

Downgrade maps the roles back (admin -> instructor, user -> student, staff -> instructor) and
drops the two columns; the LTI accounts keep their synthetic emails.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _in(column: str, values: tuple[str, ...]) -> str:
    """The CHECK expression SQLAlchemy's `Enum(native_enum=False, create_constraint=True)` emits."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _recheck(table: str, column: str, name: str, mapping: dict[str, str], allowed: tuple[str, ...]) -> None:
    """Drops the CHECK constraint `name`, maps the column's values, and checks the new ones."""
    with op.batch_alter_table(table) as batch:
        batch.drop_constraint(name, type_="check")
    for old, new in mapping.items():
        op.execute(sa.text(f"UPDATE {table} SET {column} = :new WHERE {column} = :old").bindparams(new=new, old=old))
    with op.batch_alter_table(table) as batch:
        batch.create_check_constraint(name, _in(column, allowed))


def _synthetic_email(issuer: str, sub: str) -> str:
    """The email an LTI account gets (`server.lti.models.LtiStore.account_for`)."""
    return f"lti-{hashlib.sha256((issuer + chr(0) + sub).encode('utf-8')).hexdigest()[:24]}@lti.invalid"


def upgrade() -> None:
    op.execute("UPDATE users SET role = 'student' WHERE role = 'instructor' AND id IN (SELECT user_id FROM lti_users)")
    _recheck("users", "role", "user_role", {"instructor": "admin", "student": "user"}, ("user", "admin"))
    _recheck("enrollments", "role", "enrollment_role", {"instructor": "staff"}, ("staff", "student"))
    op.execute("UPDATE lti_users SET role = 'staff' WHERE role = 'instructor'")
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("contact_email", sa.String(254), nullable=True))
    with op.batch_alter_table("courses") as batch:
        batch.add_column(sa.Column("solutions_after_deadline", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute(
        sa.text("UPDATE courses SET solutions_after_deadline = :yes WHERE platform_id IS NULL").bindparams(yes=True)
    )
    if context.is_offline_mode():
        return
    bind = op.get_bind()
    links = bind.execute(
        sa.text(
            "SELECT l.user_id, l.issuer, l.sub, l.email, u.email FROM lti_users l "
            "JOIN users u ON u.id = l.user_id ORDER BY l.id"
        )
    ).all()
    for user_id, issuer, sub, platform_email, email in links:
        synthetic = _synthetic_email(issuer, sub)
        if email != synthetic:
            taken = bind.execute(sa.text("SELECT id FROM users WHERE email = :e"), {"e": synthetic}).first()
            if taken is not None:  # an account of this identity exists already: leave this one as it is
                continue
        contact = platform_email or (None if email.endswith("@lti.invalid") else email)
        bind.execute(
            sa.text("UPDATE users SET email = :e, contact_email = :c WHERE id = :id"),
            {"e": synthetic, "c": contact and contact.lower(), "id": user_id},
        )


def downgrade() -> None:
    with op.batch_alter_table("courses") as batch:
        batch.drop_column("solutions_after_deadline")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("contact_email")
    op.execute("UPDATE lti_users SET role = 'instructor' WHERE role = 'staff'")
    _recheck("enrollments", "role", "enrollment_role", {"staff": "instructor"}, ("student", "instructor"))
    _recheck("users", "role", "user_role", {"admin": "instructor", "user": "student"}, ("student", "instructor"))
