package session

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Limits on a derived tool's input schema.
const (
	// MaxSchemaDepth is how deeply maps and lists may nest.
	MaxSchemaDepth = 32
	// MaxSchemaValues is how many values (each map, list and leaf) a schema
	// may hold.
	MaxSchemaValues = 10000
)

// cleanSchema returns a sanitised deep copy of schema, as JSON. It refuses
// a schema that is not a JSON object with "type": "object", nests deeper
// than MaxSchemaDepth, holds more than MaxSchemaValues values, holds a value
// JSON cannot encode, or has two keys equal once cleaned.
func cleanSchema(schema map[string]any) (json.RawMessage, error) {
	if schema == nil {
		return json.RawMessage(`{"properties":{},"type":"object"}`), nil
	}
	c := cleaner{}
	v, err := c.clean(schema, 1)
	if err != nil {
		return nil, err
	}
	obj := v.(map[string]any)
	if obj["type"] != "object" {
		return nil, fmt.Errorf("input schema must have \"type\": \"object\"")
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding input schema: %w", err)
	}
	return b, nil
}

type cleaner struct{ values int }

func (c *cleaner) clean(v any, depth int) (any, error) {
	c.values++
	if c.values > MaxSchemaValues {
		return nil, fmt.Errorf("input schema holds more than %d values", MaxSchemaValues)
	}
	switch x := v.(type) {
	case nil, bool:
		return x, nil
	case string:
		return Sanitize(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("input schema holds a non-finite number")
		}
		return x, nil
	case float32:
		return c.clean(float64(x), depth)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return x, nil
	case map[string]any:
		if depth > MaxSchemaDepth {
			return nil, fmt.Errorf("input schema nests deeper than %d levels", MaxSchemaDepth)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic error reports
		out := make(map[string]any, len(x))
		for _, k := range keys {
			ck := Sanitize(k)
			if _, dup := out[ck]; dup {
				return nil, fmt.Errorf("input schema has two keys equal to %q once cleaned", ck)
			}
			cv, err := c.clean(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			out[ck] = cv
		}
		return out, nil
	case []any:
		if depth > MaxSchemaDepth {
			return nil, fmt.Errorf("input schema nests deeper than %d levels", MaxSchemaDepth)
		}
		out := make([]any, len(x))
		for i, e := range x {
			ce, err := c.clean(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = ce
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		c.values--
		return c.clean(out, depth)
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		c.values--
		return c.clean(out, depth)
	default:
		return nil, fmt.Errorf("input schema holds a %T, which JSON cannot encode as a schema value", v)
	}
}
