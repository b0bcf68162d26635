"""docker-compose.yml, checked by the real docker-compose (no Docker engine needed): it is valid,
describes the scaled-out deployment (api, worker, redis, postgres), lets workers scale, starts
every service only after what it needs is healthy, and refuses to run without a hidden seed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from tests.support import REPO

COMPOSE_FILE = REPO / "docker-compose.yml"


def _docker_compose() -> str:
    found = shutil.which("docker-compose")
    if found is None:
        reason = "docker-compose is not installed (`make test` installs it when run as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _compose(*args: str, seed: str | None = "a-test-seed") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMAT_JUDGE_")}
    if seed is not None:
        env["REMAT_JUDGE_HIDDEN_SEED"] = seed
    return subprocess.run(
        [_docker_compose(), "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )


def _parsed_config() -> dict[str, Any]:
    """`docker-compose config` (interpolated, anchors merged) as a dict. Compose v2 prints JSON on
    request; v1 (Python) prints YAML, read with the YAML library it runs on."""
    as_json = _compose("config", "--format", "json")
    if as_json.returncode == 0 and as_json.stdout.lstrip().startswith("{"):  # v1 prints its usage instead
        return json.loads(as_json.stdout)
    as_yaml = _compose("config")
    assert as_yaml.returncode == 0, as_yaml.stderr
    shebang = open(_docker_compose(), "rb").readline().decode(errors="replace")
    assert shebang.startswith("#!") and "python" in shebang, f"cannot read docker-compose's YAML ({shebang!r})"
    python = shebang[2:].split()  # e.g. ["/usr/bin/python3"] or ["/usr/bin/env", "python3"]
    to_json = "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"
    converted = subprocess.run(
        [*python, "-c", to_json], input=as_yaml.stdout, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(converted.stdout)


def test_compose_file_is_valid() -> None:
    checked = _compose("config", "-q")
    assert checked.returncode == 0, checked.stderr


def test_compose_refuses_to_run_without_a_hidden_seed() -> None:
    checked = _compose("config", "-q", seed=None)
    assert checked.returncode != 0
    assert "REMAT_JUDGE_HIDDEN_SEED" in checked.stderr


def test_compose_describes_the_scaled_deployment() -> None:
    config = _parsed_config()
    services = config["services"]
    assert {"api", "worker", "redis", "postgres"} <= set(services)

    # every service is checked for health, or is a one-shot step after healthy services
    for name, service in services.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        assert "healthcheck" in service or (
            depends
            and all(
                d.get("condition") in ("service_healthy", "service_completed_successfully") for d in depends.values()
            )
        ), f"{name} has no health check and does not wait for healthy services"
        for needed, condition in depends.items():
            if "healthcheck" in services[needed]:
                assert condition["condition"] == "service_healthy", f"{name} must wait for {needed} to be healthy"
            else:  # a one-shot step (migrations)
                assert condition["condition"] == "service_completed_successfully", (name, needed)
                assert services[needed].get("restart", "no") == "no"

    worker = services["worker"]
    assert "ports" not in worker and "container_name" not in worker  # docker-compose up --scale worker=N
    assert worker["command"][:2] == ["remat-judge", "worker"]
    assert "SYS_ADMIN" in worker["cap_add"]
    assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(worker["security_opt"])
    assert any(v.startswith("/sys/fs/cgroup:/sys/fs/cgroup:rw") for v in worker["volumes"])

    api = services["api"]
    assert api["command"][:2] == ["remat-judge", "serve"]
    assert "/healthz" in " ".join(api["healthcheck"]["test"])
    # both grade-side and API-side processes use the same database, queue, seed and data volume
    for key in ("REMAT_JUDGE_DATABASE_URL", "REMAT_JUDGE_REDIS_URL", "REMAT_JUDGE_HIDDEN_SEED"):
        assert api["environment"][key] == worker["environment"][key], key
    assert worker["environment"]["REMAT_JUDGE_HIDDEN_SEED"] == "a-test-seed"
    assert api["environment"]["REMAT_JUDGE_DATABASE_URL"].startswith("postgresql://")
    assert api["environment"]["REMAT_JUDGE_REDIS_URL"].startswith("redis://redis:")
    data = {v.split(":")[0] for v in api["volumes"]} & {v.split(":")[0] for v in worker["volumes"]}
    assert "judge-data" in data

    # migrations run once, before the API and the workers
    migrate = next(s for s in services.values() if s.get("command", [])[1:3] == ["db", "upgrade"])
    assert "postgres" in migrate["depends_on"]

    assert services["redis"]["image"].startswith("redis:7")
    assert "--appendonly" in services["redis"]["command"]
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    assert services["postgres"]["image"].startswith("postgres:15")
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    for name in ("redis", "postgres"):
        assert services[name].get("volumes"), f"{name} keeps its data in a volume"
        assert "ports" not in services[name], f"{name} must not be published on the host"
