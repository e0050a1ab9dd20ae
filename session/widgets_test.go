package session

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func actionNames(p ToolProvider) []string {
	var out []string
	for _, a := range p.Actions() {
		out = append(out, a.Name)
	}
	return out
}

func TestWidgetActionsOffered(t *testing.T) {
	tests := []struct {
		node ToolProvider
		want []string
	}{
		{Button{ID: "b", OnClick: "x"}, []string{"click"}},
		{Button{ID: "b", Disabled: true}, nil},
		{TextInput{ID: "t"}, []string{"type_into", "clear", "get_value"}},
		{TextInput{ID: "t", Mask: '*'}, []string{"type_into", "clear"}},
		{TextInput{ID: "t", Disabled: true}, nil},
		{PasswordField{ID: "p"}, []string{"type_into", "clear"}},
		{TextArea{ID: "a"}, []string{"type_into", "clear", "get_value"}},
		{SelectList{ID: "s"}, []string{"select", "get_selected", "get_options"}},
		{Checkbox{ID: "c"}, []string{"toggle", "get_checked"}},
		{Tabs{ID: "t"}, []string{"select_tab", "get_tabs"}},
		{Menu{ID: "m"}, []string{"select", "get_items"}},
		{Modal{ID: "m"}, []string{"confirm", "dismiss"}},
		{Table{ID: "t"}, []string{"select_row", "sort", "get_rows"}},
		{Tree{ID: "t"}, []string{"expand", "collapse", "select_node"}},
		{Viewport{ID: "v"}, []string{"scroll_to", "get_visible_range"}},
		{Scrubber{ID: "s"}, []string{"seek", "play", "pause", "get_position"}},
		{Chart{ID: "c"}, []string{"get_data", "get_range"}},
	}
	writes := map[string]bool{"click": true, "type_into": true, "clear": true, "select": true, "toggle": true,
		"select_tab": true, "confirm": true, "dismiss": true, "select_row": true, "sort": true, "expand": true,
		"collapse": true, "select_node": true, "scroll_to": true, "seek": true, "play": true, "pause": true}
	for i, tt := range tests {
		if got := actionNames(tt.node); !slices.Equal(got, tt.want) {
			t.Errorf("Test %d (%s): actions %v, want %v", i, tt.node.Kind(), got, tt.want)
		}
		for _, a := range tt.node.Actions() {
			if a.Write != writes[a.Name] {
				t.Errorf("Test %d (%s): action %s Write=%v", i, tt.node.Kind(), a.Name, a.Write)
			}
		}
	}
}

