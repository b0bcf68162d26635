"""Problem uploads that report: an archive is checked at once (unpacked strictly, loaded, every
static error listed together: missing and misplaced files, problem.toml, `# expect:` lines), then
validated through the real sandbox in the background while the uploader polls its progress
(migration 0010, `problem_uploads`).

`start` answers as soon as the quick checks pass: the upload's row says "validating", with how
many of the package's files are graded so far. When validation ends the row holds the whole
report (the reference's self-check failures, the validation table, warnings) and, when the
package passed, it is installed (and published with `publish`). Messages name files within the
package, never a path of this server. A row left "validating" by a process that died is reported
as failed once it has not moved for `STALE_S`.
"""

from __future__ import annotations

import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.problems.problem import Problem, check_package, load_problem
from graders.problems.publication import TodosLeft, VersionChanged, publish, published_version, todos
from graders.problems.spec import ProblemError
from graders.problems.validate import validate_problem
from server.problems.packages import PackageError, install, staging_root, unpack
from server.store.problems import UploadState, UploadStore, UploadView

if TYPE_CHECKING:
    from graders.problems.validate import ValidationReport

log = logging.getLogger(__name__)
_install_lock = threading.Lock()


class UploadRefused(Exception):
    """The archive fails the quick checks: `status_code` (400 malformed or invalid package, 422 a
    TODO left with publish) and a message naming files within the package."""

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code, self.message = status_code, message


def _scrub(value: Any, paths: list[str]) -> Any:
    """`value` (JSON-like) with every server path in `paths` cut out of its strings."""
    if isinstance(value, str):
        for path in paths:
            value = value.replace(path.rstrip("/") + "/", "").replace(path, "")
        return value
    if isinstance(value, list):
        return [_scrub(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, paths) for k, v in value.items()}
    return value


def _files(problem: Problem) -> int:
    """How many files validation grades: the reference, right/ and wrong/."""
    return 1 + len(problem.right_submissions()) + len(problem.wrong_submissions())


def quick_checks(data: bytes, problems_dir: Path, *, publish: bool) -> Problem:
    """Unpacks the archive into the staging folder and loads the package strictly: what can be said
    at once. The caller owns the staged folder (`problem.root.parent`) from here.

    Raises:
        UploadRefused: 400 (unsafe or malformed archive; every static error of the package at once:
            missing and misplaced files, problem.toml, `# expect:` lines: `check_package`), 422
            (publish with a TODO left). Nothing is left in the staging folder then.
    """
    try:
        staged = unpack(data, staging_root(problems_dir))
    except PackageError as exc:
        raise UploadRefused(400, f"bad package archive: {exc}") from None
    try:
        problem = check_package(staged)
        if publish and (left := todos(problem.root)):
            raise UploadRefused(
                422,
                f"publish=true, but {len(left)} TODO{'s' if len(left) > 1 else ''} left (write "
                f"each part, or upload without publish=true): " + "; ".join(left[:20]),
            )
    except ProblemError as exc:
        shutil.rmtree(staged.parent, ignore_errors=True)
        raise UploadRefused(400, f"invalid package:\n{_scrub(str(exc), [str(staged.parent)])}") from None
    except BaseException:
        shutil.rmtree(staged.parent, ignore_errors=True)
        raise
    return problem


def start(services: Any, data: bytes, *, publish: bool, requested_by: str) -> str:
    """Checks the archive at once (`quick_checks`), records the upload and validates it in a
    background thread; returns the upload's id.

    Raises:
        UploadRefused: the quick checks failed (nothing recorded).
    """
    settings = services.settings
    problem = quick_checks(data, settings.problems_dir, publish=publish)
    store = services.uploads
    upload_id = store.create(
        slug=problem.slug,
        version=problem.version,
        publish=publish,
        requested_by=requested_by,
        total_files=_files(problem),
    )
    thread = threading.Thread(
        target=_validate,
        args=(services, store, upload_id, problem, publish),
        name=f"upload-{problem.slug}",
        daemon=True,
    )
    thread.start()
    return upload_id


