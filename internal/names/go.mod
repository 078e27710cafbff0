module github.com/sluicehq/sluice/internal/names

go 1.26.0
