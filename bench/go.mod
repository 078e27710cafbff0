module github.com/sluicehq/sluice/bench

go 1.26.0

// Modules of this repository, built from the checkout.
replace (
	github.com/sluicehq/sluice => ../
	github.com/sluicehq/sluice/client => ../client
	github.com/sluicehq/sluice/client/clientmetrics => ../client/clientmetrics
	github.com/sluicehq/sluice/client/usage => ../client/usage
	github.com/sluicehq/sluice/internal/redisscript => ../internal/redisscript
)

require (
	github.com/envoyproxy/go-control-plane/envoy v1.40.0
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000
	github.com/sluicehq/sluice/client v0.0.0-00010101000000-000000000000
	github.com/sluicehq/sluice/internal/redisscript v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.84.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2 // indirect
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/golang-migrate/migrate/v4 v4.20.1 // indirect
	github.com/jmoiron/sqlx v1.4.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260720211330-0afa2a65878a // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
