package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
)

// refMarshal and refUnmarshal are Result's codec as it was before the
// direct one (it stays the fallback): the reference the direct codec is
// held to.
func refMarshal(r Result) ([]byte, error) { return r.marshalPlain() }

func refUnmarshal(r *Result, b []byte) error { return r.unmarshalPlain(b) }

// fuzzStructured builds a structured value of the kind mode picks from the
// fuzzer's bytes.
func fuzzStructured(mode uint8, raw []byte, bits uint64) any {
	var decoded any
	_ = json.Unmarshal(raw, &decoded)
	switch mode % 9 {
	case 1:
		return json.RawMessage(raw)
	case 2:
		return decoded // map[string]any, []any, float64, string, bool or nil
	case 3:
		return string(raw)
	case 4:
		return math.Float64frombits(bits)
	case 5:
		return int(bits)
	case 6:
		return map[string]any{"value": string(raw), "n": math.Float64frombits(bits), "raw": json.RawMessage(raw), "x": decoded}
	case 7:
		return []any{decoded, []string{string(raw)}, map[string]int{string(raw): int(bits)}}
	case 8:
		return json.RawMessage(nil)
	}
	return nil
}

func resultMarshalSeeds(f *testing.F) {
	for _, s := range []struct {
		text string
		raw  string
		mode uint8
		bits uint64
		err  bool
	}{
		{"inc applied to widget `inc`", "", 0, 0, false},
		{"widget `x` is gone", "", 0, 0, true},
		{`{"value":"hello"}`, `{"value":"hello"}`, 2, 0, false},
		{"<b>&amp;</b> \u2028\u2029 \x00\x1f\x7f \t\n\r\b\f \\ \"", ` { "a" : [ 1 , 2.5e-7 , "<&>\u2028" ] } `, 1, 0, false},
		{"caf\xc3\xa9 \xff\xfe ☃ 😀", `{"b":[true,false,null],"a":{"z":-0.0,"y":1e21}}`, 2, 0x7ff8000000000000, false},
		{"", `not json`, 1, 0, false},
		{"", ``, 1, 0, false},
		{"nan", `1`, 4, 0x7ff8000000000000, false},
		{"inf", `1`, 4, 0x7ff0000000000000, false},
		{"tiny", `1`, 4, 0x3e7ad7f29abcaf48, false}, // 1e-7
		{"big", `1`, 4, 0x444b1ae4d6e2ef50, false},  // 1e21
		{"int", `1`, 5, 1 << 63, false},
		{"mixed", `[{"k":"v"}]`, 6, 0x4020000000000000, false},
		{"slices", `{"k":[1,[2,[3]]]}`, 7, 42, false},
		{"nil raw", ``, 8, 0, false},
	} {
		f.Add(s.text, []byte(s.raw), s.mode, s.bits, s.err)
	}
}

// MarshalJSON writes what encoding/json wrote, byte for byte, and fails
// where it failed, with its error; what it writes reads back as before.
func FuzzResultMarshal(f *testing.F) {
	resultMarshalSeeds(f)
	f.Fuzz(func(t *testing.T, text string, raw []byte, mode uint8, bits uint64, isError bool) {
		r := Result{Text: text, Structured: fuzzStructured(mode, raw, bits), IsError: isError}
		want, wantErr := refMarshal(r)
		got, err := r.MarshalJSON()
		if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("MarshalJSON(%#v) failed with %v, encoding/json with %v", r, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("MarshalJSON(%#v)\n= %s\nencoding/json wrote\n  %s", r, got, want)
		}
		if err != nil {
			return
		}
		checkUnmarshal(t, got)
		// What the codec itself writes is read directly, not left to
		// encoding/json (a raw message may hold what it does not read).
		shallow := bytes.Count(got, []byte("{"))+bytes.Count(got, []byte("[")) <= maxCodecDepth
		if m := mode % 9; m != 1 && m < 6 && shallow {
			if _, _, ok := decodeResult(got); !ok {
				t.Fatalf("%s is not read directly", got)
			}
		}
	})
}

// checkUnmarshal holds UnmarshalJSON to encoding/json's reading of b: the
// same result, or the same error with the target untouched.
func checkUnmarshal(t *testing.T, b []byte) {
	t.Helper()
	prior := Result{Text: "prior", Structured: "prior", IsError: true}
	want, got := prior, prior
	wantErr := refUnmarshal(&want, b)
	err := got.UnmarshalJSON(b)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("UnmarshalJSON(%q) failed with %v, encoding/json with %v", b, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("UnmarshalJSON(%q)\n= %#v\nencoding/json read\n  %#v", b, got, want)
	}
}

