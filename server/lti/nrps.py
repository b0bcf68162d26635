"""LTI Names and Role Provisioning Services 2.0 client: an LMS course's roster, for its gradebook.

A launch from a context whose LMS offers the service carries the namesroleservice claim
(`server.lti.launch.memberships_url_of`: `context_memberships_url`, `service_versions` with
"2.0"); the launch stores the URL with the context (`LtiStore.save_memberships_url`). A sync
(`sync_course`: the course page's button, `remat-judge courses sync KEY`) then:

1. gets an OAuth 2.0 client-credentials token with the scope `SCOPE_MEMBERSHIPS`, through the AGS
   client's token code and cache (`server.lti.ags.AgsClient.access_token`: a JWT client assertion
   signed by the tool key); a 401 from the roster makes it fetch a new token once;
2. GETs the memberships URL with `Accept: application/vnd.ims.lti-nrps.v2.membershipcontainer+json`
   through the AGS client's request (`AgsClient.request`: http(s) only, the host looked up once
   and the request pinned to the checked address, special addresses only within
   `REMAT_JUDGE_LTI_ALLOW_NETWORKS`, redirects never followed, TLS verified, time-outs), each page
   read up to `Limits.page_bytes`;
3. follows `Link: <...>; rel="next"` (NRPS 2.0 paging, RFC 8288 links) to at most
   `Limits.pages` pages and `Limits.members` members, on the memberships URL's own origin only (the
   bearer token never goes to another site), never the same page twice;
4. parses each page (`parse_container`) and, only when every page was read and understood,
   replaces the course's stored roster in one transaction (`CourseStore.replace_roster`).

Whatever goes wrong (no service, no token, a refusal, a time-out, a page too big, not JSON, a
member without `user_id`) is a `RosterError` whose message is for the course's staff, and the
roster synced before is kept as it was. Members whose roles make them staff (`role_for`:
Instructor and its sub-roles, ContentDeveloper, Administrator) are staff on the roster, never
students in the gradebook.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from server.delivery.callbacks import describe_error
from server.lti.ags import AgsClient, TokenError, error_message
from server.lti.keys import ToolKey
from server.lti.launch import LaunchError, identifier, person_email, person_name, role_for
from server.lti.lms_http import AgsRefused
from server.platform.text import storable
from server.store.course_store import CourseStore
from server.store.courses import Course, CourseRole, Listed
from server.store.lti import PlatformView
from server.store.lti_store import LtiStore

SCOPE_MEMBERSHIPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
MEMBERSHIP_CONTAINER = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
KEPT = "Nothing was changed: the roster from the last sync is kept."


class RosterError(Exception):
    """A roster that could not be synced; the message says why, in words for the course's staff
    (no token, no traceback). Raised as itself when the platform or the way to it failed."""


class NoRosterService(RosterError):
    """A course with no roster to sync: not made by an LMS, its platform gone, or no launch
    from it offered the service."""


@dataclass(frozen=True)
class Limits:
    """How much of a platform's answer a sync reads.

    Attributes:
        pages: pages followed at most (the first included).
        members: members at most, over every page.
        page_bytes: bytes of one page at most.
    """

    pages: int = 100
    members: int = 20_000
    page_bytes: int = 4 * 1024 * 1024


@dataclass(frozen=True)
class Member:
    """A member of a membership container (LTI NRPS 2.0).

    Attributes:
        user_id: the platform's id of the user (the `sub` of their launches).
        name, email: cleaned as a launch's are (`person_name`, `person_email`), or None.
        roles: the member's LIS roles (strings only).
        active: `status` is Active, or absent (the spec's default); Inactive and Deleted are not.
        staff: the roles make them staff of the course (`role_for`).
    """

    user_id: str
    name: str | None
    email: str | None
    roles: tuple[str, ...]
    active: bool
    staff: bool


@dataclass(frozen=True)
class SyncReport:
    """What a sync stored.

    Attributes:
        members, students, staff, inactive: how many of each the LMS listed (students and staff
            count active members only).
        never_launched: active students who are not in the course on the judge yet.
        pages: how many pages were read.
    """

    members: int
    students: int
    staff: int
    inactive: int
    never_launched: int
    pages: int

    @property
    def message(self) -> str:
        """One sentence for the course's staff, e.g. "Synced the roster from the LMS: 4 members
        (3 students, 1 staff, 0 inactive); 2 students never launched."."""
        return (
            f"Synced the roster from the LMS: {self.members} member{'s' if self.members != 1 else ''} "
            f"({self.students} student{'s' if self.students != 1 else ''}, {self.staff} staff, "
            f"{self.inactive} inactive); {self.never_launched} student{'s' if self.never_launched != 1 else ''} "
            f"never launched."
        )


def parse_container(body: bytes) -> list[Member]:
    """The members of one page of a membership container (LTI NRPS 2.0, the
    `application/vnd.ims.lti-nrps.v2.membershipcontainer+json` media type): a JSON object whose
    `members` is a list of objects, each with a `user_id` and optionally `roles` (a list),
    `status` (Active by default), `name` (or `given_name` and `family_name`) and `email`. Other
    fields (`context`, `id`, `picture`, `message`) are ignored.

    Raises:
        RosterError: not JSON, no `members` list, a member that is not an object, has no
            `user_id` the judge can store (a non-empty string of at most 255 characters), or
            roles that are not a list.
    """
    try:
        data: Any = json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        raise RosterError(f"The LMS's roster is not JSON (it begins {error_message(body)[:80]!r}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("members"), list):
        raise RosterError('The LMS\'s roster has no list of members (its "members" field is missing).')
    members = []
    for number, raw in enumerate(data["members"], 1):
        if not isinstance(raw, dict):
            raise RosterError(f"Member {number} of the LMS's roster is not an object.")
        try:
            user_id = identifier(raw.get("user_id"), "user_id")
        except LaunchError:
            raise RosterError(f"Member {number} of the LMS's roster has no usable user_id.") from None
        roles = raw.get("roles", [])
        if not isinstance(roles, list):
            raise RosterError(f"Member {number} of the LMS's roster ({user_id!r}) has roles that are not a list.")
        kept = tuple(r for r in roles if isinstance(r, str) and storable(r) and len(r) <= 255)
        members.append(
            Member(
                user_id=user_id,
                name=person_name(raw),
                email=person_email(raw),
                roles=kept,
                active=raw.get("status", "Active") not in ("Inactive", "Deleted"),
                staff=role_for(list(kept)) == CourseRole.STAFF,
            )
        )
    return members


_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]*)*)")


