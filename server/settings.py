"""Deployment settings, read from `REMAT_JUDGE_*` environment variables (pydantic-settings).

Obtain them through `get_settings` (a FastAPI dependency tests can override), never through a
module-level singleton read at import.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from graders.artifact_limits import VerifyLimits
from graders.config import JudgeConfig
from sandbox.jail_limits import JailLimits
from sandbox.uids import JAIL_UIDS


class Settings(BaseSettings):
    """Every setting of a deployment. Units are in the names.

    Attributes:
        data_dir: SQLite database, reference cache and the generated hidden-input seed; default
            the working directory's `data/` (`server.platform.folders` says where each folder came from).
        cache_dir: where the reference's expectations are cached; default `<data_dir>/cache`.
            Several grading processes on one host (workers, test servers) may share one: a version
            is built by one process at a time and entries are written by rename
            (`graders.reference.cache_builds`), keyed by version and seed.
        problems_dir: the problem packages; default the working directory's `problems/` (never
            the install location: `problems new` in a clone writes into that clone).
        database_url: SQLAlchemy URL; default `sqlite:///<data_dir>/remat-judge.db`.
        hidden_seed: secret seed of hidden inputs; when unset, 32 random bytes are generated once
            and kept in `<data_dir>/hidden_seed` (mode 0600).
        workers: submissions graded at once (each uses a jail and a verifier process).
        ready_children: jail and verifier children of each kind started ahead and kept waiting
            for the next submission (`sandbox.ready`); default one per grading thread (`workers`,
            or a worker's `--concurrency`); 0 turns them off (less memory, slower verdicts).
        warm_expectations: at start, a grading process (the embedded server, a worker) builds in
            the background, one at a time, the reference's expectations of every published
            problem version not yet cached (`server.grading.warm_expectations`), so no first
            submission waits for them; False builds each on demand, at its first submission.
        max_source_bytes: largest submission accepted (HTTP 413 above it).
        wait_timeout_s: how long `POST /submissions?wait=true` waits before answering 202.
        wall_time_limit_s, cpu_time_limit_s, memory_limit_mib: default jail limits (a problem
            may override them).
        verify_time_limit_s: wall seconds for running a submission's exported programs.
        instructor_token: the deployment's admin token (`server.authz`): the bearer token that may
            upload problems (`POST /api/v1/problems`), see unpublished ones and read every
            submission through the API; uploads are refused while it is unset.
        session_secret: signs the web session cookie; when unset, 32 random bytes are generated
            once and kept in `<data_dir>/session_secret` (mode 0600).
        cookie_secure: make every cookie `SameSite=None; Secure` whatever the URL. Without it
            cookies follow the URL (`server.web.cookies`): secure when `public_url` is https://
            or the request came over HTTPS (a trusted proxy's X-Forwarded-Proto).
        session_max_age_s: how long a sign-in lasts.
        redis_url: Redis for the distributed mode (`redis://host:6379/0`): with it, `serve` only
            stores and enqueues, and `remat-judge worker` processes grade (Dramatiq). Unset: the
            embedded mode, one process with an in-process queue and `workers` grading threads.
        max_queue_depth: submissions waiting to be graded past which new ones get 503 with
            Retry-After (admission control); 0 turns the cap off.
        rate_limit: submissions one client may make (`limits` notation, e.g. `30/minute`; per API
            client or IP, per signed-in user on the web); empty turns it off. Counted in Redis when
            scaled out (shared by every API process), in memory otherwise.
        max_attempts: claims of one submission before it ends "failed" (INTERNAL_ERROR), e.g.
            when it crashes or kills its worker every time.
        lease_s: how long a worker's claim on a submission lasts without renewal (renewed every
            `lease_s / 3` while it grades); after that another worker may take it over.
        sweep_interval_s: how often workers re-enqueue submissions whose job was never accepted
            by the queue, whose claim expired, or whose queued job Redis lost in a restart.
        heartbeat_timeout_s: the Redis broker's time without a heartbeat after which a worker
            counts as dead and its unacknowledged jobs are delivered to another (Dramatiq).
        log_format: "text" or "json" (one JSON object per line, with the submission id).
        allow_anonymous_api: let callers without an API key submit and read anonymous
            submissions through the API (a classroom demo); off, every submitting or reading
            `/api/v1/submissions` call needs `Authorization: Bearer <api key>`.
        public_url: the judge's public base URL (`https://judge.example.org`), for the URLs an LMS
            registers (LTI `redirect_uri`, `/lti/jwks`); unset: the base URL of each request.
        lti_jwks_refetch_cooldown_s: least seconds between two fetches of a platform's JWKS for an
            unknown key id (a forged kid cannot make the judge hammer the platform).
        lti_allow_networks: special-address networks (loopback, private, link-local...) that grade
            passback may call, as a JSON list (`REMAT_JUDGE_LTI_ALLOW_NETWORKS='["10.0.0.0/8"]'`,
            e.g. a campus Moodle on a private network); empty: public addresses only.
        signin_failures_per_account, signin_failures_per_ip: failed sign-ins allowed for one email
            and from one IP address (`limits` notation; empty: no limit) before the sign-in page
            answers 429 (`server.platform.throttle`).
        lti_rate_limit: LTI launches (counted once, at their login initiation) and deep linking
            picks one address may make (`limits` notation; empty: no limit): 600 a minute lets a
            lab of 300 behind one NAT launch at once. Each login stores a state for 5 minutes, so
            this bounds what one address can make the judge store.
        lti_platform_rate_limit: the same per platform (issuer): what one platform's logins may
            make the judge store.
        lti_allow_http: speak LTI over plain HTTP from a host other than this machine (a local
            test; LMSs refuse it, and inside their iframe only Secure cookies come back).
        callback_max_attempts: deliveries of one callback before it is marked failed (also the
            POSTs of one LMS score, `server.lti.grade_sender`).
        metrics_token: the bearer token a Prometheus scraper sends for `/metrics` on the API's port;
            unset: `/metrics` answers 404 there (serve metrics with `serve --metrics-port`).
        callback_timeout_s: seconds one delivery may take (connect and answer; also each request
            of LMS grade passback).
    """

    model_config = SettingsConfigDict(env_prefix="REMAT_JUDGE_", extra="ignore")

    data_dir: Path = Path("data")
    cache_dir: Path | None = None
    problems_dir: Path = Path("problems")
    database_url: str | None = None
    hidden_seed: str | None = Field(default=None, repr=False)
    workers: int = Field(default=2, ge=1, le=64)
    ready_children: int | None = Field(default=None, ge=0, le=64)
    warm_expectations: bool = True
    max_source_bytes: int = 64 * 1024
    wait_timeout_s: float = Field(default=60.0, ge=0, le=600)
    wall_time_limit_s: float = 10.0
    cpu_time_limit_s: float = 10.0
    memory_limit_mib: int = 1536
    verify_time_limit_s: float = 60.0
    instructor_token: str | None = Field(default=None, repr=False)
    metrics_token: str | None = Field(default=None, repr=False)
    session_secret: str | None = Field(default=None, repr=False)
    cookie_secure: bool = False
    session_max_age_s: int = 14 * 24 * 3600
    redis_url: str | None = Field(default=None, repr=False)
    max_queue_depth: int = Field(default=2000, ge=0)
    rate_limit: str = "30/minute"
    max_attempts: int = Field(default=3, ge=1, le=20)
    lease_s: float = Field(default=15.0, ge=3.0)
    sweep_interval_s: float = Field(default=2.0, gt=0)
    heartbeat_timeout_s: float = Field(default=20.0, ge=5.0)
    log_format: str = Field(default="text", pattern="^(text|json)$")
    allow_anonymous_api: bool = False
    public_url: str | None = None
    lti_jwks_refetch_cooldown_s: float = Field(default=10.0, ge=0)
    lti_allow_networks: list[str] = Field(default_factory=list)
    lti_rate_limit: str = "600/minute"
    lti_platform_rate_limit: str = "6000/minute"
    lti_allow_http: bool = False
    signin_failures_per_account: str = "10 per 15 minutes"
    signin_failures_per_ip: str = "50 per 15 minutes"
    callback_max_attempts: int = Field(default=6, ge=1, le=30)
    callback_timeout_s: float = Field(default=10.0, gt=0, le=60)

    @property
    def scaled(self) -> bool:
        """Whether this is the distributed mode (a Redis URL is set)."""
        return bool(self.redis_url)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'remat-judge.db'}"

    def _persisted_secret(self, name: str) -> str:
        """A random secret kept in `<data_dir>/<name>` (0600), created on first use."""
        path = self.data_dir / name
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:  # another process made it first
                return path.read_text().strip()
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        return path.read_text().strip()

    def seed_bytes(self) -> bytes:
        """The hidden-input seed (creates and stores one on first use when none is configured)."""
        return (self.hidden_seed or self._persisted_secret("hidden_seed")).encode("utf-8")

    def session_key(self) -> str:
        """The key that signs session cookies."""
        return self.session_secret or self._persisted_secret("session_secret")

    def judge_config(self) -> JudgeConfig:
        """What the grading pipeline needs from these settings."""
        return JudgeConfig(
            cache_dir=(self.cache_dir or self.data_dir / "cache").resolve(),
            seed=self.seed_bytes(),
            jail_limits=JailLimits(
                wall_time_limit_s=self.wall_time_limit_s,
                cpu_time_limit_s=self.cpu_time_limit_s,
                memory_limit_mib=self.memory_limit_mib,
            ),
            verify_limits=VerifyLimits(),
            verify_time_limit_s=self.verify_time_limit_s,
            results_dir=(self.data_dir / "results").resolve(),
            ready_children=self.ready_children_kept(),
        )

    def ready_children_kept(self) -> int:
        """Children of each kind kept waiting: `ready_children` (default `workers`), at most what
        the host's jail uid range leaves (`sandbox.uids.JAIL_UIDS`, one uid per child): every
        grading thread holds a jail and a verifier uid, every waiting pair two more, and 8 stay
        spare for children being torn down. 64 uids: 28 threads keep none waiting."""
        wanted = self.workers if self.ready_children is None else self.ready_children
        return max(0, min(wanted, (len(JAIL_UIDS.uids) - 8) // 2 - self.workers))


def get_settings() -> Settings:
    """FastAPI dependency: the settings from the environment (tests override it)."""
    return Settings()
