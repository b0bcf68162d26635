# The judge's image, for both deployments:
# - embedded (the default command): pages, API and grading threads in one container, SQLite under /data;
# - scaled out (docker-compose.yml): `remat-judge db upgrade` once, `remat-judge serve` (stores and
#   enqueues), `remat-judge worker` replicas (grade), with REMAT_JUDGE_DATABASE_URL (PostgreSQL) and
#   REMAT_JUDGE_REDIS_URL set. The migrations (server/migrations/) are part of `server`.
# Grading needs bubblewrap, libseccomp and, at run time, CAP_SYS_ADMIN and a writable cgroup tree.
# Stage 1 builds the editor bundle from web/ (npm, lock file); stage 2 is the judge.
FROM node:20-bookworm-slim AS web
WORKDIR /build/web
COPY web/package.json web/package-lock.json web/build.mjs ./
COPY web/src src
RUN npm ci --no-audit --no-fund --loglevel=error && node build.mjs

FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap libseccomp2 util-linux \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
COPY server server
COPY graders graders
COPY sandbox sandbox
COPY jailside jailside
COPY problems problems
COPY --from=web /build/server/web/static/dist server/web/static/dist
RUN pip install --no-cache-dir -c requirements.lock -e .
ENV REMAT_JUDGE_DATA_DIR=/data REMAT_JUDGE_PROBLEMS_DIR=/app/problems
EXPOSE 8000
CMD ["remat-judge", "serve", "--host", "0.0.0.0", "--port", "8000"]
