"""Building the served problem versions' expectations when a grading process starts, so that no
submission waits for them (docs/ARCHITECTURE.md, "The reference checks itself").

`ExpectationWarmup.start` returns at once: a background thread goes through the published problems
(`ProblemRepository.all(published_only=True)`: the versions students get) and builds each version
whose cache entry is missing (`graders.reference.cache_builds.needs_build`) the way grading and
publishing do: a reference check in a verifier child (`Verifier.start(..., ready=False)`, then
`wait_ready`), which writes the same cache under the same key (slug, version, seed id) with the
same builder (`graders.reference.build.ensure_expectations`). One build at a time, so it takes at
most one child's share of the CPU from grading. At a grading child's CPU weight, not below it: a
submission may be waiting for the build (at weight 20 on a busy machine, a first submission that
waited for it took 11.2 s, against 6.3 s for building on its own: `bench/first_verdict.py`). A
submission that needs the version being built waits for that build (the entry's lock) and reads
it, instead of building it again. A failure is said at WARNING; the version is then built on
demand, as without the warm-up. `REMAT_JUDGE_WARM_EXPECTATIONS=false` turns it off
(`server.runtime.start_warmup`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from graders.config import JudgeConfig
from graders.problems.problem import Problem, ProblemRepository
from graders.reference.cache_builds import needs_build
from graders.reference.expectation import cache_dir
from graders.verifier.client import ReferenceCheckFailed, Verifier

log = logging.getLogger(__name__)


class ExpectationWarmup:
    """Builds, in one background thread, the expectations of every served problem version that
    has none cached yet, one version at a time.

    Args:
        problems: the problem packages (the published ones are warmed).
        config: the judge configuration grading uses (its cache, seed and limits: the same key).
        build: builds one version's expectations and returns None, or the reference's self-check
            failure as text; raises on a judge fault. Default: a reference check in a verifier child.
        templates: starts the jail and verifier templates and waits for them (the server passes
            `graders.pipeline.prestart`), before any version is built; None: not waited for.

    Attributes:
        built, cached, failed: `slug@version` of each version built now, found cached, or not built
            (a failed self-check or a judge fault), in order.
        done: set when the thread has gone through every served version (or was stopped).
        total: how many served versions there are to go through (None until listed).
    """

    def __init__(
        self,
        problems: ProblemRepository,
        config: JudgeConfig,
        *,
        build: Callable[[Problem], str | None] | None = None,
        templates: Callable[[], None] | None = None,
    ):
        self.problems, self.config = problems, config
        self.build = build or self.build_in_child
        self.templates = templates
        self.built: list[str] = []
        self.cached: list[str] = []
        self.failed: list[str] = []
        self.done = threading.Event()
        self.total: int | None = None  # served versions, once listed
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._current: Verifier | None = None
        self._thread: threading.Thread | None = None

    def progress(self) -> str:
        """How far the warm-up is, for `/readyz`: "3 of 23 versions ready"."""
        with self._lock:
            settled = len(self.built) + len(self.cached) + len(self.failed)
        return f"{settled} of {self.total} versions ready" if self.total is not None else "listing the versions"

    def start(self) -> None:
        """Starts the background thread and returns at once."""
        self._thread = threading.Thread(target=self._run, name="remat-warm-expectations", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stops after the current version: a build in progress is killed (the version is then
        built on demand). Waits up to `timeout_s` seconds for the thread."""
        self._stop.set()
        with self._lock:
            current = self._current
        if current is not None:
            current.child.kill()  # its own thread sees the child die and closes it
        if self._thread is not None:
            self._thread.join(timeout_s)

    def wait(self, timeout_s: float) -> bool:
        """Whether every served version was gone through within `timeout_s` seconds."""
        return self.done.wait(timeout_s)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self._start_templates()
            served = self.problems.all(published_only=True)
            self.total = len(served)
            for problem in served:
                if self._stop.is_set():
                    break
                self._warm(problem)
        except Exception:
            log.warning("warming the expectations up stopped", exc_info=True)
        finally:
            log.info(
                "expectations warm-up finished in %.1f s: %d built, %d already cached, %d not built",
                time.monotonic() - started,
                len(self.built),
                len(self.cached),
                len(self.failed),
            )
            self.done.set()

    def _start_templates(self) -> None:
        """Starts the jail and verifier templates (`templates`) and waits for them, so readiness
        also means no first submission waits for a template's JAX import (measured: a version
        built in 2 s left the jail template still starting, and the first verdict took 1.6 times
        the next ones). A failure is said at WARNING; the first submission starts them."""
        if self.templates is None:
            return
        try:
            self.templates()
        except Exception:
            log.warning("the templates could not be started ahead of the first submission", exc_info=True)

    def _warm(self, problem: Problem) -> None:
        """Builds `problem`'s expectations unless they are cached (or its reference's failure is)."""
        label = f"{problem.slug}@{problem.version}"
        if not needs_build(cache_dir(self.config.cache_dir, problem, self.config.seed)):
            self.cached.append(label)
            return
        started = time.monotonic()
        try:
            failure = self.build(problem)
        except Exception as exc:  # noqa: BLE001 - a judge fault: the version is built on demand
            if not self._stop.is_set():
                log.warning("could not build the expectations of %s ahead (built on demand): %s", label, exc)
            self.failed.append(label)
            return
        if failure is not None:
            log.warning("the reference of %s failed its self-checks; no submission is judged on it: %s", label, failure)
            self.failed.append(label)
            return
        log.info("built the expectations of %s in %.1f s", label, time.monotonic() - started)
        self.built.append(label)

    def build_in_child(self, problem: Problem) -> str | None:
        """Builds `problem`'s expectations in a verifier child (a reference check, as validation
        does) and waits for them.

        Returns:
            None when they are cached now, else the reference's self-check failure (for the log).

        Raises:
            VerifierError: the child could not start or died (a judge fault), or `stop` killed it.
            InterruptedError: `stop` was called before the child began.
        """
        verifier = Verifier.start(problem, self.config, ready=False)  # no child kept waiting for it
        with self._lock:
            self._current = verifier
        try:
            if self._stop.is_set():
                raise InterruptedError("the warm-up was stopped")
            verifier.wait_ready()
        except ReferenceCheckFailed as failure:
            return str(failure)
        finally:
            with self._lock:
                self._current = None
            verifier.close()
        return None
