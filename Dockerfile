# The seckill image: one static binary (the storefront in web/ and the SQL migrations are embedded
# with go:embed) on an empty base, run as a non-root user.
#
#   docker build -t seckill-go .                   the app (the last stage, "runtime")
#   docker build --target loadtest -t seckill-go-loadtest .
#   docker build --target jaeger -t seckill-jaeger .  Jaeger v2's all-in-one (compose's profile tracing)
#
# docker-compose.yml builds both. The `go build` lines use exactly the Makefile's GO_BUILD_ENV and
# GO_BUILD_FLAGS, and GO_VERSION is go.mod's go line: deploy/docker_test.go checks both, so the
# image holds the binary CI builds. Needs BuildKit (the default builder since Docker 23; the
# engine's built-in one also serves Docker 20.10's own CLI with DOCKER_BUILDKIT=1): the cache
# mounts keep Go's module and build caches between builds. No "# syntax=" line: that would pull a
# Dockerfile frontend image from a registry, and the built-in frontend reads everything used here.
#
# GO_IMAGE is the builder: the golang image of go.mod's Go. The compose smoke run
# (scripts/compose-smoke.sh), on a machine without a registry, gives a stand-in of it built here.

ARG GO_VERSION=1.26.8
ARG GO_IMAGE=golang:${GO_VERSION}-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
# Modules first, so that this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/seckill ./cmd/seckill && \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/healthcheck ./deploy/healthcheck

# The load-test harness (loadtest/), for `docker compose run --rm loadtest`.
FROM build AS build-loadtest
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/loadtest ./loadtest && \
    mkdir -p /out/results

FROM scratch AS loadtest
COPY --from=build-loadtest /out/loadtest /usr/local/bin/loadtest
COPY --from=build-loadtest --chown=65532:65532 /out/results /results
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/loadtest", "-out", "/results"]

# Jaeger v2's all-in-one (issue #33) for docker-compose.yml's profile tracing: the same program as
# the registry's jaegertracing/jaeger 2.x image, built here from tools/jaeger's own module (Jaeger's
# dependency tree stays out of go.mod; the local stack's scripts/jaeger.sh builds the same), so that
# the stack needs no registry for it. Its built-in configuration: OTLP receivers on 4317/4318, UI
# and query API on 16686, health on 13133, traces in memory. JAEGER_LISTEN_HOST as the official
# image sets it (the binary's default is localhost); the app's health probe, with -addr, probes it.
FROM ${GO_IMAGE} AS build-jaeger
WORKDIR /src/tools/jaeger
COPY tools/jaeger/go.mod tools/jaeger/go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

FROM scratch AS jaeger
COPY --from=build-jaeger /out/jaeger /usr/local/bin/jaeger
COPY --from=build /out/healthcheck /usr/local/bin/healthcheck
USER 10001:10001
ENV JAEGER_LISTEN_HOST=0.0.0.0
EXPOSE 4317 4318 13133 16686
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/healthcheck", "-addr", "127.0.0.1:13133", "/status"]
ENTRYPOINT ["/usr/local/bin/jaeger"]

# The app: nothing but the binary, its health probe and the CA roots (for a DSN with tls=true).
# No shell, no package manager, no /etc/passwd: the user is a bare uid.
FROM scratch AS runtime
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/seckill /usr/local/bin/seckill
COPY --from=build /out/healthcheck /usr/local/bin/healthcheck
USER 65532:65532
ENV SECKILL_HTTP_ADDR=:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/healthcheck", "/healthz"]
ENTRYPOINT ["/usr/local/bin/seckill"]
CMD ["serve"]
