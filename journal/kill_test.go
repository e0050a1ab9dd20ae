package journal

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const childEnv = "JOURNAL_TEST_CHILD"

// runChild is the child process of TestKill9LosesNoAcknowledgedWrite: it puts counter values as
// fast as it can and prints each one after Put returned.
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
	w := bufio.NewWriter(os.Stdout)
	pad := make([]byte, 512)
	for i := 1; ; i++ {
		if err := j.Put(fmt.Sprintf("k%d", i%16), append([]byte(strconv.Itoa(i)+" "), pad...)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(w, i)
		_ = w.Flush()
	}
}

// kill -9 at random moments loses no acknowledged write in Process and
// Sync mode: after each kill, every key holds at least the newest value
// the child printed for it (possibly a later one it had no time to print).
func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	for _, mode := range []Mode{Process, Sync} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			for round := range 8 {
				acked := runAndKill(t, dir, mode, time.Duration(20+rand.IntN(120))*time.Millisecond)
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
		})
	}
}

func runAndKill(t *testing.T, dir string, mode Mode, after time.Duration) map[string]int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "JOURNAL_TEST_MODE="+mode.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	acked := map[string]int{}
	lines := make(chan int, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				lines <- n
			}
		}
	}()
	kill := time.After(after)
	for {
		select {
		case n, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				return acked
			}
			acked[fmt.Sprintf("k%d", n%16)] = n
		case <-kill:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			kill = nil
		}
	}
}
