module github.com/sluicehq/sluice/internal/limits

go 1.26.0
