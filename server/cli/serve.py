"""`remat-judge serve` (the web app and API) and `remat-judge worker` (a grading process when
scaled out)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from server.cli.common import EXIT_USAGE, err, settings_for
from server.settings import Settings

# Idle keep-alive connections stay open this long (uvicorn's default is 5 s). Browsers keep used
# idle sockets far longer (Chromium: 300 s) and reuse them for a POST, which is not retried when
# the server closed the socket at that moment: a form post failed with ECONNRESET in CI.
KEEP_ALIVE_S = 75


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    data_dir: Annotated[Path | None, typer.Option(help="database, cache and seed folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
    workers: Annotated[int | None, typer.Option(help="submissions graded at once (embedded mode)")] = None,
    processes: Annotated[
        int,
        typer.Option(help="HTTP server processes (distributed mode only: with REMAT_JUDGE_REDIS_URL)", min=1, max=64),
    ] = 1,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="serve Prometheus metrics on this port (every server process's, and the queue depth)"),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="address of the metrics server")] = "127.0.0.1",
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="comma-separated addresses (or *) of the reverse proxies whose X-Forwarded-For and "
            "X-Forwarded-Proto are trusted: the client's address (rate limits) and https (secure cookies) "
            "come from them; default FORWARDED_ALLOW_IPS, else 127.0.0.1"
        ),
    ] = None,
    ssl_certfile: Annotated[
        Path | None, typer.Option(help="serve HTTPS with this PEM certificate (chain), without a TLS proxy in front")
    ] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="the certificate's PEM private key")] = None,
) -> None:
    """Start the HTTP server (REST API under /api/v1, docs at /docs).

    Embedded mode (default): one process that also grades. With REMAT_JUDGE_REDIS_URL (and
    REMAT_JUDGE_DATABASE_URL): only stores and enqueues; `remat-judge worker` processes grade.
    Metrics: on --metrics-port, or at /metrics for a scraper holding REMAT_JUDGE_METRICS_TOKEN.
    """
    from server.platform import logs

    settings = settings_for(data_dir, problems_dir)
    if workers is not None:
        settings = settings.model_copy(update={"workers": workers})
    logs.configure(settings.log_format)
    _prepare_processes(settings, processes)
    if settings.scaled:
        _check_schema(settings)
    if (ssl_certfile is None) != (ssl_keyfile is None):
        err.print("[red]--ssl-certfile and --ssl-keyfile go together[/]")
        raise typer.Exit(EXIT_USAGE)
    certfile, keyfile = (str(ssl_certfile), str(ssl_keyfile)) if ssl_certfile else (None, None)
    if metrics_port is not None:
        _serve_metrics(settings, metrics_port, metrics_host)
    _run_server(
        settings,
        processes,
        host=host,
        port=port,
        forwarded_allow_ips=forwarded_allow_ips,
        certfile=certfile,
        keyfile=keyfile,
    )


def _prepare_processes(settings: Settings, processes: int) -> None:
    """Refuses more than one server process in embedded mode (exits 2); for several, gives
    their metrics one fresh folder to add up in."""
    if processes > 1 and not settings.scaled:
        err.print(
            "[red]--processes above 1 needs the distributed mode (REMAT_JUDGE_REDIS_URL): each embedded "
            "process would grade on its own queue[/]"
        )
        raise typer.Exit(EXIT_USAGE)
    if processes > 1:  # the server processes add up their metrics in one folder
        multiproc = settings.data_dir.resolve() / "metrics-multiproc"
        shutil.rmtree(multiproc, ignore_errors=True)
        multiproc.mkdir(parents=True)
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(multiproc))


def _run_server(
    settings: Settings,
    processes: int,
    *,
    host: str,
    port: int,
    forwarded_allow_ips: str | None,
    certfile: str | None,
    keyfile: str | None,
) -> None:
    """Runs uvicorn until it stops: the app built here for one process, else `processes` worker
    processes that build theirs from the environment (set here from `settings`)."""
    import uvicorn

    if processes > 1:  # the server processes read their settings from the environment
        os.environ["REMAT_JUDGE_DATA_DIR"] = str(settings.data_dir.resolve())
        os.environ["REMAT_JUDGE_PROBLEMS_DIR"] = str(settings.problems_dir.resolve())
    else:
        from server.app import create_app
    uvicorn.run(
        create_app(settings) if processes == 1 else "server.app:app_from_environment",
        factory=processes > 1,
        workers=processes if processes > 1 else None,
        host=host,
        port=port,
        log_level="info",
        log_config=None,
        loop="asyncio",  # the loop the suite runs (orbax, under flax, installs uvloop, which "auto" would pick)
        timeout_keep_alive=KEEP_ALIVE_S,
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips,
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )


def _check_schema(settings: Settings) -> None:
    """Scaled out, says a missing migration plainly before the server starts (waiting for the
    database first); exits 2 then."""
    from server.runtime import require_migrated
    from server.store.faults import wait_for_database

    wait_for_database(settings.resolved_database_url)
    try:
        require_migrated(settings.resolved_database_url)
    except RuntimeError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(EXIT_USAGE) from None


def _serve_metrics(settings: Settings, port: int, host: str) -> None:
    """Starts the metrics server of `serve` (a thread of this process): every server process's
    metrics, and the queue depth read from the database at each scrape. Exits with a message when
    the port is taken."""
    from server.platform import metrics
    from server.store.db import make_engine
    from server.store.submissions import SubmissionStore

    store = SubmissionStore(make_engine(settings.resolved_database_url))
    try:
        metrics.serve(port, host, queue_depth=store.queue_depth)
    except OSError as exc:
        err.print(f"[red]cannot serve metrics on {escape(host)}:{port}: {exc.strerror or exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
    err.print(f"[dim]metrics: http://{escape(host)}:{port}/metrics[/]", highlight=False)


def worker(
    concurrency: Annotated[int, typer.Option(help="submissions graded at once", min=1, max=64)] = 2,
    data_dir: Annotated[Path | None, typer.Option(help="cache and seed folder")] = None,
    problems_dir: Annotated[Path | None, typer.Option(help="problem packages folder")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="serve Prometheus metrics on this port")] = None,
    metrics_host: Annotated[str, typer.Option(help="address of the metrics server")] = "127.0.0.1",
) -> None:
    """Grade submissions from the Redis queue (distributed mode: REMAT_JUDGE_REDIS_URL and
    REMAT_JUDGE_DATABASE_URL). Stops gracefully on SIGTERM."""
    from server import worker as worker_process
    from server.platform import logs

    settings = settings_for(data_dir, problems_dir)
    logs.configure(settings.log_format)
    try:
        worker_process.run(settings, concurrency=concurrency, metrics_port=metrics_port, metrics_host=metrics_host)
    except (ValueError, RuntimeError) as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(EXIT_USAGE) from None
