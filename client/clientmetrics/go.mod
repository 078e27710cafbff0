module github.com/sluicehq/sluice/client/clientmetrics

go 1.26.0

require (
	github.com/prometheus/client_golang v1.25.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sluicehq/sluice/client v0.0.0-00010101000000-000000000000
	github.com/sluicehq/sluice/internal/redisscript v0.0.0-00010101000000-000000000000
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// Modules of this repository, built from the checkout.
replace (
	github.com/sluicehq/sluice/client => ..
	github.com/sluicehq/sluice/internal/redisscript => ../../internal/redisscript
)
