package crdtpb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
	"google.golang.org/protobuf/proto"
)

// textRequest is a push of one delta per (registry, origin) pair, with
// every name as text.
func textRequest(t testing.TB, regs []string, origins []crdt.Origin) *peerv1.ReplicateRequest {
	req := &peerv1.ReplicateRequest{Sender: "node-1@1"}
	for _, reg := range regs {
		for _, o := range origins {
			d := sampleDelta(t)
			d.Origin = o
			req.Deltas = append(req.Deltas, EncodeDelta(reg, d))
		}
	}
	return req
}

func TestStreamRoundTrip(t *testing.T) {
	o2 := crdt.Origin{Name: "node-2", Epoch: 7}
	var enc StreamEncoder
	var dec StreamDecoder
	for i, want := range []*peerv1.ReplicateRequest{
		textRequest(t, []string{"sessions", "tools"}, []crdt.Origin{origin}),
		textRequest(t, []string{"tools", "sessions"}, []crdt.Origin{origin, o2}),
		textRequest(t, []string{"sessions"}, []crdt.Origin{o2}),
	} {
		before := proto.Clone(want)
		got := roundTrip(t, enc.Encode(want))
		if !proto.Equal(want, before) {
			t.Fatalf("request %d: Encode modified its input", i)
		}
		for _, d := range got.GetDeltas() {
			if d.GetOriginRef() == 0 || d.GetRegistryRef() == 0 || d.GetOriginName() != "" || d.GetRegistry() != "" {
				t.Fatalf("request %d: delta not sent by ref: %v", i, d)
			}
		}
		wantDecls := [][2]int{{1, 2}, {1, 0}, {0, 0}}[i]
		if len(got.GetOrigins()) != wantDecls[0] || len(got.GetRegistries()) != wantDecls[1] {
			t.Fatalf("request %d declares %d origins and %d registries, want %v", i, len(got.GetOrigins()), len(got.GetRegistries()), wantDecls)
		}
		if err := dec.Resolve(got); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got.Origins, got.Registries = nil, nil
		if !proto.Equal(got, want) {
			t.Fatalf("request %d resolved to\n%v\nwant\n%v", i, got, want)
		}
		for _, d := range got.GetDeltas() {
			if _, _, err := DecodeDelta(d, Limits{}); err != nil {
				t.Fatalf("request %d: resolved delta: %v", i, err)
			}
		}
	}
}

// TestStreamEncoderKeepsText checks what the encoder leaves as text: a
// malformed origin or registry (for the receiver to reject as before) and
// new names once the stream has MaxStreamDecls refs.
func TestStreamEncoderKeepsText(t *testing.T) {
	var enc StreamEncoder
	bad := enc.Encode(&peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{
		{Registry: "Bad Name", OriginName: "n", OriginEpoch: 1},
		{Registry: "tools", OriginName: "n", OriginEpoch: 0},
	}})
	if d := bad.GetDeltas()[0]; d.GetRegistry() != "Bad Name" || d.GetRegistryRef() != 0 || d.GetOriginRef() != 1 {
		t.Errorf("malformed registry: %v", d)
	}
	if d := bad.GetDeltas()[1]; d.GetOriginName() != "n" || d.GetOriginRef() != 0 || d.GetRegistryRef() != 1 {
		t.Errorf("malformed origin: %v", d)
	}
	// An encoder and a decoder in step: past the bound, new origins go as
	// text and the decoder accepts every request.
	var full StreamEncoder
	var dec StreamDecoder
	var last *peerv1.ReplicateRequest
	for i := range MaxStreamDecls + 2 {
		last = full.Encode(&peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{{Registry: "r", OriginName: fmt.Sprintf("n%d", i), OriginEpoch: 1}}})
		if err := dec.Resolve(roundTrip(t, last)); err != nil {
			t.Fatalf("request %d of an encoder refused: %v", i, err)
		}
	}
	if d := last.GetDeltas()[0]; d.GetOriginName() == "" || d.GetOriginRef() != 0 || d.GetRegistryRef() != 1 || len(last.GetOrigins()) != 0 {
		t.Errorf("past the bound: %v", last)
	}
	if n := len(dec.origins) + len(dec.registries); n != MaxStreamDecls {
		t.Errorf("decoder holds %d declarations, want %d", n, MaxStreamDecls)
	}
}