def _validate(services: Any, store: UploadStore, upload_id: str, problem: Problem, publish: bool) -> None:
    """The background part: validates, installs when it passed, and records the report."""
    settings = services.settings
    paths = [str(problem.root.parent), str(settings.problems_dir.resolve()), str(settings.data_dir.resolve())]
    done = 0

    def on_row(_: object) -> None:
        nonlocal done
        done += 1
        store.progress(upload_id, done)

    try:
        report = validate_problem(problem, settings.judge_config(), on_row=on_row)
        body = _report_body(report)
        if report.reference_failures:
            state, detail = UploadState.FAILED, "the reference failed its self-checks; no file was graded"
        elif not report.ok:
            state, detail = (
                UploadState.FAILED,
                report.error
                or (
                    "the package does not validate: the reference and right/ files must be ACCEPTED and every wrong/ "
                    "file must get its verdict"
                ),
            )
        else:
            state, detail = UploadState.DONE, _install_validated(services, problem, publish, body)
        store.finish(upload_id, state=state, detail=_scrub(detail, paths), report=_scrub(body, paths))
    except Exception as exc:  # a fault of the judge: said without a path or a traceback
        log.exception("validating upload %s failed", upload_id)
        store.finish(
            upload_id,
            state=UploadState.FAILED,
            report={},
            detail=_scrub(f"the judge failed while validating ({type(exc).__name__}); try again", paths),
        )
    finally:
        shutil.rmtree(problem.root.parent, ignore_errors=True)


def _report_body(report: ValidationReport) -> dict[str, Any]:
    """The stored report of a validation: its table, the reference's failed self-checks and the
    warnings; not published and no previous version until an install says otherwise."""
    return {
        "rows": [
            {
                "file": r.file,
                "expected": r.expected.value,
                "got": r.got.value if r.got else None,
                "ok": r.ok,
                "note": r.note,
                "seconds": round(r.seconds, 2),
                "residual_bytes": r.residual_bytes,
                "bwd_peak_bytes": r.bwd_peak_bytes,
                "recompute_flops": r.recompute_flops,
            }
            for r in report.rows
        ],
        "reference_failures": [{"check": c, "message": m} for c, m in report.reference_failures],
        "warnings": report.warnings,
        "published": False,
        "previous_version": None,
    }


def _install_validated(services: Any, problem: Problem, publish: bool, body: dict[str, Any]) -> str:
    """Installs a package that validated (published with `publish`), noting in `body` the version
    it replaces and whether it is published; returns the upload's detail line."""
    settings = services.settings
    with _install_lock:
        try:
            body["previous_version"] = services.problems.working(problem.slug).version
        except (KeyError, ProblemError):
            pass
        target = install(
            problem.root,
            settings.problems_dir,
            settings.data_dir / "problem-history",
            publish_version=problem.version if publish else None,
        )
    body["published"] = published_version(target) is not None
    return f"installed version {problem.version}" + (
        ", published" if body["published"] else ", unpublished (admins only)"
    )


@dataclass(frozen=True)
class Publishing:
    """Whether an upload's version can be published from its page (`publishing`).

    Attributes:
        state: "none" (validation did not install it), "published" (students get this version),
            "ready", "todos" (a TODO is left: `todos`), or "replaced" (the problem's folder is
            another version now: `current`, None when it is gone or does not load).
    """

    state: str
    current: str | None = None
    todos: tuple[str, ...] = ()


def publishing(problems_dir: Path, view: UploadView) -> Publishing:
    """What the upload page offers for publishing `view`'s version (see `Publishing`)."""
    if view.state != UploadState.DONE:
        return Publishing("none")
    root = problems_dir / view.slug
    try:
        current = load_problem(root).version
    except (OSError, ProblemError):
        return Publishing("replaced")
    if current != view.version:
        return Publishing("replaced", current)
    if published_version(root) == view.version:
        return Publishing("published", current)
    left = todos(root)
    return Publishing("todos", current, tuple(left)) if left else Publishing("ready", current)


def publish_upload(services: Any, view: UploadView) -> None:
    """Publishes exactly the version `view` validated and installed, with `graders.problems.publication.publish`
    (as `problems publish` and an upload with publish do), then records it on the upload.

    Raises:
        UploadRefused: 409 when validation did not install it or the problem's folder is another
            version now; 422 while a TODO is left (listed).
    """
    problems_dir = services.settings.problems_dir
    with _install_lock:  # not while an upload of the same problem replaces its folder
        found = publishing(problems_dir, view)
        if found.state == "none":
            raise UploadRefused(409, "not published: this upload was not installed, so there is nothing to publish")
        if found.state == "replaced":
            raise UploadRefused(
                409,
                f"not published: {view.slug} is another version now"
                + (f" ({found.current})" if found.current else "")
                + f", not version {view.version} that this upload validated; upload it again, or validate and "
                f"publish what is there with `remat-judge problems publish {view.slug}`",
            )
        if found.state != "published":
            try:
                publish(problems_dir / view.slug, problems_dir, view.version)
            except TodosLeft as exc:
                raise UploadRefused(
                    422, f"not published: {exc} (write each part, then upload again):\n" + "\n".join(exc.lines[:20])
                ) from None
            except VersionChanged as exc:
                raise UploadRefused(409, f"not published: {exc}; upload it again") from None
    services.uploads.record_published(view.id)
