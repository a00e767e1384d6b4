# toolgate's container image (docs/install.md): a static toolgate and
# toolgate-agent on an empty base, run as a non-root user.
#
#   make image                      # buildah, podman or docker, whichever is installed
#   docker run --rm -p 127.0.0.1:8080:8080 -v "$PWD/conf:/etc/toolgate:ro" toolgate
#
# The build stage's go build line is the one tests/image_test.go runs.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags "-s -w -X github.com/toolgate/toolgate/internal/buildinfo.version=${VERSION} -X github.com/toolgate/toolgate/internal/buildinfo.revision=${REVISION}" -o /out/bin/ ./cmd/toolgate ./cmd/toolgate-agent
# What the empty base lacks: a /tmp for the per-thread directories of
# stdio upstreams, the configuration directory owned by the runtime user,
# and the CA certificates for https:// backends.
RUN mkdir -p /out/tmp /out/etc/toolgate && chmod 1777 /out/tmp && chown 65532:65532 /out/etc/toolgate

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tmp /tmp
COPY --from=build /out/etc/toolgate /etc/toolgate
COPY --from=build /out/bin/toolgate /out/bin/toolgate-agent /usr/local/bin/
# 65532: the "nonroot" user of distroless images; no name needed.
USER 65532:65532
# The configuration: mount a directory holding toolgate.yaml (and the
# OpenAPI documents it names) here; without one, the embedded default.
VOLUME ["/etc/toolgate"]
WORKDIR /etc/toolgate
# Beyond loopback, serve refuses to start without an auth section (or
# --insecure-no-auth): the mounted config must configure auth.
ENV TOOLGATE_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve"]
