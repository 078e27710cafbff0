package redisscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// ApplyRaw runs the apply script with raw arguments, so that tests can send
// what a careless writer might ("1e1", " 1", "0x10").
func ApplyRaw(ctx context.Context, rdb redis.Scripter, ks Keyspace, name string, args ...any) (int64, error) {
	return applyScript.Run(ctx, rdb, []string{ks.Bucket(name), ks.Tombstone(name)}, args...).Int64()
}

// DeleteRaw runs the delete script with raw arguments.
func DeleteRaw(ctx context.Context, rdb redis.Scripter, ks Keyspace, name string, args ...any) (int64, error) {
	return deleteScript.Run(ctx, rdb, []string{ks.Bucket(name), ks.Tombstone(name)}, args...).Int64()
}
