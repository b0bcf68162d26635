# The embedded deployment in one container: API, workers, SQLite under /data.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap libseccomp2 make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY server server
COPY graders graders
COPY sandbox sandbox
COPY problems problems
RUN pip install --no-cache-dir -e .
ENV REMAT_JUDGE_DATA_DIR=/data
EXPOSE 8000
CMD ["remat-judge", "serve", "--host", "0.0.0.0", "--port", "8000"]
