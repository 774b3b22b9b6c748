# The ledger service image (compose.yaml builds it as `ledger`).
# Two stages: build a wheel of this repository, then install it with its pinned dependencies
# (pyproject.toml; the dev extras — stand-ins, Playwright, pgserver — are not installed).
FROM docker.io/library/python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ledger ./ledger
COPY devstack ./devstack
COPY waggle ./waggle
RUN pip wheel --no-deps --wheel-dir /wheels .

# ReplayWeb.page for the web page's replay: the one pinned npm package (ledger/web/replay).
FROM docker.io/library/node:20-bookworm-slim AS replay
WORKDIR /replay
COPY ledger/web/replay/package.json ledger/web/replay/package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

FROM docker.io/library/python:3.11-slim-bookworm
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    WAGGLE_REPLAY_DIR=/app/replay \
    WAGGLE_STATE_DIR=/var/lib/waggle \
    WAGGLE_API_HOST=0.0.0.0 \
    WAGGLE_API_PORT=7070
RUN useradd --system --uid 10001 --home-dir /var/lib/waggle --create-home waggle
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels
# Operator tools, runnable inside the compose network: `docker compose exec ledger scripts/doctor`
COPY scripts/doctor scripts/windmill-variables /app/scripts/
COPY --from=replay /replay/node_modules/replaywebpage /app/replay
USER waggle
WORKDIR /app
EXPOSE 7070
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:7070/healthz', timeout=3)"]
CMD ["waggle", "serve"]