// TestStreamDecoderRejects checks that every protocol error is refused
// with ErrInvalid and leaves both the request and the stream's table as
// they were.
func TestStreamDecoderRejects(t *testing.T) {
	o := func(ref uint32, name string, epoch uint64) *peerv1.OriginDecl {
		return &peerv1.OriginDecl{Ref: ref, Name: name, Epoch: epoch}
	}
	r := func(ref uint32, name string) *peerv1.RegistryDecl { return &peerv1.RegistryDecl{Ref: ref, Name: name} }
	byRef := func(oref, rref uint32) *peerv1.Delta {
		return &peerv1.Delta{OriginRef: oref, RegistryRef: rref, From: 1, To: 1}
	}
	many := &peerv1.ReplicateRequest{}
	for i := range MaxStreamDecls - 1 { // two are declared by the first request
		many.Registries = append(many.Registries, r(uint32(i+2), fmt.Sprintf("r%d", i)))
	}
	for name, req := range map[string]*peerv1.ReplicateRequest{
		"unknown origin ref":        {Deltas: []*peerv1.Delta{byRef(2, 1)}},
		"unknown registry ref":      {Deltas: []*peerv1.Delta{byRef(1, 2)}},
		"origin redeclared":         {Origins: []*peerv1.OriginDecl{o(1, "n", 2)}, Deltas: []*peerv1.Delta{byRef(1, 1)}},
		"registry redeclared":       {Registries: []*peerv1.RegistryDecl{r(1, "tools")}},
		"conflict within a request": {Origins: []*peerv1.OriginDecl{o(2, "a", 1), o(2, "b", 1)}},
		"too many declarations":     many,
		"origin ref 0":              {Origins: []*peerv1.OriginDecl{o(0, "a", 1)}},
		"registry ref 0":            {Registries: []*peerv1.RegistryDecl{r(0, "a")}},
		"origin without epoch":      {Origins: []*peerv1.OriginDecl{o(2, "a", 0)}},
		"origin bad name":           {Origins: []*peerv1.OriginDecl{o(2, "a@1", 1)}},
		"registry bad name":         {Registries: []*peerv1.RegistryDecl{r(2, "")}},
		"nil declaration":           {Origins: []*peerv1.OriginDecl{nil}},
		"origin by ref and name":    {Deltas: []*peerv1.Delta{{OriginRef: 1, OriginName: "n", RegistryRef: 1}}},
		"origin by ref and epoch":   {Deltas: []*peerv1.Delta{{OriginRef: 1, OriginEpoch: 1, RegistryRef: 1}}},
		"registry by ref and name":  {Deltas: []*peerv1.Delta{{OriginRef: 1, RegistryRef: 1, Registry: "sessions"}}},
		// The unknown ref comes after good declarations and a good delta:
		// none of them may take effect.
		"bad delta after good ones": {
			Origins:    []*peerv1.OriginDecl{o(2, "m", 3)},
			Registries: []*peerv1.RegistryDecl{r(2, "tools")},
			Deltas:     []*peerv1.Delta{byRef(2, 2), byRef(3, 1)},
		},
	} {
		var dec StreamDecoder
		first := &peerv1.ReplicateRequest{Origins: []*peerv1.OriginDecl{o(1, "n", 1)}, Registries: []*peerv1.RegistryDecl{r(1, "sessions")}}
		if err := dec.Resolve(first); err != nil {
			t.Fatalf("%s: first request: %v", name, err)
		}
		before := proto.Clone(req)
		if err := dec.Resolve(req); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if !proto.Equal(req, before) {
			t.Errorf("%s: refused request was modified: %v", name, req)
		}
		if len(dec.origins) != 1 || len(dec.registries) != 1 {
			t.Errorf("%s: refused declarations entered the table: %v %v", name, dec.origins, dec.registries)
		}
	}
}

// TestStreamDecoderAccepts checks the edge cases that are not errors: an
// identical redeclaration, the declaration limit exactly, a text delta
// next to ref ones, and a registry and an origin sharing a number.
func TestStreamDecoderAccepts(t *testing.T) {
	var dec StreamDecoder
	req := &peerv1.ReplicateRequest{
		Origins:    []*peerv1.OriginDecl{{Ref: 1, Name: "n", Epoch: 1}, {Ref: 1, Name: "n", Epoch: 1}},
		Registries: []*peerv1.RegistryDecl{{Ref: 1, Name: "tools"}},
		Deltas: []*peerv1.Delta{
			{OriginRef: 1, RegistryRef: 1, To: 1, Puts: []*peerv1.Put{{Key: "k", Seq: 1}}},
			{OriginName: "m", OriginEpoch: 2, Registry: "sessions"},
			{OriginName: "m", OriginEpoch: 2, RegistryRef: 1},
		},
	}
	if err := dec.Resolve(req); err != nil {
		t.Fatal(err)
	}
	want := []string{"tools n@1", "sessions m@2", "tools m@2"}
	for i, d := range req.GetDeltas() {
		got := d.GetRegistry() + " " + crdt.Origin{Name: d.GetOriginName(), Epoch: d.GetOriginEpoch()}.String()
		if got != want[i] || d.GetOriginRef() != 0 || d.GetRegistryRef() != 0 {
			t.Errorf("delta %d resolved to %q (%v), want %q", i, got, d, want[i])
		}
	}
	fill := &peerv1.ReplicateRequest{Origins: []*peerv1.OriginDecl{{Ref: 1, Name: "n", Epoch: 1}}}
	for i := range MaxStreamDecls - 2 {
		fill.Registries = append(fill.Registries, &peerv1.RegistryDecl{Ref: uint32(i + 2), Name: "r"})
	}
	if err := dec.Resolve(fill); err != nil {
		t.Fatalf("declarations up to the limit: %v", err)
	}
	if n := len(dec.origins) + len(dec.registries); n != MaxStreamDecls {
		t.Fatalf("%d declarations recorded, want %d", n, MaxStreamDecls)
	}
	if err := dec.Resolve(&peerv1.ReplicateRequest{Origins: []*peerv1.OriginDecl{{Ref: 2, Name: "x", Epoch: 1}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("declaration past the limit: %v", err)
	}
}
