# A static binary on a distroless base that runs as uid 65532 (nonroot).
# Build: docker build -t mcpswarm:latest .
# (No container engine runs on the development machines or in CI, so this
# file is checked by cmd/node's manifest test, not built there: the binary
# path and user below must match deploy/k8s.)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/mcpswarm/mcpswarm.version=${VERSION}" \
    -o /out/mcpswarm ./cmd/node

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpswarm /usr/local/bin/mcpswarm
USER 65532:65532
EXPOSE 8080 9090 7946 7946/udp
ENTRYPOINT ["/usr/local/bin/mcpswarm"]
CMD ["serve"]
