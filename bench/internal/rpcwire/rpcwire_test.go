package rpcwire

import (
	"errors"
	"strings"
	"testing"
)

func TestReadResultJSON(t *testing.T) {
	res, err := ReadResult("application/json", strings.NewReader(`{"jsonrpc":"2.0","id":7,"result":{"ok":true}}`), 7)
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("ReadResult = %s, %v", res, err)
	}
	_, err = ReadResult("application/json", strings.NewReader(`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"tool not found"}}`), 7)
	var re *Error
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("a JSON-RPC error read as %v", err)
	}
}

func TestReadResultSSESkipsNotifications(t *testing.T) {
	body := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"id: 2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"n\":1}}\n\n"
	res, err := ReadResult("text/event-stream", strings.NewReader(body), 3)
	if err != nil || string(res) != `{"n":1}` {
		t.Fatalf("ReadResult = %s, %v", res, err)
	}
	// The last event may end without a blank line.
	res, err = ReadResult("text/event-stream; charset=utf-8", strings.NewReader("data: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}"), 4)
	if err != nil || string(res) != `{}` {
		t.Fatalf("ReadResult without a final blank line = %s, %v", res, err)
	}
	if _, err := ReadResult("text/event-stream", strings.NewReader("data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n\n"), 4); err == nil {
		t.Fatal("a stream answering another id was taken as the answer")
	}
	if _, err := ReadResult("text/html", strings.NewReader("<p>"), 1); err == nil {
		t.Fatal("an HTML answer was accepted")
	}
}
