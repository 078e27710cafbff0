# Builds the three binaries as static executables and runs them as a non-root user.
# The build steps are the same commands CI runs outside Docker
# (scripts/docker-build-check.sh), so the image builds what `go build` builds.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/sluice-admin ./cmd/admin
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/sluice-sync ./cmd/sync
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/sluice-decide ./cmd/decide

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice-admin /usr/local/bin/sluice-admin
COPY --from=build /out/sluice-sync /usr/local/bin/sluice-sync
COPY --from=build /out/sluice-decide /usr/local/bin/sluice-decide
USER nonroot:nonroot
EXPOSE 8080 8081 8082 9090
ENTRYPOINT ["/usr/local/bin/sluice-admin"]
