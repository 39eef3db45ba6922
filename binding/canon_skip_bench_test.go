package binding

import (
	"strings"
	"testing"
)

// BenchmarkSkipPlain measures the string scanner's inner loop on a 64 KB
// run of plain bytes (the bulk of a request is string bytes).
func BenchmarkSkipPlain(b *testing.B) {
	in := []byte(strings.Repeat("abcdefgh ijklmnop é 中文 ", 64<<10/28) + `"`)
	b.SetBytes(int64(len(in)))
	loopCPU(b, func() {
		if skipPlain(in, 0) != len(in)-1 {
			b.Fatal("wrong")
		}
	})
}