def next_page(links: list[str], base: str) -> str | None:
    """The URL of the next page from an answer's `Link` header values (RFC 8288; LTI NRPS 2.0
    pages with `rel="next"`), made absolute against `base` (the page's own URL), or None on the
    last page."""
    for value in links:
        for match in _LINK.finditer(value):
            for parameter in match.group(2).split(";"):
                name, _, given = parameter.strip().partition("=")
                if name.strip().lower() == "rel" and "next" in given.strip().strip('"').lower().split():
                    return urljoin(base, match.group(1).strip())
    return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def _get_page(client: AgsClient, platform: PlatformView, key: ToolKey, url: str, limits: Limits) -> Any:
    """One page of the roster: its answer when 2xx and whole.

    Raises:
        RosterError: no token, the URL refused, a network failure, a non-2xx answer (after one
            new token on a 401), or a page larger than `limits.page_bytes`.
    """
    scopes = (SCOPE_MEMBERSHIPS,)
    for attempt in range(2):
        try:
            token = client.access_token(platform, key, scopes)
        except TokenError as exc:
            raise RosterError(f"The LMS gave the judge no access token for its roster: {exc}.") from None
        try:
            answer = client.request(
                "GET",
                url,
                headers={"Accept": MEMBERSHIP_CONTAINER, "Authorization": f"Bearer {token}"},
                max_bytes=limits.page_bytes,
            )
        except AgsRefused as exc:
            raise RosterError(f"The judge does not call the LMS's roster URL: {exc}.") from None
        except socket.gaierror as exc:
            raise RosterError(f"Looking up the LMS's roster host failed for now ({exc.strerror}); try again.") from None
        except httpx.TimeoutException:
            raise RosterError(f"The LMS's roster did not answer within {client.timeout_s:g} s; try again.") from None
        except httpx.HTTPError as exc:
            raise RosterError(f"Asking the LMS for its roster failed: {describe_error(exc)}.") from None
        code = answer.status_code
        if code == 401 and attempt == 0:  # the platform may have dropped a cached token early
            client.forget_token(platform, scopes, token)
            continue
        said = error_message(answer.body)
        said = f": {said}" if said else ""
        if code == 401:
            raise RosterError(f"The LMS refused the judge's access token for its roster (401){said}.")
        if code == 403:
            raise RosterError(
                f"The LMS does not let the judge read this course's roster (403){said}. The tool's "
                "registration in the LMS must allow Names and Role Provisioning Services."
            )
        if 300 <= code < 400:
            raise RosterError(f"The LMS answered {code}, a redirect, for its roster (the judge follows none).")
        if not 200 <= code < 300:
            raise RosterError(f"The LMS answered {code} for its roster{said}.")
        if answer.truncated:
            raise RosterError(f"A page of the LMS's roster is larger than {limits.page_bytes // 1024} KiB.")
        return answer
    raise AssertionError("unreachable")  # pragma: no cover


