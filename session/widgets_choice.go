package session

// SelectList offers a list of options, one of which may be selected.
// Selected is an index into Options, or -1 for none.
type SelectList struct {
	ID       string
	Label    string
	Options  []string
	Selected int
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (s SelectList) Kind() string { return "select_list" }

// WidgetID implements Node.
func (s SelectList) WidgetID() string { return s.ID }

// Excluded implements Excluder.
func (s SelectList) Excluded() bool { return s.Exclude }

// Actions implements ToolProvider.
func (s SelectList) Actions() []Action {
	if s.Disabled {
		return nil
	}
	return []Action{
		{Name: "select", Description: "Select an option of a select list, by its text or index.", Schema: choiceSchema("option", "The option's text."), Write: true},
		{Name: "get_selected", Description: "Read the selected option of a select list.", Schema: noArgs()},
		{Name: "get_options", Description: "Read the options of a select list.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (s SelectList) Perform(action string, args map[string]any) (Outcome, error) {
	switch action {
	case "select":
		i, err := pick(s.Options, args, "option")
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Msg: Select{Widget: s.ID, Value: s.Options[i], Index: i}}, nil
	case "get_selected":
		return Outcome{Value: selected(s.Options, s.Selected)}, nil
	case "get_options":
		return Outcome{Value: map[string]any{"options": nonNil(s.Options)}}, nil
	}
	return Outcome{}, unknownAction(s.Kind(), action)
}

// Describe implements Describer.
func (s SelectList) Describe() map[string]any {
	d := selected(s.Options, s.Selected)
	d["label"], d["options"], d["disabled"] = s.Label, nonNil(s.Options), s.Disabled
	return d
}

// Menu is a list of items to pick from.
type Menu struct {
	ID       string
	Items    []string
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (m Menu) Kind() string { return "menu" }

// WidgetID implements Node.
func (m Menu) WidgetID() string { return m.ID }

// Excluded implements Excluder.
func (m Menu) Excluded() bool { return m.Exclude }

// Actions implements ToolProvider.
func (m Menu) Actions() []Action {
	if m.Disabled {
		return nil
	}
	return []Action{
		{Name: "select", Description: "Pick an item of a menu, by its text or index.", Schema: choiceSchema("item", "The item's text."), Write: true},
		{Name: "get_items", Description: "Read the items of a menu.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (m Menu) Perform(action string, args map[string]any) (Outcome, error) {
	switch action {
	case "select":
		i, err := pick(m.Items, args, "item")
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Msg: Select{Widget: m.ID, Value: m.Items[i], Index: i}}, nil
	case "get_items":
		return Outcome{Value: map[string]any{"items": nonNil(m.Items)}}, nil
	}
	return Outcome{}, unknownAction(m.Kind(), action)
}

// Describe implements Describer.
func (m Menu) Describe() map[string]any {
	return map[string]any{"items": nonNil(m.Items), "disabled": m.Disabled}
}

// Tabs is a tab bar; Selected is an index into Tabs.
type Tabs struct {
	ID       string
	Tabs     []string
	Selected int
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (t Tabs) Kind() string { return "tabs" }

// WidgetID implements Node.
func (t Tabs) WidgetID() string { return t.ID }

// Excluded implements Excluder.
func (t Tabs) Excluded() bool { return t.Exclude }

// Actions implements ToolProvider.
func (t Tabs) Actions() []Action {
	if t.Disabled {
		return nil
	}
	return []Action{
		{Name: "select_tab", Description: "Select a tab, by its title or index.", Schema: choiceSchema("tab", "The tab's title."), Write: true},
		{Name: "get_tabs", Description: "Read the tabs and which one is selected.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (t Tabs) Perform(action string, args map[string]any) (Outcome, error) {
	switch action {
	case "select_tab":
		i, err := pick(t.Tabs, args, "tab")
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Msg: SelectTab{Widget: t.ID, Tab: t.Tabs[i], Index: i}}, nil
	case "get_tabs":
		d := selected(t.Tabs, t.Selected)
		d["tabs"] = nonNil(t.Tabs)
		return Outcome{Value: d}, nil
	}
	return Outcome{}, unknownAction(t.Kind(), action)
}

// Describe implements Describer.
func (t Tabs) Describe() map[string]any {
	d := selected(t.Tabs, t.Selected)
	d["tabs"], d["disabled"] = nonNil(t.Tabs), t.Disabled
	return d
}

// Modal is a dialog shown over the view while it is part of it.
type Modal struct {
	ID       string
	Title    string
	Body     string
	Content  []Node
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (m Modal) Kind() string { return "modal" }

// WidgetID implements Node.
func (m Modal) WidgetID() string { return m.ID }

// Excluded implements Excluder.
func (m Modal) Excluded() bool { return m.Exclude }

// Children implements Container.
func (m Modal) Children() []Node { return m.Content }

// Actions implements ToolProvider.
func (m Modal) Actions() []Action {
	if m.Disabled {
		return nil
	}
	return []Action{
		{Name: "confirm", Description: "Confirm a modal dialog.", Schema: noArgs(), Write: true},
		{Name: "dismiss", Description: "Dismiss a modal dialog.", Schema: noArgs(), Write: true},
	}
}

// Perform implements ToolProvider.
func (m Modal) Perform(action string, _ map[string]any) (Outcome, error) {
	switch action {
	case "confirm":
		return Outcome{Msg: Confirm{Widget: m.ID}}, nil
	case "dismiss":
		return Outcome{Msg: Dismiss{Widget: m.ID}}, nil
	}
	return Outcome{}, unknownAction(m.Kind(), action)
}

// Describe implements Describer.
func (m Modal) Describe() map[string]any {
	return map[string]any{"title": m.Title, "body": m.Body, "disabled": m.Disabled}
}

func choiceSchema(key, desc string) map[string]any {
	return objectSchema(nil, map[string]any{
		key:     prop("string", desc),
		"index": map[string]any{"type": "integer", "minimum": 0, "description": "The 0-based position."},
	})
}

func selected(labels []string, i int) map[string]any {
	if i < 0 || i >= len(labels) {
		return map[string]any{"selected": nil, "index": -1}
	}
	return map[string]any{"selected": labels[i], "index": i}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
