# The Go builder stand-in of the compose smoke run (scripts/compose-smoke.sh): what the registry's
# golang:<go.mod's version>-bookworm would give the Dockerfile's build stage, made here from the
# Debian base and a Go toolchain of exactly go.mod's version. The build context, which the script
# assembles, holds
#   go/               that toolchain's GOROOT: the machine's own Go when its version matches, else
#                     the golang.org/toolchain module from the Go module proxy (the go command
#                     verifies it against the checksum database);
#   ca-certificates/  the machine's own local CA certificates (/usr/local/share/ca-certificates),
#                     often none: where outgoing HTTPS passes a TLS-inspecting proxy, its CA is
#                     there, and without it the build's `go mod download` cannot trust the module
#                     proxy. They land in the bundle the runtime stage copies, as they would in
#                     any image built on such a network.
#
# Like the official image: GOPATH=/go, go on PATH, GOTOOLCHAIN=local (the build uses this Go and
# never downloads another), CA roots installed (the module proxy is HTTPS; the runtime stage
# copies /etc/ssl/certs/ca-certificates.crt from here).
ARG BASE=seckill-standin/debian:bookworm
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && \
    rm -rf /var/lib/apt/lists/*
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
COPY go/ /usr/local/go/
ENV GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOTOOLCHAIN=local
RUN go version && mkdir -p /go/bin /go/src
WORKDIR /go
