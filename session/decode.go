package session

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// ModelDecoder is optionally implemented by an App whose model cannot be
// decoded from JSON into the type Init returns.
type ModelDecoder interface {
	DecodeModel(data json.RawMessage) (Model, error)
}

// decodeModel turns a snapshot's JSON back into a model of the type the
// app's Init returns.
func decodeModel(app App, data json.RawMessage) (Model, error) {
	if d, ok := app.(ModelDecoder); ok {
		return d.DecodeModel(data)
	}
	m0, err := app.Init()
	if err != nil {
		return nil, fmt.Errorf("decoding model: initialising for its type: %w", err)
	}
	t := reflect.TypeOf(m0)
	if t == nil {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("decoding model: %w", err)
		}
		return v, nil
	}
	if t.Kind() == reflect.Pointer {
		p := reflect.New(t.Elem())
		if err := json.Unmarshal(data, p.Interface()); err != nil {
			return nil, fmt.Errorf("decoding model: %w", err)
		}
		return p.Interface(), nil
	}
	p := reflect.New(t)
	if err := json.Unmarshal(data, p.Interface()); err != nil {
		return nil, fmt.Errorf("decoding model: %w", err)
	}
	return p.Elem().Interface(), nil
}
