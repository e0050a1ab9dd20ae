package session

// Button is a clickable widget; click delivers OnClick to Update.
type Button struct {
	ID       string
	Label    string
	OnClick  Msg
	Disabled bool
	Exclude  bool
	// StartsCommand declares that the update of OnClick starts a command
	// (WithCommand): the click's tool is offered as a task-capable one.
	StartsCommand bool
}

// Kind implements Node.
func (b Button) Kind() string { return "button" }

// WidgetID implements Node.
func (b Button) WidgetID() string { return b.ID }

// Excluded implements Excluder.
func (b Button) Excluded() bool { return b.Exclude }

// Actions implements ToolProvider.
func (b Button) Actions() []Action {
	if b.Disabled {
		return nil
	}
	if b.StartsCommand {
		return []Action{{Name: "click", Description: "Click a button that starts work which may take a while; the call answers when the work has finished.", Schema: noArgs(), Write: true, StartsCommand: true}}
	}
	return []Action{{Name: "click", Description: "Click a button.", Schema: noArgs(), Write: true}}
}

// Perform implements ToolProvider.
func (b Button) Perform(action string, _ map[string]any) (Outcome, error) {
	if action != "click" {
		return Outcome{}, unknownAction(b.Kind(), action)
	}
	if b.OnClick == nil {
		return Outcome{}, &WidgetError{Widget: b.ID, Problem: "is a button without an on-click message"}
	}
	return Outcome{Msg: b.OnClick}, nil
}

// Describe implements Describer.
func (b Button) Describe() map[string]any {
	if b.StartsCommand {
		return map[string]any{"label": b.Label, "disabled": b.Disabled, "starts_command": true}
	}
	return map[string]any{"label": b.Label, "disabled": b.Disabled}
}

// TextInput is a single-line text field. With Mask set it behaves like a
// password field: it offers no get_value and never reports its value.
type TextInput struct {
	ID          string
	Label       string
	Value       string
	Placeholder string
	Mask        rune
	Disabled    bool
	Exclude     bool
}

// Kind implements Node.
func (t TextInput) Kind() string { return "text_input" }

// WidgetID implements Node.
func (t TextInput) WidgetID() string { return t.ID }

// Excluded implements Excluder.
func (t TextInput) Excluded() bool { return t.Exclude }

// Actions implements ToolProvider.
func (t TextInput) Actions() []Action {
	if t.Disabled {
		return nil
	}
	acts := textWriteActions("text input")
	if t.Mask == 0 {
		acts = append(acts, Action{Name: "get_value", Description: "Read the current value of a text input.", Schema: noArgs()})
	}
	return acts
}

// Perform implements ToolProvider.
func (t TextInput) Perform(action string, args map[string]any) (Outcome, error) {
	if action == "get_value" && t.Mask == 0 {
		return Outcome{Value: map[string]any{"value": t.Value}}, nil
	}
	return performTextWrite(t.Kind(), t.ID, action, args)
}

// Describe implements Describer.
func (t TextInput) Describe() map[string]any {
	d := map[string]any{"label": t.Label, "placeholder": t.Placeholder, "disabled": t.Disabled, "masked": t.Mask != 0}
	if t.Mask == 0 {
		d["value"] = t.Value
	}
	return d
}

// PasswordField is a masked text field; its value is never reported.
type PasswordField struct {
	ID       string
	Label    string
	Value    string
	Mask     rune // defaults to '*'
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (p PasswordField) Kind() string { return "password_field" }

// WidgetID implements Node.
func (p PasswordField) WidgetID() string { return p.ID }

// Excluded implements Excluder.
func (p PasswordField) Excluded() bool { return p.Exclude }

// Actions implements ToolProvider.
func (p PasswordField) Actions() []Action {
	if p.Disabled {
		return nil
	}
	return textWriteActions("password field")
}

// Perform implements ToolProvider.
func (p PasswordField) Perform(action string, args map[string]any) (Outcome, error) {
	return performTextWrite(p.Kind(), p.ID, action, args)
}

// Describe implements Describer.
func (p PasswordField) Describe() map[string]any {
	return map[string]any{"label": p.Label, "disabled": p.Disabled, "masked": true}
}

// TextArea is a multi-line text field.
type TextArea struct {
	ID       string
	Label    string
	Value    string
	Rows     int
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (t TextArea) Kind() string { return "text_area" }

// WidgetID implements Node.
func (t TextArea) WidgetID() string { return t.ID }

// Excluded implements Excluder.
func (t TextArea) Excluded() bool { return t.Exclude }

// Actions implements ToolProvider.
func (t TextArea) Actions() []Action {
	if t.Disabled {
		return nil
	}
	return append(textWriteActions("text area"),
		Action{Name: "get_value", Description: "Read the current value of a text area.", Schema: noArgs()})
}

// Perform implements ToolProvider.
func (t TextArea) Perform(action string, args map[string]any) (Outcome, error) {
	if action == "get_value" {
		return Outcome{Value: map[string]any{"value": t.Value}}, nil
	}
	return performTextWrite(t.Kind(), t.ID, action, args)
}

// Describe implements Describer.
func (t TextArea) Describe() map[string]any {
	return map[string]any{"label": t.Label, "value": t.Value, "disabled": t.Disabled}
}

func textWriteActions(what string) []Action {
	return []Action{
		{Name: "type_into", Description: "Set the text of a " + what + " (replaces its value).",
			Schema: objectSchema([]string{"text"}, map[string]any{"text": prop("string", "The text to enter.")}), Write: true},
		{Name: "clear", Description: "Empty a " + what + ".", Schema: noArgs(), Write: true},
	}
}

func performTextWrite(kind, id, action string, args map[string]any) (Outcome, error) {
	switch action {
	case "type_into":
		s, err := requireString(args, "text")
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Msg: TypeInto{Widget: id, Text: s}}, nil
	case "clear":
		return Outcome{Msg: Clear{Widget: id}}, nil
	}
	return Outcome{}, unknownAction(kind, action)
}

// Checkbox is a two-state toggle.
type Checkbox struct {
	ID       string
	Label    string
	Checked  bool
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (c Checkbox) Kind() string { return "checkbox" }

// WidgetID implements Node.
func (c Checkbox) WidgetID() string { return c.ID }

// Excluded implements Excluder.
func (c Checkbox) Excluded() bool { return c.Exclude }

// Actions implements ToolProvider.
func (c Checkbox) Actions() []Action {
	if c.Disabled {
		return nil
	}
	return []Action{
		{Name: "toggle", Description: "Flip a checkbox.", Schema: noArgs(), Write: true},
		{Name: "get_checked", Description: "Read whether a checkbox is checked.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (c Checkbox) Perform(action string, _ map[string]any) (Outcome, error) {
	switch action {
	case "toggle":
		return Outcome{Msg: Toggle{Widget: c.ID, Checked: !c.Checked}}, nil
	case "get_checked":
		return Outcome{Value: map[string]any{"checked": c.Checked}}, nil
	}
	return Outcome{}, unknownAction(c.Kind(), action)
}

// Describe implements Describer.
func (c Checkbox) Describe() map[string]any {
	return map[string]any{"label": c.Label, "checked": c.Checked, "disabled": c.Disabled}
}
