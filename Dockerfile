# syntax=docker/dockerfile:1
# The crawler service: JSON API, dashboard and metrics on port 8080, crawls in /data.
#
#   docker build -t crawler .
#   docker run -d -e CRAWLER_TOKEN="$(openssl rand -hex 24)" -p 127.0.0.1:8080:8080 \
#       -v crawler-data:/data crawler
#
# The service refuses to listen on 0.0.0.0 without CRAWLER_TOKEN (exit 3).
# Settings: CRAWLER_TOKEN, CRAWLER_PORT, CRAWLER_MAX_RUNNING, CRAWLER_LOG_LEVEL,
# CRAWLER_SHUTDOWN_TIMEOUT_S (see `crawler serve --help`).
#
# With Chromium, for crawls with --render (pages whose links are written by
# JavaScript; about 300 MB more):
#
#   docker build --build-arg WITH_CHROMIUM=1 -t crawler:chromium .

ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# A C compiler for the per-page path's modules, compiled by mypyc (setup.py);
# the image that runs the service does not get it. (-P below: the installed
# package, not the sources in this folder.)
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml setup.py README.md ./
# crawler/migrations is a symlink to ../migrations: both go in, the wheel holds the files.
COPY migrations ./migrations
COPY crawler ./crawler
RUN /opt/venv/bin/pip install --no-cache-dir '.[postgres,service]' \
    && /opt/venv/bin/python -P -c 'import crawler.scope; assert crawler.scope.__file__.endswith(".so")' \
    && /opt/venv/bin/python -c 'from crawler.store import migrate; assert migrate.latest_version() > 0' \
    && /opt/venv/bin/python -c 'from crawler.service import dashboard; dashboard.load_static()'

FROM python:${PYTHON_VERSION}-slim-bookworm
# 1: install Debian's chromium for --render (found on PATH as "chromium").
ARG WITH_CHROMIUM=0
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN if [ "$WITH_CHROMIUM" = "1" ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends chromium fonts-liberation \
        && rm -rf /var/lib/apt/lists/*; \
    fi
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CRAWLER_PORT=8080 \
    CRAWLER_LOG_FORMAT=json
RUN groupadd --system --gid 10001 crawler \
    && useradd --system --uid 10001 --gid crawler --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin crawler \
    && mkdir /data \
    && chown crawler:crawler /data
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CRAWLER_PORT', '8080'), timeout=4)"]
ENTRYPOINT ["crawler"]
CMD ["serve", "--host", "0.0.0.0", "--data-dir", "/data"]
