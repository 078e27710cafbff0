package client

import (
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// Keyed acquires of one round trip are sent as one call of the keyed
// acquire script, which takes several acquires at once (docs/protocol.md,
// "Several keyed acquires in one call"): they share one reading of the
// clock and one MGET of their states, so Redis does less work per acquire,
// while each is still decided as if it ran alone, atomically, with its own
// app check, config check and expiry. On a single node (or Sentinel) every
// keyed acquire of the round trip goes into one call; on Redis Cluster,
// where a call's keys must share a slot, one call per key group.

// maxKeyedMerge bounds the acquires of one script call, so that one call
// never blocks Redis for long.
const maxKeyedMerge = 128

// isKeyed tells a single keyed acquire call (ten arguments when critical).
func (c *call) isKeyed() bool {
	return (c.nargs == 9 || c.nargs == 10) && len(c.xargs) == 0 && c.src == keyedScript.src
}

// mergeKeyed returns the calls to send for calls: the same when fewer than
// two are keyed, else the others followed by merged calls, each holding
// the keyed calls it answers for in its batch field and its command in
// xargs. splitKeyed hands out the answers after the round trip.
func (s *sender) mergeKeyed(calls []*call) []*call {
	n := 0
	for _, c := range calls {
		if c.isKeyed() {
			n++
		}
	}
	if n < 2 {
		return calls
	}
	_, oneNode := s.l.rdb.(*redis.Client)
	out := make([]*call, 0, len(calls)-n+n/maxKeyedMerge+1)
	// Merged calls still taking acquires: one on a single node, one per
	// key group on a cluster.
	var open []*call
	closeMerged := func(m *call) {
		if len(m.batch) == 1 {
			out = append(out, m.batch[0]) // alone in its group: sent as it is
			putCall(m)
			return
		}
		m.buildKeyedMany(s.l.appArg)
		out = append(out, m)
	}
	for _, c := range calls {
		if !c.isKeyed() {
			out = append(out, c)
			continue
		}
		i := 0
		if !oneNode {
			for i < len(open) && open[i].batch[0].args[3] != c.args[3] {
				i++
			}
		}
		if i == len(open) {
			m := getCall()
			m.src = keyedScript.src
			open = append(open, m)
		}
		m := open[i]
		m.batch = append(m.batch, c)
		if len(m.batch) == maxKeyedMerge {
			open = append(open[:i], open[i+1:]...)
			closeMerged(m)
		}
	}
	for _, m := range open {
		closeMerged(m)
	}
	return out
}

// buildKeyedMany sets the merged call's command from its keyed calls:
// EVALSHA sha 2k group1 state1 ... app n1 key1 ... 3 (protocol 3: ten
// integers per answer, the ninth the key's shadow mode, the tenth its
// reserve), followed by the critical flags when some call is critical
// ("0110": the second and third).
func (m *call) buildKeyedMany(app any) {
	// The command of the first call: FCALL or EVALSHA, as it was sent.
	args := append(m.xargs[:0], m.batch[0].args[0], m.batch[0].args[1], strconv.Itoa(2*len(m.batch)))
	critical := false
	for _, c := range m.batch {
		args = append(args, c.args[3], c.args[4])
		critical = critical || c.nargs == 10
	}
	args = append(args, app)
	for _, c := range m.batch {
		args = append(args, c.args[6], c.args[7])
	}
	args = append(args, redisscript.ProtocolReserve)
	if critical {
		flags := make([]byte, len(m.batch))
		for i, c := range m.batch {
			flags[i] = '0'
			if c.nargs == 10 {
				flags[i] = '1'
			}
		}
		args = append(args, string(flags))
	}
	m.xargs, m.merged = args, true
}

// splitKeyed hands the answers of the merged calls among sent out to their
// keyed calls, and recycles the merged calls. An answer has ten integers
// (protocol 3), or nine or eight from a script of an older release.
func splitKeyed(sent []*call) {
	for _, m := range sent {
		if !m.merged {
			continue
		}
		w := 0
		switch len(m.reply) {
		case 10 * len(m.batch):
			w = 10
		case 9 * len(m.batch):
			w = 9
		case 8 * len(m.batch):
			w = 8
		}
		for i, c := range m.batch {
			switch {
			case m.err != nil:
				c.err = m.err
			case w == 0:
				c.err = redisscript.ErrBadAnswer
			default:
				c.reply = m.reply[w*i : w*i+w : w*i+w]
			}
		}
		putCall(m)
	}
}
