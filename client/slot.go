package client

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// sameSlot reports whether keys all map to one Redis Cluster hash slot. It
// is true for any keys unless rdb is a Cluster client.
func sameSlot(rdb redis.UniversalClient, keys []string) bool {
	if _, ok := rdb.(*redis.ClusterClient); !ok || len(keys) < 2 {
		return true
	}
	first := keySlot(keys[0])
	for _, k := range keys[1:] {
		if keySlot(k) != first {
			return false
		}
	}
	return true
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key without one, modulo 16384.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