// UnmarshalJSON reads every document as encoding/json read it.
func FuzzResultUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"text":"inc applied to widget ` + "`inc`" + `","isError":false}`,
		`{"v":1,"text":"count: 8","structured":{"count":8},"isError":false}`,
		`{"v":1,"text":"{\"value\":\"a\\u003cb\\u0026\"}","structured":{"value":"a<b&"},"isError":true}`,
		` { "v" : 1 ,	"text" : "x" ,
		"isError" : true } ` + "\r\n",
		`{"text":"no version"}`, `{}`, `null`, `[]`, `"x"`, `1`, ``, `{`, `{"v":1,}`, `{"v":1}x`, `{"v":1}{}`,
		`{"v":2,"text":"newer"}`, `{"v":99999999999999999999}`, `{"v":1.0}`, `{"v":1e0}`, `{"v":-0}`, `{"v":01}`,
		`{"v":null,"text":null,"isError":null,"structured":null}`, `{"v":"1"}`, `{"text":5}`, `{"isError":"true"}`,
		`{"Text":"folded","ISERROR":true,"V":1,"Structured":1}`, `{"ſtructured":1,"text":"long s"}`,
		`{"text":"a","text":"b"}`, `{"v":1,"v":2}`, `{"structured":1,"structured":{"a":1}}`, `{"other":1,"text":"x"}`,
		`{"t\u0065xt":"escaped name"}`, `{"text":"\ud83d\ude00 pair"}`, `{"text":"\ud800 lone"}`, `{"text":"\uDFFF"}`,
		`{"text":"\u00e9\u2028\u2029\"\\\/\b\f\n\r\t"}`, `{"text":"raw é ☃ 😀"}`, "{\"text\":\"bad \xff utf8\"}", "{\"text\":\"ctl \x01\"}",
		`{"text":"\x"}`, `{"text":"\u12"}`, `{"text":"\u12G4"}`, `{"text":"unterminated}`,
		`{"structured":[1,-2.5,3e10,-0,0.0,1E-7,true,false,null,"s",[],{},[[]],{"a":{"b":[{}]}}]}`,
		`{"structured":{"k":1,"k":2,"":null}}`, `{"structured":1e400}`, `{"structured":-}`, `{"structured":1.}`,
		`{"structured":.5}`, `{"structured":[1,]}`, `{"structured":{"a":1,}}`, `{"structured":{"a"}}`, `{"structured":tru}`,
		`{"structured":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		`{"structured":{"a":"\ud83d\ude00","b\n":"\u0041"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkUnmarshal(t, b) })
}

// A result of a newer format is refused with ErrFormat on the direct path
// too.
func TestResultNewerFormatRefused(t *testing.T) {
	var r Result
	if err := r.UnmarshalJSON([]byte(`{"v":2,"text":"x","isError":false}`)); !errors.Is(err, ErrFormat) {
		t.Fatalf("a v2 result decoded with %v, want ErrFormat", err)
	}
}

// The common documents are read directly.
func TestResultDecodedDirectly(t *testing.T) {
	for _, s := range []string{
		`{"v":1,"text":"inc applied to widget ` + "`inc`" + `","isError":false}`,
		`{"v":1,"text":"{\"value\":\"a\u003cb\"}","structured":{"value":"a<b","n":[1,2.5,true,null]},"isError":true}`,
		` {"isError" : false , "text":"\u00e9 é", "v":0} `,
		`{}`,
	} {
		if _, _, ok := decodeResult([]byte(s)); !ok {
			t.Errorf("%s is not read directly", s)
		}
	}
}

// A structured value that refers to itself fails as it did.
func TestResultMarshalCycle(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	r := Result{Structured: m}
	_, wantErr := refMarshal(r)
	b, err := r.MarshalJSON()
	if err == nil || wantErr == nil || err.Error() != wantErr.Error() || b != nil {
		t.Fatalf("MarshalJSON of a cycle = %q, %v; encoding/json failed with %v", b, err, wantErr)
	}
}

// The common results, old codec against new, in one run.
func BenchmarkResultCodec(b *testing.B) {
	results := map[string]Result{
		"text":       {Text: "inc applied to widget `inc`"},
		"structured": {Text: `{"value":"hello"}`, Structured: map[string]any{"value": "hello"}},
	}
	for name, r := range results {
		doc, err := refMarshal(r)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/encode/old", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = refMarshal(r)
			}
		})
		b.Run(name+"/encode/new", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = r.MarshalJSON()
			}
		})
		b.Run(name+"/decode/old", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out Result
				_ = refUnmarshal(&out, doc)
			}
		})
		b.Run(name+"/decode/new", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out Result
				_ = out.UnmarshalJSON(doc)
			}
		})
	}
}
