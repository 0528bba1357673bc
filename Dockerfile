# syntax=docker/dockerfile:1
# `attnzoo serve` in a container (docs/DEPLOY.md). Targets:
#   docker build -t attnzoo .                                  the server; mount the model at /models/model
#   docker build --target model --build-arg MODEL_DIR=path/in/context -t attnzoo:mymodel .
#                                                              the server with the checkpoint baked in
#   docker build --target router -t attnzoo-router .           vllm-router, the cache-aware router in front of
#                                                              several replicas (pinned as in requirements.txt)
# Run: docker run -p 8000:8000 -v /srv/qwen3:/models/model:ro attnzoo --served-model-name qwen3
# The flags after the image name go to `attnzoo serve` after the defaults of CMD below.
ARG DEBIAN=bookworm

# --- build: the Debian packages scripts/setup.sh installs for the C++ build (no Python module, no tests run) ----
FROM debian:${DEBIAN} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      g++ cmake ninja-build pkg-config libhwy-dev libgtest-dev libpcre2-dev libopenblas-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY src src
# No Python in this stage: CMake leaves the nanobind module out (the image serves; it needs only the CLI).
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build --target attnzoo_cli -j "$(nproc)" \
 && install -D -m 0755 build/attnzoo /out/usr/local/bin/attnzoo

# --- runtime: a slim Debian with only the shared libraries the binary links (ldd build/attnzoo) ------------------
FROM debian:${DEBIAN}-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libhwy1 libpcre2-8-0 libopenblas0-pthread libstdc++6 libgcc-s1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 attnzoo \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin attnzoo \
 && mkdir -p /models/model && chown attnzoo:attnzoo /models
COPY --from=build /out/ /
USER 10001:10001
# attnzoo's own pool calls OpenBLAS one thread per call (linear.cc sets that at the first product); this also keeps
# the library from starting its idle thread pool when it loads.
ENV OPENBLAS_NUM_THREADS=1
EXPOSE 8000
# SIGTERM drains: /health answers 503 so the load balancer stops sending, requests in flight get up to
# --shutdown-grace-seconds to finish, then the process exits 0. Give `docker stop -t` (Kubernetes:
# terminationGracePeriodSeconds) more than that grace.
STOPSIGNAL SIGTERM
# bash's /dev/tcp: no curl in the image. /health is 503 while the model loads and while draining.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8000 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["attnzoo", "serve"]
CMD ["-m", "/models/model", "--host", "0.0.0.0", "--port", "8000", "--shutdown-grace-seconds", "30"]

# --- model: the runtime with a checkpoint copied in (MODEL_DIR: a directory inside the build context) ------------
FROM runtime AS model
ARG MODEL_DIR
COPY --chown=10001:10001 ${MODEL_DIR} /models/model

# --- router: vllm-router from PyPI ---------------------------------------------------------------------------
FROM debian:${DEBIAN}-slim AS router
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/router && /opt/router/bin/pip install --no-cache-dir vllm-router==0.1.17 \
 && groupadd --system --gid 10001 router \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin router
USER 10001:10001
EXPOSE 30000
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/router/bin/vllm-router"]
CMD ["--host", "0.0.0.0", "--port", "30000", "--policy", "cache_aware"]

# The default target (the last stage): the server without a model.
FROM runtime AS serve
