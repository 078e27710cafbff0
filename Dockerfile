# Builds the three binaries as static executables and runs them as a non-root user.
# The build steps are the same commands CI runs outside Docker
# (scripts/docker-check.sh), so the image builds what `go build` builds.

# The binaries are built from the root module alone (GOWORK=off): its go.mod
# replaces the nested modules it needs with their directories, whose go.mod
# files must be present before the download (scripts/docker-check.sh checks
# that every one is copied).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY client/go.mod client/go.sum ./client/
COPY client/clientmetrics/go.mod client/clientmetrics/go.sum ./client/clientmetrics/
COPY client/usage/go.mod client/usage/go.sum ./client/usage/
COPY internal/redisscript/go.mod internal/redisscript/go.sum ./internal/redisscript/
RUN GOWORK=off go mod download
COPY . .
RUN GOWORK=off CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/sluice-admin ./cmd/admin
RUN GOWORK=off CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/sluice-sync ./cmd/sync
RUN GOWORK=off CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/sluice-decide ./cmd/decide

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice-admin /usr/local/bin/sluice-admin
COPY --from=build /out/sluice-sync /usr/local/bin/sluice-sync
COPY --from=build /out/sluice-decide /usr/local/bin/sluice-decide
USER nonroot:nonroot
EXPOSE 8080 8081 8082 9090
ENTRYPOINT ["/usr/local/bin/sluice-admin"]
