package apps

import (
	"fmt"
	"strings"

	"github.com/mcpswarm/mcpswarm/session"
)

// Wizard is a three-step sign-up: pick a plan (select list), accept the
// terms (checkbox) and add notes (text area), then confirm in a modal.
type Wizard struct{}

// WizardModel is Wizard's state.
type WizardModel struct {
	Step       int    `json:"step"`
	Plan       int    `json:"plan"`
	Terms      bool   `json:"terms"`
	Notes      string `json:"notes"`
	Confirming bool   `json:"confirming"`
	Done       bool   `json:"done"`
}

// WizardMsg is a button message of Wizard: "back", "next", "finish" or
// "restart".
type WizardMsg string

func wizardSteps() []string { return []string{"Plan", "Terms", "Review"} }
func wizardPlans() []string { return []string{"Free", "Team", "Enterprise"} }

// Init implements session.App.
func (Wizard) Init() (session.Model, error) { return WizardModel{Plan: -1}, nil }

// Update implements session.App.
func (Wizard) Update(m session.Model, msg session.Msg) (session.Model, error) {
	w, err := modelAs[WizardModel](m)
	if err != nil {
		return nil, err
	}
	switch msg := msg.(type) {
	case session.SelectTab:
		if msg.Index > w.reachable() {
			return nil, fmt.Errorf("step %q is not reachable yet", msg.Tab)
		}
		w.Step = msg.Index
	case session.Select:
		w.Plan = msg.Index
	case session.Toggle:
		w.Terms = msg.Checked
	case session.TypeInto:
		w.Notes = msg.Text
	case session.Clear:
		w.Notes = ""
	case session.Confirm:
		w.Confirming, w.Done = false, true
	case session.Dismiss:
		w.Confirming = false
	case WizardMsg:
		switch msg {
		case "back":
			w.Step = max(w.Step-1, 0)
		case "next":
			if w.Step+1 > w.reachable() {
				return nil, fmt.Errorf("complete step %q first", wizardSteps()[w.Step])
			}
			w.Step++
		case "finish":
			w.Confirming = true
		case "restart":
			w = WizardModel{Plan: -1}
		default:
			return nil, fmt.Errorf("unknown wizard message %q", string(msg))
		}
	default:
		return nil, fmt.Errorf("wizard does not handle %T", msg)
	}
	return w, nil
}

// reachable is the furthest step the answers so far allow.
func (w WizardModel) reachable() int {
	switch {
	case w.Plan < 0:
		return 0
	case !w.Terms:
		return 1
	}
	return 2
}

// View implements session.App.
func (Wizard) View(m session.Model) session.Node {
	w, _ := modelAs[WizardModel](m)
	if w.Done {
		return session.Box{Title: "Signed up", Items: []session.Node{
			session.Text{ID: "summary", Text: "Welcome aboard on the " + wizardPlans()[w.Plan] + " plan."},
			session.Button{ID: "restart", Label: "Start over", OnClick: WizardMsg("restart")},
		}}
	}
	steps := wizardSteps()
	var body []session.Node
	switch w.Step {
	case 0:
		body = []session.Node{session.SelectList{ID: "plan", Label: "Plan", Options: wizardPlans(), Selected: w.Plan}}
	case 1:
		body = []session.Node{
			session.Checkbox{ID: "terms", Label: "I accept the terms of service", Checked: w.Terms},
			session.TextArea{ID: "notes", Label: "Notes (optional)", Value: w.Notes, Rows: 3},
		}
	default:
		plan := "(none)"
		if w.Plan >= 0 {
			plan = wizardPlans()[w.Plan]
		}
		body = []session.Node{session.Text{ID: "review", Text: strings.Join([]string{
			"Plan: " + plan, fmt.Sprintf("Terms accepted: %t", w.Terms), "Notes: " + w.Notes}, "\n")}}
	}
	nav := []session.Node{session.Button{ID: "back", Label: "Back", OnClick: WizardMsg("back"), Disabled: w.Step == 0}}
	if w.Step < len(steps)-1 {
		nav = append(nav, session.Button{ID: "next", Label: "Next", OnClick: WizardMsg("next"), Disabled: w.Step+1 > w.reachable()})
	} else {
		nav = append(nav, session.Button{ID: "finish", Label: "Finish", OnClick: WizardMsg("finish")})
	}
	items := []session.Node{
		session.Tabs{ID: "steps", Tabs: steps, Selected: w.Step},
		session.Progress{ID: "progress", Label: "Step", Value: float64(w.Step + 1), Max: float64(len(steps))},
		session.Box{Title: steps[w.Step], Items: body},
		session.Row{Items: nav},
	}
	if w.Confirming {
		items = append(items, session.Modal{ID: "confirm", Title: "Confirm sign-up", Body: "Sign up on the " + wizardPlans()[w.Plan] + " plan?"})
	}
	return session.Column{Items: items}
}

// Resources implements session.ResourceProvider.
func (Wizard) Resources() []session.Projection {
	return []session.Projection{{Key: "answers", Description: "The answers given so far.", Project: func(m session.Model) any {
		w, _ := modelAs[WizardModel](m)
		return w
	}}}
}
