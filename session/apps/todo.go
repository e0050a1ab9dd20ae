package apps

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mcpswarm/mcpswarm/session"
)

// Todo is a todo list with a filter (All, Active, Done). Item widgets are
// named by slot (item_0, delete_0, ...: the n-th visible item), so the tool
// set stays bounded however many items come and go.
type Todo struct {
	// MaxItems and MaxTitleBytes bound the list; zero means
	// DefaultTodoItems and DefaultTodoTitleBytes.
	MaxItems, MaxTitleBytes int
}

// TodoItem is one todo.
type TodoItem struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Done  bool   `json:"done"`
}

// TodoModel is Todo's state.
type TodoModel struct {
	Items  []TodoItem `json:"items"`
	Draft  string     `json:"draft"`
	Filter int        `json:"filter"`
	NextID int        `json:"next_id"`
}

// TodoAdd adds the draft as an item; TodoDelete deletes the item with ID.
type (
	TodoAdd    struct{}
	TodoDelete struct{ ID int }
)

func todoFilters() []string { return []string{"All", "Active", "Done"} }

// maxTodoSlots bounds how many items the view shows (and so the tool set).
const maxTodoSlots = 20

// Default bounds of a todo list's model (issue #13): every item is held in
// memory, saved and replicated, so a list is capped at DefaultTodoItems
// items of DefaultTodoTitleBytes each, about 50 KiB per session.
const (
	DefaultTodoItems      = 100
	DefaultTodoTitleBytes = 512
)

// bounds returns the todo's bounds with defaults for the zero ones.
func (a Todo) bounds() (items, titleBytes int) {
	items, titleBytes = a.MaxItems, a.MaxTitleBytes
	if items <= 0 {
		items = DefaultTodoItems
	}
	if titleBytes <= 0 {
		titleBytes = DefaultTodoTitleBytes
	}
	return items, titleBytes
}

// Init implements session.App.
func (Todo) Init() (session.Model, error) { return TodoModel{Items: []TodoItem{}, NextID: 1}, nil }

// Update implements session.App.
func (a Todo) Update(m session.Model, msg session.Msg) (session.Model, error) {
	maxItems, maxTitle := a.bounds()
	t, err := modelAs[TodoModel](m)
	if err != nil {
		return nil, err
	}
	t.Items = append([]TodoItem(nil), t.Items...)
	switch msg := msg.(type) {
	case session.TypeInto:
		t.Draft = msg.Text
	case session.Clear:
		t.Draft = ""
	case TodoAdd:
		title := strings.TrimSpace(t.Draft)
		if title == "" {
			return nil, fmt.Errorf("adding a todo: the title is empty")
		}
		if len(title) > maxTitle {
			return nil, fmt.Errorf("adding a todo: the title is %d bytes; a title holds at most %d (the node's todo-title-bytes setting)", len(title), maxTitle)
		}
		if len(t.Items) >= maxItems {
			return nil, fmt.Errorf("adding a todo: the list holds its maximum of %d items (the node's todo-max-items setting); delete one first", maxItems)
		}
		t.Items = append(t.Items, TodoItem{ID: t.NextID, Title: title})
		t.NextID++
		t.Draft = ""
	case TodoDelete:
		i := t.index(msg.ID)
		if i < 0 {
			return nil, fmt.Errorf("deleting todo %d: no such item", msg.ID)
		}
		t.Items = append(t.Items[:i], t.Items[i+1:]...)
	case session.Toggle:
		slot, err := slotOf(msg.Widget, "item_")
		if err != nil {
			return nil, err
		}
		vis := t.visible()
		if slot >= len(vis) {
			return nil, fmt.Errorf("toggling %s: no item in that slot", msg.Widget)
		}
		t.Items[t.index(vis[slot].ID)].Done = msg.Checked
	case session.SelectTab:
		t.Filter = msg.Index
	default:
		return nil, fmt.Errorf("todo does not handle %T", msg)
	}
	return t, nil
}

func slotOf(widget, prefix string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(widget, prefix))
	if err != nil || !strings.HasPrefix(widget, prefix) {
		return 0, fmt.Errorf("widget %q is not an item slot", widget)
	}
	return n, nil
}

func (t TodoModel) index(id int) int {
	for i, it := range t.Items {
		if it.ID == id {
			return i
		}
	}
	return -1
}

func (t TodoModel) visible() []TodoItem {
	var out []TodoItem
	for _, it := range t.Items {
		if t.Filter == 0 || (t.Filter == 1 && !it.Done) || (t.Filter == 2 && it.Done) {
			out = append(out, it)
		}
	}
	return out[:min(len(out), maxTodoSlots)]
}

// View implements session.App.
func (Todo) View(m session.Model) session.Node {
	t, _ := modelAs[TodoModel](m)
	items := []session.Node{
		session.Tabs{ID: "filter", Tabs: todoFilters(), Selected: t.Filter},
		session.Row{Items: []session.Node{
			session.TextInput{ID: "new", Label: "New", Value: t.Draft, Placeholder: "what needs doing?"},
			session.Button{ID: "add", Label: "Add", OnClick: TodoAdd{}, Disabled: strings.TrimSpace(t.Draft) == ""},
		}},
	}
	for i, it := range t.visible() {
		items = append(items, session.Row{Items: []session.Node{
			session.Checkbox{ID: "item_" + strconv.Itoa(i), Label: it.Title, Checked: it.Done},
			session.Button{ID: "delete_" + strconv.Itoa(i), Label: "Delete", OnClick: TodoDelete{ID: it.ID}},
		}})
	}
	left := 0
	for _, it := range t.Items {
		if !it.Done {
			left++
		}
	}
	items = append(items, session.StatusBar{ID: "summary", Items: []string{
		itemsLeft(left), "filter: " + todoFilters()[t.Filter%3]}})
	return session.Column{Items: items}
}

func itemsLeft(n int) string {
	if n == 1 {
		return "1 item left"
	}
	return fmt.Sprintf("%d items left", n)
}

// todoProjection is the "items" resource: the fields in the order
// encoding/json sorted the keys of the map it replaced, so the bytes are
// the same.
type todoProjection struct {
	Filter string     `json:"filter"`
	Items  []TodoItem `json:"items"`
}

// Resources implements session.ResourceProvider.
func (Todo) Resources() []session.Projection {
	return []session.Projection{{Key: "items", Description: "Every todo item.", Project: func(m session.Model) any {
		t, _ := modelAs[TodoModel](m)
		return todoProjection{Filter: todoFilters()[t.Filter%3], Items: t.Items}
	}}}
}
