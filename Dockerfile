# Build: docker build -t mcpswarm:latest .   (no Docker engine runs on the dev machines; CI does not build this)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/mcpswarm ./cmd/node

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpswarm /usr/local/bin/mcpswarm
ENTRYPOINT ["/usr/local/bin/mcpswarm"]
CMD ["serve"]
