"""`remat-judge problems add PATH`: a package validated and installed into the problems folder,
or uploaded to a running judge (`--server`) whose validation is followed to the end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from graders.problems.spec import ProblemError
from server.cli.common import EXIT_REJECTED, EXIT_USAGE, console, err, settings_for
from server.cli.problems import rows_table, validate_packages

if TYPE_CHECKING:
    from graders.problems.publication import Publication


def problems_add(
    path: Annotated[Path, typer.Argument(help="the package folder")],
    server: Annotated[str | None, typer.Option(help="upload to this server instead (URL)")] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="REMAT_JUDGE_INSTRUCTOR_TOKEN",
            help="the server's admin token (REMAT_JUDGE_INSTRUCTOR_TOKEN) for --server",
        ),
    ] = None,
    jobs: Annotated[int, typer.Option(help="files graded at once")] = 2,
    data_dir: Annotated[Path | None, typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
    publish: Annotated[bool, typer.Option("--publish", help="publish it too (refused while a TODO is left)")] = False,
) -> None:
    """Validate a package and install it into the problems folder, or with --server upload it to a
    running judge (which validates it again before installing it).

    A new problem arrives unpublished (admins only) unless --publish; one that replaces a
    published problem stays published, flagged by `problems list` until it is published again.
    """
    from graders.problems.publication import publication, todos
    from server.problems.packages import PackageError, install, pack, staged_package

    if not (path / "problem.toml").is_file():
        err.print(f"{path} is not a problem package (no problem.toml)")
        raise typer.Exit(EXIT_USAGE)
    if publish and (left := todos(path)):
        err.print(f"[red]not added: --publish, but {len(left)} TODO{'s' if len(left) > 1 else ''} left:[/]")
        for line in left:
            err.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
        raise typer.Exit(EXIT_REJECTED)
    if server is not None:
        if not token:
            err.print("--server needs --token (or REMAT_JUDGE_INSTRUCTOR_TOKEN)")
            raise typer.Exit(EXIT_USAGE)
        _upload(path, server.rstrip("/"), token, publish=publish)

    settings = settings_for(data_dir, problems_dir)
    try:
        with staged_package(pack(path), settings.problems_dir) as problem:
            if not validate_packages([problem], settings, jobs):
                err.print("[red]not installed: the package does not validate[/]")
                raise typer.Exit(EXIT_REJECTED)
            target = install(
                problem.root,
                settings.problems_dir,
                settings.data_dir / "problem-history",
                publish_version=problem.version if publish else None,
            )
    except (PackageError, ProblemError) as exc:
        err.print(f"[red]invalid package:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    state = _publication_state(publication(target, problem.version), problem.slug)
    console.print(f"installed {problem.slug} version {problem.version} at {target}: {state}", soft_wrap=True)


def _publication_state(now: Publication, slug: str) -> str:
    """What `problems add` says of an installed problem's publication."""
    return (
        "published"
        if now.published and not now.changed
        else f"still published, changed since publish: run `remat-judge problems publish {slug}`"
        if now.published
        else f"unpublished (admins only) until `remat-judge problems publish {slug}`"
    )


def _upload(path: Path, server: str, token: str, *, publish: bool) -> None:
    """Uploads the package at `path` to `server` and follows its validation (polling the upload's
    status every second, with a progress line on stderr) to the end; exits 0 when it was installed,
    1 otherwise, printing the validation table, the reference's failed self-checks and warnings."""
    import time

    import httpx

    from server.problems.packages import pack

    auth = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=server, timeout=60, headers=auth) as client:
            response = client.post(
                "/api/v1/problems",
                content=pack(path),
                params={"publish": "true"} if publish else None,
                headers={"Content-Type": "application/gzip"},
            )
            body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
            if response.status_code != 202:
                err.print(
                    f"[red]refused ({response.status_code}):[/] {escape(str(body.get('detail', response.text[:500])))}"
                )
                raise typer.Exit(EXIT_REJECTED)
            with err.status("") as status:
                while body.get("state") == "validating":
                    progress = body.get("progress", {})
                    status.update(
                        f"{server} validates {body.get('slug')} through its sandbox: "
                        f"{progress.get('done', 0)} of {progress.get('total', '?')} files graded"
                    )
                    time.sleep(1.0)
                    body = client.get(body.get("status_url") or f"/api/v1/problems/uploads/{body['id']}").json()
    except httpx.HTTPError as exc:
        err.print(f"cannot reach {server}: {exc}")
        raise typer.Exit(EXIT_REJECTED) from None
    _print_validation(server, body)
    if body.get("state") == "done":
        console.print(
            f"installed {body['slug']} version {body['version']}"
            + (f" (replaces {body['previous_version']})" if body.get("previous_version") else "")
            + (", published" if body.get("published") else ", unpublished (admins only)")
        )
        raise typer.Exit(0)
    err.print(f"[red]not installed:[/] {escape(str(body.get('detail', '')))}")
    raise typer.Exit(EXIT_REJECTED)


def _print_validation(server: str, body: dict[str, Any]) -> None:
    """Prints an upload's validation as `server` reports it: the reference's failed self-checks,
    the validation table and the warnings."""
    for failure in body.get("reference_failures", []):
        print(f"reference.py: {failure['check']}: {failure['message']}")
    if body.get("rows"):
        console.print(
            rows_table(
                f"validated by {server}",
                [
                    (
                        r["file"],
                        r["expected"],
                        r["got"] or "-",
                        r["ok"],
                        f"{r['seconds']:.1f}",
                        "" if r["residual_bytes"] is None else f"{r['residual_bytes']:,}",
                        "" if r["bwd_peak_bytes"] is None else f"{r['bwd_peak_bytes']:,}",
                        "" if r.get("recompute_flops") is None else f"{r['recompute_flops']:,}",
                        r["note"],
                    )
                    for r in body["rows"]
                ],
            )
        )
    for warning in body.get("warnings", []):
        console.print(f"[yellow]warning: {escape(warning)}[/]")
