"""Insight for the people who teach: which policies a class got wrong, and which
students handed in the same programs (docs/ARCHITECTURE.md, "Insight").

- **Clusters.** The graded submissions of one problem version, grouped by policy fingerprint
  (`graders.insight`, stored with each verdict): how many students (distinct owners: a web
  account, an API client) and submissions, the verdict, one sentence in the panel's words, the
  first and the latest example, and how many of the cluster's students later got ACCEPTED.
- **Identical programs.** Submissions of different owners whose exported programs are the same
  up to names (`program_digest`). For short exercises this is common and innocent: it is a prompt
  to look, never a verdict. Course staff see their course's only (`server.authz`).

Everything is read from the `submissions` table; a class of a few thousand submissions is
grouped in memory in milliseconds.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from graders.insight import fingerprint
from server.store.courses import Course, CourseRole, Enrollment
from server.store.submissions import SubmissionRecord, SubmissionStatus


@dataclass
class Cluster:
    """One policy fingerprint's submissions (see the module docstring). `example` and `latest`
    are submission ids; `later_accepted` counts the cluster's students with an ACCEPTED
    submission made after their first one in the cluster (0 for the ACCEPTED cluster itself)."""

    fingerprint: str
    students: int
    submissions: int
    verdict: str
    summary: str
    example: str
    latest: str
    later_accepted: int


@dataclass
class IdenticalGroup:
    """Submissions of `students` different owners with the same programs up to names."""

    submissions: list[str]
    students: int


@dataclass
class Insight:
    """What `insight` found for one problem version (and course, when given)."""

    problem: str
    version: str | None
    course: str | None
    clusters: list[Cluster] = field(default_factory=list)
    identical_groups: list[IdenticalGroup] = field(default_factory=list)
    graded: int = 0
    without_programs: int = 0  # graded before program digests were kept (regrade to fill them)

    def as_json(self) -> dict[str, Any]:
        """The CLI's `--json`: `{"problem", "version", "clusters": [...], "identical_groups": [...]}`."""
        return {
            "problem": self.problem,
            "version": self.version,
            "course": self.course,
            "graded": self.graded,
            "clusters": [asdict(c) for c in self.clusters],
            "identical_groups": [asdict(g) for g in self.identical_groups],
        }


def owner_of(row: Any) -> str:
    """Who made a submission, for counting students: a web account, an API client, or (an
    anonymous API submission) the submission alone."""
    if row.user_id is not None:
        return f"user:{row.user_id}"
    if row.client_id is not None:
        return f"client:{row.client_id}"
    return f"anonymous:{row.id}"


def versions(engine: Engine, problem: str) -> list[str]:
    """The problem versions that have graded submissions, newest first (by their latest verdict)."""
    sessions = sessionmaker(engine)
    with sessions() as session:
        rows = session.execute(
            select(SubmissionRecord.problem_version, SubmissionRecord.finished_at).where(
                SubmissionRecord.problem == problem,
                SubmissionRecord.problem_version.is_not(None),
                SubmissionRecord.status == SubmissionStatus.DONE,
            )
        ).all()
    latest: dict[str, datetime] = {}
    for version, finished in rows:
        if version is not None and finished is not None and (version not in latest or finished > latest[version]):
            latest[version] = finished
    return sorted(latest, key=lambda v: latest[v], reverse=True)


