# weir's container image: the static binary alone on an empty base, run as a non-root user, data in a
# volume. Build with `docker build -t weir .` (VERSION sets what `weir version` prints); deploy/compose.yaml
# runs three of them as a cluster.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/weir ./cmd/weir \
	&& mkdir -p /out/data

FROM scratch
COPY --from=build /out/weir /weir
# The volume's mount point, owned by the user the node runs as, so that a fresh named volume is
# writable by it.
COPY --from=build --chown=65532:65532 /out/data /var/lib/weir
USER 65532:65532
ENV WEIR_DATA_DIR=/var/lib/weir \
	WEIR_KAFKA_ADDR=0.0.0.0:9092 \
	WEIR_HTTP_ADDR=0.0.0.0:8080 \
	WEIR_CONTROLLER_ADDR=0.0.0.0:9093
VOLUME ["/var/lib/weir"]
EXPOSE 9092 9093 8080
# SIGTERM drains the node: parked fetches answer, in-flight produces are acknowledged, the logs close
# clean (--drain-timeout, 30s by default; give `docker stop` more than that).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
	CMD ["/weir", "health", "--http", "127.0.0.1:8080", "--timeout", "4s"]
ENTRYPOINT ["/weir"]
CMD ["serve"]