def fetch_members(
    client: AgsClient, platform: PlatformView, key: ToolKey, url: str, limits: Limits = Limits()
) -> tuple[list[Member], int]:
    """Every member at the context's memberships URL, following `rel="next"` pages (LTI NRPS 2.0,
    membership container paging), and how many pages were read. A member listed twice counts
    once (the later entry wins).

    Raises:
        RosterError: see `_get_page` and `parse_container`; more than `limits.pages` pages or
            `limits.members` members; a page seen twice; a next page on another origin than the
            memberships URL.
    """
    origin = _origin(url)
    found: dict[str, Member] = {}
    seen: set[str] = set()
    page: str | None = url
    while page is not None:
        if page in seen:
            raise RosterError("The LMS's roster pages lead back to a page already read.")
        if len(seen) >= limits.pages:
            raise RosterError(f"The LMS's roster has more than {limits.pages} pages.")
        seen.add(page)
        answer = _get_page(client, platform, key, page, limits)
        for member in parse_container(answer.body):
            found.pop(member.user_id, None)
            found[member.user_id] = member
        if len(found) > limits.members:
            raise RosterError(f"The LMS's roster has more than {limits.members} members.")
        page = next_page(answer.headers.get_list("link"), page)
        if page is not None and _origin(page) != origin:
            raise RosterError(
                f"The LMS's roster continues on another site ({urlsplit(page).hostname}); the judge sends "
                "its token to the memberships URL's own site only."
            )
    return list(found.values()), len(seen)


def _roster_service(course: Course, store: LtiStore) -> tuple[PlatformView, str]:
    """The platform and memberships URL of an LMS course's roster service.

    Raises:
        NoRosterService: see `sync_course`.
    """
    if course.platform_id is None or course.deployment_id is None or course.context_id is None:
        raise NoRosterService("This course was made on the judge, not by an LMS launch: it has no LMS roster to sync.")
    platform = store.platform_by_id(course.platform_id)
    if platform is None:
        raise NoRosterService("This course's LMS is no longer registered with the judge.")
    url = store.memberships_url(
        platform_id=course.platform_id, deployment_id=course.deployment_id, context_id=course.context_id
    )
    if url is None:
        raise NoRosterService(
            "The LMS has not offered this course's roster: no launch from the course carried the Names "
            "and Role Provisioning Services (2.0) claim. Turn the service on for the tool in the LMS, "
            "open one of the course's activities from the LMS, then sync again."
        )
    return platform, url


def sync_course(
    course: Course,
    *,
    store: LtiStore,
    courses: CourseStore,
    client: AgsClient,
    key: ToolKey,
    limits: Limits = Limits(),
) -> SyncReport:
    """Syncs an LMS course's roster from the memberships URL its launches gave (LTI NRPS 2.0;
    see the module docstring): the stored roster is replaced only when every page was read.

    Raises:
        NoRosterService: the course was not made by an LMS launch, its platform is no longer
            registered, or no launch from it offered the service (2.0).
        RosterError: the fetch failed (`fetch_members`); the stored roster is then unchanged.
    """
    platform, url = _roster_service(course, store)
    try:
        members, pages = fetch_members(client, platform, key, url, limits)
    except RosterError as exc:
        raise RosterError(f"{exc} {KEPT}") from None
    accounts = store.accounts_of(platform.issuer, [m.user_id for m in members])
    courses.replace_roster(
        course.id,
        [
            Listed(
                member_id=m.user_id,
                user_id=accounts.get(m.user_id),
                name=m.name,
                email=m.email,
                roles=m.roles,
                staff=m.staff,
                active=m.active,
            )
            for m in members
        ],
    )
    enrolled = {u.id for u in courses.members(course.id)}
    students = [m for m in members if m.active and not m.staff]
    return SyncReport(
        members=len(members),
        students=len(students),
        staff=sum(1 for m in members if m.active and m.staff),
        inactive=sum(1 for m in members if not m.active),
        never_launched=sum(1 for m in students if accounts.get(m.user_id) not in enrolled),
        pages=pages,
    )
