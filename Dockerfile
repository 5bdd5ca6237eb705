# syntax=docker/dockerfile:1
# The Loom platform: the API server and the lifecycle (`loom server`), with the extras a cluster
# deployment uses (PostgreSQL, an S3 artifact store, the kubernetes launcher, ONNX serving).
#
#   docker build -t ghcr.io/loom-ml/loom:0.1.0 .
#
# Needs BuildKit (Docker's default builder since 23.0): the final stage installs from the build
# stage's wheels through a bind mount, so no wheel and no source file is left in a layer.

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# Loom's wheel and every dependency's, so that the final stage installs from them offline.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[postgres,s3,kubernetes,onnx]"

FROM python:3.11.14-slim-bookworm
# The version in pyproject.toml: the wheel the build stage made (tests/deploy checks they agree).
ARG LOOM_VERSION=0.1.0
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/loom \
    LOOM_HOME=/var/lib/loom \
    LOOM_HOST=0.0.0.0 \
    LOOM_PORT=8470
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels \
        "loom-dl[postgres,s3,kubernetes,onnx]==${LOOM_VERSION}"
RUN groupadd --gid 10001 loom \
    && useradd --uid 10001 --gid 10001 --home-dir /var/lib/loom --no-create-home \
        --shell /usr/sbin/nologin loom \
    && install -d -o 10001 -g 10001 -m 0700 /var/lib/loom
WORKDIR /var/lib/loom
USER 10001:10001
EXPOSE 8470
# No curl in the image: Python asks /health (urlopen raises on anything but a 2xx answer).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('LOOM_PORT', '8470') + '/health', timeout=4)"]
ENTRYPOINT ["loom"]
CMD ["server"]
