"""Prometheus metrics (prometheus-client), served by `remat-judge serve --metrics-port` and
`remat-judge worker --metrics-port` on a port of their own (127.0.0.1 unless told otherwise), and
at `/metrics` on the API's port only to a scraper holding `REMAT_JUDGE_METRICS_TOKEN` as a bearer
token (without one, `/metrics` there answers 404).

Labels carry published problem slugs ("unpublished" for the others), verdicts, phases and
reasons only: never a user, client or submission (unbounded, and personal). With several
processes on one machine (`remat-judge serve --processes N`), set `PROMETHEUS_MULTIPROC_DIR`
to an empty folder before they start (the CLI does): every process then writes its values
there and `/metrics` adds them up (prometheus-client's multiprocess mode; gauges are summed over live processes).

Metrics:
  remat_judge_queue_depth                      submissions stored and not yet claimed (read from
                                               the database at each scrape; API only)
  remat_judge_workers_busy / _idle             grading threads busy / waiting for a job
  remat_judge_verdicts_total{problem,verdict}  verdicts stored
  remat_judge_phase_seconds{phase}             histogram: queue, sandbox, verify, total (seconds)
  remat_judge_redeliveries_total               jobs delivered again (a worker died, or a duplicate)
  remat_judge_internal_errors_total            INTERNAL_ERROR verdicts (judge faults)
  remat_judge_rejected_requests_total{reason}  submissions refused: rate_limited (429),
                                               queue_full or queue_unavailable (503)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

BUSY_WORKERS = Gauge("remat_judge_workers_busy", "grading threads busy with a submission", multiprocess_mode="livesum")
IDLE_WORKERS = Gauge("remat_judge_workers_idle", "grading threads waiting for a job", multiprocess_mode="livesum")
VERDICTS = Counter("remat_judge_verdicts", "verdicts stored", ["problem", "verdict"])
PHASE_SECONDS = Histogram(
    "remat_judge_phase_seconds",
    "time per grading phase, in seconds",
    ["phase"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, float("inf")),
)
REDELIVERIES = Counter("remat_judge_redeliveries", "jobs delivered again (a worker died, or a duplicate delivery)")
INTERNAL_ERRORS = Counter("remat_judge_internal_errors", "INTERNAL_ERROR verdicts (faults of the judge)")
REJECTED = Counter("remat_judge_rejected_requests", "submissions refused by admission control", ["reason"])
DATABASE_UNAVAILABLE = Counter(
    "remat_judge_database_unavailable",
    "operations that met the database unreachable "
    "or restarting (HTTP requests answered 503, verdicts kept for a retry, ...)",
    ["where"],
)

PHASES = ("queue", "sandbox", "verify", "total")
UNPUBLISHED = "unpublished"  # the problem label of verdicts on problems students cannot see


def observe_verdict(problem: str, verdict: str, timing_ms: dict[str, float]) -> None:
    """Counts one stored verdict and its phase times (`timing_ms`: milliseconds per phase)."""
    VERDICTS.labels(problem=problem, verdict=verdict).inc()
    if verdict == "INTERNAL_ERROR":
        INTERNAL_ERRORS.inc()
    for phase in PHASES:
        if phase in timing_ms:
            PHASE_SECONDS.labels(phase=phase).observe(timing_ms[phase] / 1000)


class _QueueDepth(Collector):
    def __init__(self, depth: Callable[[], int]):
        self.depth = depth

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("remat_judge_queue_depth", "submissions stored and not yet claimed by a worker")
        try:
            family.add_metric([], float(self.depth()))
        except Exception:  # noqa: BLE001 - the database is away: no sample rather than a failed scrape
            return
        yield family


def render(queue_depth: Callable[[], int] | None = None) -> bytes:
    """The exposition text of every metric of this process (or, in multiprocess mode, of every
    process writing to `PROMETHEUS_MULTIPROC_DIR`), plus the queue depth when given."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # prometheus_client's multiprocess parts only in a multi-process deployment
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    if queue_depth is not None:
        extra = CollectorRegistry()
        extra.register(_QueueDepth(queue_depth))
        text += generate_latest(extra)
    return text


class _Everything(Collector):
    """This process's metrics (or, in multiprocess mode, every process's) and the queue depth."""

    def __init__(self, queue_depth: Callable[[], int] | None):
        self.queue_depth = queue_depth

    def collect(self) -> Iterator[Any]:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            # prometheus_client's multiprocess parts only in a multi-process deployment
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            yield from registry.collect()
        else:
            yield from REGISTRY.collect()
        if self.queue_depth is not None:
            yield from _QueueDepth(self.queue_depth).collect()


def serve(port: int, host: str = "127.0.0.1", queue_depth: Callable[[], int] | None = None) -> None:
    """Serves the metrics on http://host:port/metrics (a background thread): this process's, every
    process's in multiprocess mode, and the queue depth when given.

    Raises:
        OSError: the port is taken.
    """
    # the metrics HTTP server only in a process that serves /metrics (a worker)
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Everything(queue_depth))
    start_http_server(port, addr=host, registry=registry)