func TestWidgetPerform(t *testing.T) {
	table := Table{ID: "t", Columns: []TableColumn{{Key: "name", Title: "Name", Sortable: true}, {Key: "n", Title: "N"}},
		Rows: []TableRow{{Key: "a", Cells: []string{"A", "1"}}, {Key: "b", Cells: []string{"B", "2"}}, {Key: "c", Cells: []string{"C", "3"}}}}
	tree := Tree{ID: "tr", Items: []TreeItem{{ID: "root", Label: "root", Children: []TreeItem{{ID: "leaf", Label: "leaf"}}}}}
	tests := []struct {
		name    string
		node    ToolProvider
		action  string
		args    map[string]any
		msg     Msg
		value   string // JSON of the read answer
		wantErr error
	}{
		{"click", Button{ID: "b", OnClick: "go"}, "click", nil, "go", "", nil},
		{"click without on-click", Button{ID: "b"}, "click", nil, nil, "", ErrWidget},
		{"type_into", TextInput{ID: "t"}, "type_into", map[string]any{"text": "hi"}, TypeInto{"t", "hi"}, "", nil},
		{"type_into missing text", TextInput{ID: "t"}, "type_into", nil, nil, "", ErrInvalidArgs},
		{"type_into number", TextInput{ID: "t"}, "type_into", map[string]any{"text": 3.0}, nil, "", ErrInvalidArgs},
		{"clear", TextInput{ID: "t", Value: "x"}, "clear", nil, Clear{"t"}, "", nil},
		{"get_value", TextInput{ID: "t", Value: "v"}, "get_value", nil, nil, `{"value":"v"}`, nil},
		{"get_value masked", TextInput{ID: "t", Value: "v", Mask: '*'}, "get_value", nil, nil, "", ErrWidget},
		{"password type_into", PasswordField{ID: "p"}, "type_into", map[string]any{"text": "s3cret"}, TypeInto{"p", "s3cret"}, "", nil},
		{"password clear", PasswordField{ID: "p"}, "clear", nil, Clear{"p"}, "", nil},
		{"password get_value", PasswordField{ID: "p", Value: "s"}, "get_value", nil, nil, "", ErrWidget},
		{"textarea get_value", TextArea{ID: "a", Value: "l1\nl2"}, "get_value", nil, nil, `{"value":"l1\nl2"}`, nil},
		{"textarea type_into", TextArea{ID: "a"}, "type_into", map[string]any{"text": "x"}, TypeInto{"a", "x"}, "", nil},
		{"select by option", SelectList{ID: "s", Options: []string{"x", "y"}}, "select", map[string]any{"option": "y"}, Select{"s", "y", 1}, "", nil},
		{"select by index", SelectList{ID: "s", Options: []string{"x", "y"}}, "select", map[string]any{"index": 0.0}, Select{"s", "x", 0}, "", nil},
		{"select unknown", SelectList{ID: "s", Options: []string{"x"}}, "select", map[string]any{"option": "z"}, nil, "", ErrInvalidArgs},
		{"select index out of range", SelectList{ID: "s", Options: []string{"x"}}, "select", map[string]any{"index": 1}, nil, "", ErrInvalidArgs},
		{"select fractional index", SelectList{ID: "s", Options: []string{"x"}}, "select", map[string]any{"index": 0.5}, nil, "", ErrInvalidArgs},
		{"select mismatch", SelectList{ID: "s", Options: []string{"x", "y"}}, "select", map[string]any{"option": "x", "index": 1}, nil, "", ErrInvalidArgs},
		{"select nothing", SelectList{ID: "s", Options: []string{"x"}}, "select", nil, nil, "", ErrInvalidArgs},
		{"get_selected", SelectList{ID: "s", Options: []string{"x", "y"}, Selected: 1}, "get_selected", nil, nil, `{"index":1,"selected":"y"}`, nil},
		{"get_selected none", SelectList{ID: "s", Options: []string{"x"}, Selected: -1}, "get_selected", nil, nil, `{"index":-1,"selected":null}`, nil},
		{"get_options", SelectList{ID: "s", Options: []string{"x"}}, "get_options", nil, nil, `{"options":["x"]}`, nil},
		{"toggle on", Checkbox{ID: "c"}, "toggle", nil, Toggle{"c", true}, "", nil},
		{"toggle off", Checkbox{ID: "c", Checked: true}, "toggle", nil, Toggle{"c", false}, "", nil},
		{"get_checked", Checkbox{ID: "c", Checked: true}, "get_checked", nil, nil, `{"checked":true}`, nil},
		{"select_tab", Tabs{ID: "t", Tabs: []string{"a", "b"}}, "select_tab", map[string]any{"tab": "b"}, SelectTab{"t", "b", 1}, "", nil},
		{"select_tab unknown", Tabs{ID: "t", Tabs: []string{"a"}}, "select_tab", map[string]any{"tab": "z"}, nil, "", ErrInvalidArgs},
		{"get_tabs", Tabs{ID: "t", Tabs: []string{"a", "b"}}, "get_tabs", nil, nil, `{"index":0,"selected":"a","tabs":["a","b"]}`, nil},
		{"menu select", Menu{ID: "m", Items: []string{"Open"}}, "select", map[string]any{"item": "Open"}, Select{"m", "Open", 0}, "", nil},
		{"menu select unknown", Menu{ID: "m", Items: []string{"Open"}}, "select", map[string]any{"item": "Close"}, nil, "", ErrInvalidArgs},
		{"get_items", Menu{ID: "m", Items: []string{"Open"}}, "get_items", nil, nil, `{"items":["Open"]}`, nil},
		{"confirm", Modal{ID: "m"}, "confirm", nil, Confirm{"m"}, "", nil},
		{"dismiss", Modal{ID: "m"}, "dismiss", nil, Dismiss{"m"}, "", nil},
		{"select_row by index", table, "select_row", map[string]any{"row": 1}, SelectRow{"t", "b", 1}, "", nil},
		{"select_row by key", table, "select_row", map[string]any{"key": "c"}, SelectRow{"t", "c", 2}, "", nil},
		{"select_row out of range", table, "select_row", map[string]any{"row": 3}, nil, "", ErrInvalidArgs},
		{"select_row unknown key", table, "select_row", map[string]any{"key": "z"}, nil, "", ErrInvalidArgs},
		{"select_row nothing", table, "select_row", nil, nil, "", ErrInvalidArgs},
		{"sort", table, "sort", map[string]any{"column": "name", "direction": "desc"}, Sort{"t", "name", "desc"}, "", nil},
		{"sort default asc", table, "sort", map[string]any{"column": "name"}, Sort{"t", "name", "asc"}, "", nil},
		{"sort unsortable", table, "sort", map[string]any{"column": "n"}, nil, "", ErrInvalidArgs},
		{"sort unknown column", table, "sort", map[string]any{"column": "zz"}, nil, "", ErrInvalidArgs},
		{"sort bad direction", table, "sort", map[string]any{"column": "name", "direction": "up"}, nil, "", ErrInvalidArgs},
		{"get_rows page", table, "get_rows", map[string]any{"offset": 1, "limit": 1}, nil,
			`{"columns":[{"key":"name","sortable":true,"title":"Name"},{"key":"n","sortable":false,"title":"N"}],"disabled":false,"offset":1,"rows":[{"cells":{"n":"2","name":"B"},"key":"b"}],"selected":"","sort":{"column":"","direction":""},"total":3}`, nil},
		{"get_rows bad limit", table, "get_rows", map[string]any{"limit": 0}, nil, "", ErrInvalidArgs},
		{"expand", tree, "expand", map[string]any{"node": "root"}, Expand{"tr", "root"}, "", nil},
		{"expand leaf", tree, "expand", map[string]any{"node": "leaf"}, nil, "", ErrInvalidArgs},
		{"expand unknown", tree, "expand", map[string]any{"node": "nope"}, nil, "", ErrInvalidArgs},
		{"collapse", tree, "collapse", map[string]any{"node": "root"}, Collapse{"tr", "root"}, "", nil},
		{"select_node", tree, "select_node", map[string]any{"node": "leaf"}, SelectNode{"tr", "leaf"}, "", nil},
		{"select_node missing", tree, "select_node", nil, nil, "", ErrInvalidArgs},
		{"scroll_to", Viewport{ID: "v", Height: 5, Total: 20}, "scroll_to", map[string]any{"offset": 15}, ScrollTo{"v", 15}, "", nil},
		{"scroll_to past end", Viewport{ID: "v", Height: 5, Total: 20}, "scroll_to", map[string]any{"offset": 16}, nil, "", ErrInvalidArgs},
		{"scroll_to negative", Viewport{ID: "v", Height: 5, Total: 20}, "scroll_to", map[string]any{"offset": -1}, nil, "", ErrInvalidArgs},
		{"get_visible_range", Viewport{ID: "v", Offset: 2, Height: 5, Total: 6}, "get_visible_range", nil, nil, `{"disabled":false,"end":6,"start":2,"total":6}`, nil},
		{"seek", Scrubber{ID: "s", Duration: 10}, "seek", map[string]any{"position": 2.5}, Seek{"s", 2.5}, "", nil},
		{"seek past end", Scrubber{ID: "s", Duration: 10}, "seek", map[string]any{"position": 11}, nil, "", ErrInvalidArgs},
		{"seek string", Scrubber{ID: "s", Duration: 10}, "seek", map[string]any{"position": "1"}, nil, "", ErrInvalidArgs},
		{"play", Scrubber{ID: "s"}, "play", nil, Play{"s"}, "", nil},
		{"pause", Scrubber{ID: "s"}, "pause", nil, Pause{"s"}, "", nil},
		{"get_position", Scrubber{ID: "s", Position: 1, Duration: 2, Playing: true}, "get_position", nil, nil, `{"disabled":false,"duration":2,"playing":true,"position":1}`, nil},
		{"get_data", Chart{ID: "c", Title: "T", Series: []Series{{Name: "a", Points: []float64{1, 3}}}}, "get_data", nil, nil, `{"series":[{"name":"a","points":[1,3]}],"title":"T"}`, nil},
		{"get_range", Chart{ID: "c", Series: []Series{{Points: []float64{4, -1, 2}}}}, "get_range", nil, nil, `{"count":3,"max":4,"min":-1,"title":""}`, nil},
		{"get_range empty", Chart{ID: "c"}, "get_range", nil, nil, `{"count":0,"max":null,"min":null,"title":""}`, nil},
		{"unknown action", Checkbox{ID: "c"}, "explode", nil, nil, "", ErrWidget},
	}
	for _, tt := range tests {
		out, err := tt.node.Perform(tt.action, tt.args)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: error %v, want %v", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(out.Msg, tt.msg) {
			t.Errorf("%s: msg %#v, want %#v", tt.name, out.Msg, tt.msg)
		}
		if tt.value != "" {
			b, _ := json.Marshal(out.Value)
			if string(b) != tt.value {
				t.Errorf("%s: value %s, want %s", tt.name, b, tt.value)
			}
		}
	}
}

func TestDescribeHidesMaskedValues(t *testing.T) {
	for _, d := range []Describer{TextInput{ID: "t", Value: "secret", Mask: '*'}, PasswordField{ID: "p", Value: "secret"}} {
		b, _ := json.Marshal(d.Describe())
		if strings.Contains(string(b), "secret") || strings.Contains(string(b), `"value"`) {
			t.Errorf("%T describes its value: %s", d, b)
		}
	}
}