def insight(engine: Engine, problem: str, *, version: str | None = None, course: Course | None = None) -> Insight:
    """Clusters and identical groups of `problem`'s graded submissions of `version` (default: the
    version with the latest verdict), of `course`'s students only when given."""
    version = version or next(iter(versions(engine, problem)), None)
    found = Insight(problem=problem, version=version, course=course.key if course is not None else None)
    if version is None:
        return found
    sessions = sessionmaker(engine)
    t = SubmissionRecord
    query = select(t.id, t.user_id, t.client_id, t.verdict, t.policy_fingerprint, t.program_digest, t.created_at).where(
        t.problem == problem,
        t.problem_version == version,
        t.status == SubmissionStatus.DONE,
        t.policy_fingerprint.is_not(None),
    )
    with sessions() as session:
        if course is not None:
            students = select(Enrollment.user_id).where(
                Enrollment.course_id == course.id, Enrollment.role == CourseRole.STUDENT
            )
            query = query.where(t.user_id.in_(students))
        rows = sorted(session.execute(query).all(), key=lambda r: (r.created_at, r.id))
        found.graded = len(rows)
        accepted_at: dict[str, datetime] = {}  # owner -> their latest ACCEPTED
        for row in rows:
            if row.verdict == "ACCEPTED":
                accepted_at[owner_of(row)] = row.created_at
        groups: dict[str, list[Any]] = defaultdict(list)
        for row in rows:
            groups[row.policy_fingerprint].append(row)
        examples = {key: members[0].id for key, members in groups.items()}
        stored = dict(session.execute(select(t.id, t.result_json).where(t.id.in_(examples.values()))).all())
    for key, members in groups.items():
        found.clusters.append(_cluster(key, members, accepted_at, stored.get(examples[key])))
    found.clusters.sort(key=lambda c: (-c.students, -c.submissions, c.verdict, c.fingerprint))
    _add_identical_groups(found, rows)
    return found


def _cluster(key: str, members: list[Any], accepted_at: dict[str, datetime], example_json: str | None) -> Cluster:
    """The cluster of one policy fingerprint's `members` (oldest first), given when each owner
    last got ACCEPTED and the stored report of the first member (for the policy's sentence)."""
    first_by_owner: dict[str, datetime] = {}
    for row in members:
        first_by_owner.setdefault(owner_of(row), row.created_at)
    verdict = members[0].verdict
    later = (
        0
        if verdict == "ACCEPTED"
        else sum(1 for owner, first in first_by_owner.items() if owner in accepted_at and accepted_at[owner] > first)
    )
    try:
        summary = fingerprint(json.loads(example_json or "{}"))
    except Exception:  # noqa: BLE001 - an unreadable report: the cluster is still counted
        summary = None
    return Cluster(
        fingerprint=key,
        students=len(first_by_owner),
        submissions=len(members),
        verdict=verdict,
        summary=summary.summary if summary else "",
        example=members[0].id,
        latest=members[-1].id,
        later_accepted=later,
    )


def _add_identical_groups(found: Insight, rows: list[Any]) -> None:
    """Adds to `found` the groups of `rows` by different owners with the same program digest,
    and counts the rows graded before digests were kept."""
    programs: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if row.program_digest:
            programs[row.program_digest].append(row)
        else:
            found.without_programs += 1
    for members in programs.values():
        owners = {owner_of(r) for r in members}
        if len(owners) >= 2:
            found.identical_groups.append(IdenticalGroup(submissions=[r.id for r in members], students=len(owners)))
    found.identical_groups.sort(key=lambda g: (-g.students, -len(g.submissions), g.submissions[0]))


def peers_who_fixed(engine: Engine, record: SubmissionRecord, course_ids: list[int]) -> int:
    """How many other students of `course_ids` made the same policy mistake on the same problem
    version (`record`'s fingerprint) and later got ACCEPTED: what a student's panel may say when
    their course allows it. 0 for an ACCEPTED submission or one without a fingerprint."""
    if not course_ids or record.policy_fingerprint is None or record.verdict == "ACCEPTED" or record.user_id is None:
        return 0
    t = SubmissionRecord
    students = select(Enrollment.user_id).where(
        Enrollment.course_id.in_(course_ids), Enrollment.role == CourseRole.STUDENT
    )
    sessions = sessionmaker(engine)
    with sessions() as session:
        rows = session.execute(
            select(t.user_id, t.verdict, t.policy_fingerprint, t.created_at).where(
                t.problem == record.problem,
                t.problem_version == record.problem_version,
                t.status == SubmissionStatus.DONE,
                t.user_id.in_(students),
                t.user_id != record.user_id,
            )
        ).all()
    first_mistake: dict[int, datetime] = {}
    accepted: dict[int, datetime] = {}
    for user_id, verdict, key, created in sorted(rows, key=lambda r: r.created_at):
        if user_id is None:  # an API client's submission: no student to count
            continue
        if key == record.policy_fingerprint:
            first_mistake.setdefault(user_id, created)
        if verdict == "ACCEPTED":
            accepted[user_id] = created
    return sum(1 for user, first in first_mistake.items() if user in accepted and accepted[user] > first)
