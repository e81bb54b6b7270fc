// Command scaling measures how this machine's throughput grows from one
// busy core to two, for three kinds of work: compute on data in the
// first-level cache, reads and writes of data that fits the second-level
// cache, and reads and writes of data far larger than every cache. It
// prints each as the throughput of two goroutines over that of one (2.00
// is linear), the best of several tries. make bench reports it beside
// cdclake's own ratio of two cores to one, which cannot exceed what the
// machine gives the work it does.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// kind is one kind of work: run does a fixed amount of it on buf.
type kind struct {
	name string
	size int // bytes of data per goroutine
	run  func(buf []byte)
}

var kinds = []kind{
	{"compute", 4 << 10, func(buf []byte) {
		for range 20000 {
			s := sha256.Sum256(buf)
			buf[0] = s[0]
		}
	}},
	{"cache", 256 << 10, func(buf []byte) { touch(buf, 400) }},
	{"memory", 64 << 20, func(buf []byte) { touch(buf, 2) }},
}

// touch reads and writes a byte of every cache line of buf, passes times.
func touch(buf []byte, passes int) {
	var s byte
	for range passes {
		for i := 0; i < len(buf); i += 64 {
			s += buf[i]
			buf[i] = s
		}
	}
}

// elapsed runs k on n goroutines at once, each on its own data, and
// returns the wall time.
func elapsed(k kind, n int) time.Duration {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, k.size)
		k.run(bufs[i]) // the pages exist before the clock starts
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() { k.run(bufs[i]) })
	}
	wg.Wait()
	return time.Since(start)
}

func main() {
	tries := flag.Int("tries", 5, "tries of each measurement; the best counts")
	flag.Parse()
	runtime.GOMAXPROCS(2)
	for i, k := range kinds {
		one, two := time.Duration(1<<62), time.Duration(1<<62)
		for range *tries {
			one = min(one, elapsed(k, 1))
			two = min(two, elapsed(k, 2))
		}
		if i > 0 {
			fmt.Print(", ")
		}
		fmt.Printf("%s %.2f", k.name, 2*one.Seconds()/two.Seconds())
	}
	fmt.Println()
}
