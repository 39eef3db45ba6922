package daemon

import (
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db/pgtest"
	"github.com/my-pi/bindery/db/sharedtier"
)

// BenchmarkSharedCompile is a compile that reads the tier's releases
// before it decides (shared) against the same compile alone (local): the
// price of a release decided in PostgreSQL, one round trip a compile.
func BenchmarkSharedCompile(b *testing.B) {
	dsn := pgtest.Database(b)
	for _, mode := range []string{"local", "shared"} {
		b.Run(mode, func(b *testing.B) {
			r := newBenchReplica(b, dsn, mode == "shared")
			body := request("bench", 20, 200)
			stampAll(b, r, "bench", body)
			call := &api.CompileCall{Conversation: "bench", Branch: "main", Request: body, Return: api.ReturnPlan}
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.b.Compile(b.Context(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func newBenchReplica(b *testing.B, dsn string, shared bool) *bindingEnv {
	e := newBindingEnv(b, nil)
	e.b = NewBinder(e.j, BinderConfig{Machine: "bench"})
	if shared {
		s, err := sharedtier.Open(dsn, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		if err := s.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		e.b.shared = &sharedFacts{store: s, wait: 5e9, log: e.b.log, poke: func() {}}
	}
	return e
}
