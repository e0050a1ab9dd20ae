package crdt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt transcripts")

// TestTranscripts runs the specification transcripts in testdata. Each
// block is a command, a "----" line and the expected output, ended by a
// blank line; -rewrite records the actual output instead.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runTranscript(t, file) })
	}
}

func runTranscript(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out strings.Builder
	tr := &transcript{maps: map[string]*Map{}, deltas: map[string]Delta{}}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		cmd := line
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ---- line", file, i+1)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got := tr.run(cmd)
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", file, cmd, got, strings.Join(want, "\n"))
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", cmd, got)
		if i < len(lines) {
			out.WriteString("\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type transcript struct {
	maps    map[string]*Map
	deltas  map[string]Delta
	n       int
	changes []string
}

func (tr *transcript) save(d Delta) string {
	tr.n++
	name := "d" + strconv.Itoa(tr.n)
	tr.deltas[name] = d
	return name + " = " + formatDelta(d)
}

func (tr *transcript) run(cmd string) string {
	f := strings.Fields(cmd)
	res := tr.exec(f)
	if len(tr.changes) > 0 {
		res += "\n" + strings.Join(tr.changes, "\n")
		tr.changes = nil
	}
	return res
}

func (tr *transcript) origin(s string) Origin {
	o, err := ParseOrigin(s)
	if err != nil {
		panic(err)
	}
	return o
}

func (tr *transcript) exec(f []string) string {
	m := func(i int) *Map { return tr.maps[f[i]] }
	switch f[0] {
	case "new":
		cfg := Config{}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "log":
				cfg.LogMaxDeltas = n
			case "drop":
				cfg.DropMemory = uint64(n)
			}
		}
		mp := New(tr.origin(f[1]), cfg)
		mp.OnChange(func(c Change) {
			tr.changes = append(tr.changes, fmt.Sprintf("  %s change %s/%s: %s -> %s", f[1], c.Origin, c.Key, show(c.Old), show(c.New)))
		})
		tr.maps[f[1]] = mp
		return "ok"
	case "put":
		k, v, _ := strings.Cut(f[2], "=")
		d, err := m(1).Put(k, []byte(v))
		if err != nil {
			return "error: " + err.Error()
		}
		return tr.save(d)
	case "remove":
		d, ok := m(1).Remove(f[2])
		if !ok {
			return "absent"
		}
		return tr.save(d)
	case "merge":
		d, err := MergeDeltas(tr.deltas[f[1]], tr.deltas[f[2]])
		if err != nil {
			return "error: " + err.Error()
		}
		return tr.save(d)
	case "delta": // delta <origin> <from> <to> [put k=v@s | del k@s]...
		d := Delta{Origin: Origin{}, From: atou(f[2]), To: atou(f[3])}
		d.Origin, _ = ParseOrigin(f[1])
		for i := 4; i+1 < len(f); i += 2 {
			kv, s, _ := strings.Cut(f[i+1], "@")
			if f[i] == "put" {
				k, v, _ := strings.Cut(kv, "=")
				d.Puts = append(d.Puts, Put{Key: k, Value: []byte(v), Seq: atou(s)})
			} else {
				d.Removes = append(d.Removes, Removal{Key: kv, Seq: atou(s)})
			}
		}
		return tr.save(d)
	case "apply":
		res, err := m(1).Apply(tr.deltas[f[2]])
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("applied=%v gap=%v ignored=%v have=%d", res.Applied, res.Gap, res.Ignored, res.Have)
	case "dump":
		return dump(m(1))
	case "hide":
		m(1).Hide(tr.origin(f[2]))
		return "ok"
	case "unhide":
		m(1).Unhide(tr.origin(f[2]))
		return "ok"
	case "drop":
		m(1).Drop(tr.origin(f[2]))
		return "ok"
	case "tick":
		m(1).Tick()
		return "ok"
	case "digest":
		return fmt.Sprint(m(1).Digest())
	case "missing": // missing <map> <peer>: what map has that peer lacks
		return fmt.Sprint(m(1).Missing(m(2).Digest()))
	case "since":
		d, ok := m(1).DeltaSince(tr.origin(f[2]), atou(f[3]))
		if !ok {
			return "snapshot needed"
		}
		return tr.save(d)
	case "snapshot": // snapshot <src> <origin> <chunkBytes> <dst>
		chunks := m(1).Snapshot(tr.origin(f[2]), int(atou(f[3])))
		var b strings.Builder
		rcv := m(4).NewSnapshotReceiver(tr.origin(f[2]), chunks[0].Seq)
		for _, c := range chunks {
			fmt.Fprintf(&b, "chunk %d seq=%d last=%v:", c.Index, c.Seq, c.Last)
			for _, e := range c.Entries {
				fmt.Fprintf(&b, " %s=%s@%d", e.Key, e.Value, e.Seq)
			}
			b.WriteString("\n")
			if err := rcv.Add(c); err != nil {
				return b.String() + "error: " + err.Error()
			}
		}
		ok, err := rcv.Commit()
		fmt.Fprintf(&b, "commit %v %v", ok, err)
		return b.String()
	}
	return "unknown command " + f[0]
}

func atou(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

func show(b []byte) string {
	if b == nil {
		return "nil"
	}
	return strconv.Quote(string(b))
}

// dump lists every partition, hidden ones too, with its raw entries.
func dump(m *Map) string {
	var b strings.Builder
	for _, p := range m.sortedParts() {
		fmt.Fprintf(&b, "%s seq=%d", p.origin, p.seq)
		if p.hidden {
			b.WriteString(" hidden")
		}
		for _, e := range p.entries.sorted() {
			fmt.Fprintf(&b, " %s=%s@%d", e.key, e.value, e.seq)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
