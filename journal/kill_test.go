package journal

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const childEnv = "JOURNAL_TEST_CHILD"

// runChild is the child process of the kill -9 tests: it puts counter
// values as fast as it can and prints each one ("key value") after Put
// returned. With JOURNAL_TEST_WRITERS it runs that many writers at once,
// each on its own key, so their writes share rounds.
func runChild() int {
	mode, err := ParseMode(os.Getenv("JOURNAL_TEST_MODE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	j, err := Open(os.Getenv(childEnv), Options{Mode: mode, Logger: quiet, CompactMin: 256 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	writers, _ := strconv.Atoi(os.Getenv("JOURNAL_TEST_WRITERS"))
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	pad := make([]byte, 512)
	put := func(key func(int) string) error {
		for i := 1; ; i++ {
			k := key(i)
			if err := j.Put(k, append([]byte(strconv.Itoa(i)+" "), pad...)); err != nil {
				return err
			}
			mu.Lock()
			fmt.Fprintln(w, k, i)
			_ = w.Flush()
			mu.Unlock()
		}
	}
	if writers <= 1 {
		fmt.Fprintln(os.Stderr, put(func(i int) string { return fmt.Sprintf("k%d", i%16) }))
		return 1
	}
	errs := make(chan error)
	for n := range writers {
		go func() { errs <- put(func(int) string { return fmt.Sprintf("w%d", n) }) }()
	}
	fmt.Fprintln(os.Stderr, <-errs)
	return 1
}

// kill -9 at random moments loses no acknowledged write in Process and
// Sync mode: after each kill, every key holds at least the newest value
// the child printed for it (possibly a later one it had no time to print).
func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	for _, mode := range []Mode{Process, Sync} {
		t.Run(mode.String(), func(t *testing.T) { killRounds(t, mode, 1) })
	}
}

// The same holds for sixteen writers at once, whose writes share rounds
// written by whichever of them leads.
func TestKill9LosesNoAcknowledgedWriteOfConcurrentWriters(t *testing.T) {
	for _, mode := range []Mode{Process, Sync} {
		t.Run(mode.String(), func(t *testing.T) { killRounds(t, mode, 16) })
	}
}

func killRounds(t *testing.T, mode Mode, writers int) {
	dir := t.TempDir()
	for round := range 8 {
		acked := runAndKill(t, dir, mode, writers, time.Duration(20+rand.IntN(120))*time.Millisecond)
		j := open(t, dir, mode)
		got := contents(t, j)
		_ = j.Close()
		for k, want := range acked {
			v, _, _ := strings.Cut(got[k], " ")
			n, _ := strconv.Atoi(v)
			if n < want {
				t.Fatalf("round %d: %s holds %d after kill -9, %d was acknowledged", round, k, n, want)
			}
		}
	}
}

func runAndKill(t *testing.T, dir string, mode Mode, writers int, after time.Duration) map[string]int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "JOURNAL_TEST_MODE="+mode.String(), "JOURNAL_TEST_WRITERS="+strconv.Itoa(writers))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	type ack struct {
		key string
		n   int
	}
	acked := map[string]int{}
	lines := make(chan ack, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), " ")
			if n, err := strconv.Atoi(v); err == nil {
				lines <- ack{k, n}
			}
		}
	}()
	kill := time.After(after)
	for {
		select {
		case a, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				return acked
			}
			acked[a.key] = max(acked[a.key], a.n)
		case <-kill:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			kill = nil
		}
	}
}
