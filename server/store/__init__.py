"""Persistence, the ground floor of the server: every table of the judge and the store that reads
and writes it, one module per aggregate, on the base of `db` (the engine, timestamps, the rules
every write follows):

- `accounts`: users, API clients and web sessions (`UserStore`, `ClientStore`, `SessionStore`);
- `submissions`: submissions and idempotency keys, one store per concern (`SubmissionIntake`,
  `LeaseStore`, `CallbackOutbox`, `SubmissionReports`; `SubmissionStore` is all four);
- `courses` (tables, and the values of an assignment's rules) and `course_store` (`CourseStore`):
  courses, enrollments, assignments, extensions, LMS rosters; `regrades` (`RegradeStore`);
- `lti` (tables), `lti_store` (`LtiStore`, `RegistrationStore`), `lti_launches` (the launches'
  one-time states), `lti_passback` (`PassbackStore`, `LtiCourseGrades`, which implements
  `lms_grades.LmsGrades`: what a course asks of the LMS side of its grades, `NoLms` without one);
- `problems`: uploaded problem packages (`UploadStore`); `hints`: hints students opened
  (`HintStore`).

Also database faults (`faults`: what counts as the database being away, waiting for it, the 503
it becomes) and the schema's migrations (`migrate`, `migrations/`). Importing this package
registers every table on `Base.metadata` (what the migrations' autogenerate compares). It imports
nothing of the server above it (a contract in pyproject.toml).
"""

from __future__ import annotations

from server.store.accounts import (
    NO_PASSWORD,
    ApiClientRecord,
    ClientStore,
    SessionStore,
    SessionView,
    SiteRole,
    UserRecord,
    UserStore,
    WebSession,
    token_hash,
)
from server.store.course_store import CourseStore
from server.store.courses import (
    Assignment,
    Attempt,
    Course,
    CourseError,
    CourseRole,
    Enrollment,
    Extension,
    GradeRule,
    LateRule,
    Listed,
    Policy,
    RosterMember,
    context_key,
)
from server.store.db import Base, UTCDateTime, aware, enum_column, make_engine, rowcount, utcnow
from server.store.hints import HintReveal, HintStore, RevealReason
from server.store.lti import (
    DueScore,
    LtiContext,
    LtiDeployment,
    LtiGradePassback,
    LtiLaunchToken,
    LtiLogin,
    LtiNonce,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    PassbackStatus,
    PassbackView,
    PendingLogin,
    PlatformView,
    RegistrationUrl,
    lti_email,
    sha256_hex,
)
from server.store.lti_passback import LtiCourseGrades, PassbackStore
from server.store.lti_store import LtiStore, RegistrationStore
from server.store.problems import ProblemUpload, UploadState, UploadStore, UploadView
from server.store.regrades import Change, Progress, Regrade, RegradedVerdict, RegradeStore
from server.store.submissions import (
    FINISHED,
    SUBMISSION_ID,
    CallbackOutbox,
    CallbackStatus,
    Claim,
    Idempotency,
    IdempotencyKey,
    IdempotencyKeyTaken,
    LeaseStore,
    StudentRow,
    SubmissionIntake,
    SubmissionRecord,
    SubmissionReports,
    SubmissionStatus,
    SubmissionStore,
)

__all__ = [
    "ApiClientRecord",
    "Assignment",
    "Attempt",
    "Base",
    "CallbackOutbox",
    "CallbackStatus",
    "Change",
    "Claim",
    "ClientStore",
    "Course",
    "CourseError",
    "CourseRole",
    "CourseStore",
    "DueScore",
    "Enrollment",
    "Extension",
    "FINISHED",
    "GradeRule",
    "HintReveal",
    "HintStore",
    "Idempotency",
    "IdempotencyKey",
    "IdempotencyKeyTaken",
    "LateRule",
    "LeaseStore",
    "Listed",
    "LtiContext",
    "LtiCourseGrades",
    "LtiDeployment",
    "LtiGradePassback",
    "LtiLaunchToken",
    "LtiLogin",
    "LtiNonce",
    "LtiPlatform",
    "LtiResourceLink",
    "LtiStore",
    "LtiUser",
    "NO_PASSWORD",
    "PassbackStatus",
    "PassbackStore",
    "PassbackView",
    "PendingLogin",
    "PlatformView",
    "Policy",
    "ProblemUpload",
    "Progress",
    "RegistrationStore",
    "RegistrationUrl",
    "Regrade",
    "RegradeStore",
    "RegradedVerdict",
    "RevealReason",
    "RosterMember",
    "SUBMISSION_ID",
    "SessionStore",
    "SessionView",
    "SiteRole",
    "StudentRow",
    "SubmissionIntake",
    "SubmissionRecord",
    "SubmissionReports",
    "SubmissionStatus",
    "SubmissionStore",
    "UTCDateTime",
    "UploadState",
    "UploadStore",
    "UploadView",
    "UserRecord",
    "UserStore",
    "WebSession",
    "aware",
    "context_key",
    "enum_column",
    "lti_email",
    "make_engine",
    "rowcount",
    "sha256_hex",
    "token_hash",
    "utcnow",
]
