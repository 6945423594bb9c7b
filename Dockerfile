# The Rebill image (docs/operations.md, "Three machines"): `rebill serve` by default, any other
# command by naming it after the image (`docker run IMAGE worker --concurrency 2`,
# `docker run IMAGE migrate`). Named Dockerfile, not Containerfile: `docker build .` and compose's
# `build: .` look for this name only, and Podman and Buildah read it too when no Containerfile is
# there. Checked by tests/unit/test_deploy_files.py (no container runtime runs in the tests).

# Stage 1: the project's wheel, from pyproject.toml and src/ alone (.dockerignore keeps the rest
# of the tree, its .venv, databases and .env out of the build context).
FROM python:3.11-slim AS wheel
WORKDIR /build
COPY pyproject.toml ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# Stage 2: the wheel and its runtime dependencies from pyproject.toml; no test extras, no build tree.
FROM python:3.11-slim
# Unbuffered: the token `rebill serve` prints on an empty database reaches the log at once.
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --root-user-action=ignore /tmp/wheels/rebill-*.whl && rm -rf /tmp/wheels

# A user of its own, by number (Kubernetes' runAsNonRoot can only verify a numeric USER). Its
# working directory holds var/, where the default SQLite URL (sqlite:///var/rebill.db) puts the
# database when no REBILL_DATABASE_URL is given: mount a volume there to keep it.
RUN groupadd --system --gid 10001 rebill \
    && useradd --system --uid 10001 --gid rebill --home-dir /srv/rebill --create-home \
       --shell /usr/sbin/nologin rebill \
    && mkdir /srv/rebill/var && chown rebill:rebill /srv/rebill/var
WORKDIR /srv/rebill
USER 10001:10001

# 8000: the API (`rebill serve --port`); 9464: a worker's /metrics (REBILL_WORKER_METRICS_ADDRESS).
EXPOSE 8000 9464

# The API is alive when it answers a path that needs no token: HEAD /openapi.json is served by the
# edge from a cached document (http/docs.py), without the database, the rate limit or a token.
# Containers that run `rebill worker` or `rebill migrate` from this image replace or disable it
# (compose.yaml does).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request as r; r.urlopen(r.Request('http://127.0.0.1:8000/openapi.json', method='HEAD'), timeout=4)"]

ENTRYPOINT ["rebill"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
