"""Courses, assignments, enrollments, extensions (server/courses/models.py) and regrades
(server/courses/regrade.py).

- `courses`: key (unique), title, the LMS context of LTI courses (platform_id, "fk_courses_platform",
  ON DELETE SET NULL; deployment_id; context_id; the three unique together, "uq_courses_context"),
  created_at;
- `assignments`: course_id ("fk_assignments_course", ON DELETE CASCADE), problem (unique per
  course), opens_at, due_at, late_rule ("assignment_late_rule": none, penalty), penalty_per_day,
  penalty_cap, grade_rule ("assignment_grade_rule": best, last), created_at, updated_at;
- `enrollments`: course_id (CASCADE), user_id (indexed), role ("enrollment_role"), unique per course;
- `extensions`: assignment_id (CASCADE), user_id, due_at, unique per assignment;
- `regrades`: problem (indexed), problem_version, requested_by, submissions, created_at;
- `regraded_verdicts`: regrade_id (CASCADE, indexed), submission_id (indexed), the verdict before
  the regrade (status, verdict, score, problem_version, result_json, finished_at).

New tables only: existing rows are untouched.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _check(column: str, values: tuple[str, ...], name: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(f"{column} IN ({', '.join(repr(v) for v in values)})", name=name)


def upgrade() -> None:
    op.create_table(
        "courses",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=True),
        sa.Column("deployment_id", sa.String(255), nullable=True),
        sa.Column("context_id", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["platform_id"], ["lti_platforms.id"], name="fk_courses_platform", ondelete="SET NULL"),
        sa.UniqueConstraint("key"),
        sa.UniqueConstraint("platform_id", "deployment_id", "context_id", name="uq_courses_context"),
    )
    op.create_table(
        "assignments",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("course_id", sa.Integer(), nullable=False),
        sa.Column("problem", sa.String(64), nullable=False),
        sa.Column("opens_at", sa.DateTime(), nullable=True),
        sa.Column("due_at", sa.DateTime(), nullable=True),
        sa.Column("late_rule", sa.String(16), nullable=False),
        sa.Column("penalty_per_day", sa.Float(), nullable=False),
        sa.Column("penalty_cap", sa.Float(), nullable=False),
        sa.Column("grade_rule", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["courses.id"], name="fk_assignments_course", ondelete="CASCADE"),
        sa.UniqueConstraint("course_id", "problem", name="uq_assignments_course_problem"),
        _check("late_rule", ("none", "penalty"), "assignment_late_rule"),
        _check("grade_rule", ("best", "last"), "assignment_grade_rule"),
    )
    op.create_table(
        "enrollments",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("course_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["courses.id"], name="fk_enrollments_course", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_enrollments_user"),
        sa.UniqueConstraint("course_id", "user_id", name="uq_enrollments_course_user"),
        _check("role", ("student", "instructor"), "enrollment_role"),
    )
    op.create_index("ix_enrollments_user_id", "enrollments", ["user_id"])
    op.create_table(
        "extensions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["assignment_id"], ["assignments.id"], name="fk_extensions_assignment", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_extensions_user"),
        sa.UniqueConstraint("assignment_id", "user_id", name="uq_extensions_assignment_user"),
    )
    op.create_table(
        "regrades",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("problem", sa.String(64), nullable=False),
        sa.Column("problem_version", sa.String(32), nullable=True),
        sa.Column("requested_by", sa.String(254), nullable=False),
        sa.Column("submissions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_regrades_problem", "regrades", ["problem"])
    op.create_table(
        "regraded_verdicts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("regrade_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("problem_version", sa.String(32), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["regrade_id"], ["regrades.id"], name="fk_regraded_verdicts_regrade", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], name="fk_regraded_verdicts_submission"),
        sa.UniqueConstraint("regrade_id", "submission_id", name="uq_regraded_verdicts_submission"),
    )
    op.create_index("ix_regraded_verdicts_regrade_id", "regraded_verdicts", ["regrade_id"])
    op.create_index("ix_regraded_verdicts_submission_id", "regraded_verdicts", ["submission_id"])


def downgrade() -> None:
    op.drop_index("ix_regraded_verdicts_submission_id", table_name="regraded_verdicts")
    op.drop_index("ix_regraded_verdicts_regrade_id", table_name="regraded_verdicts")
    op.drop_table("regraded_verdicts")
    op.drop_index("ix_regrades_problem", table_name="regrades")
    op.drop_table("regrades")
    op.drop_table("extensions")
    op.drop_index("ix_enrollments_user_id", table_name="enrollments")
    op.drop_table("enrollments")
    op.drop_table("assignments")
    op.drop_table("courses")
