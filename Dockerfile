# graceguard webhook image: static binary on distroless, non-root (65532).
# Needs a Docker engine (`make image`); the e2e suite builds the same
# binary into an OCI archive without Docker instead.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
ARG VERSION=v0.0.0-dev
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/graceguard/graceguard/internal/version.Version=${VERSION}" \
    -o /out/webhook ./cmd/webhook

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/webhook /webhook
USER 65532:65532
ENTRYPOINT ["/webhook"]
