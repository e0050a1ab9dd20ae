package apps

import (
	"fmt"
	"strconv"

	"github.com/mcpswarm/mcpswarm/session"
)

// Counter is a counter with +, - and reset buttons. Keys "+"/"up" and
// "-"/"down" also step it.
type Counter struct{}

// CounterModel is Counter's state.
type CounterModel struct {
	Count int `json:"count"`
}

// CounterMsg is a button message of Counter: "inc", "dec" or "reset".
type CounterMsg string

// Init implements session.App.
func (Counter) Init() (session.Model, error) { return CounterModel{}, nil }

// Update implements session.App.
func (Counter) Update(m session.Model, msg session.Msg) (session.Model, error) {
	c, err := modelAs[CounterModel](m)
	if err != nil {
		return nil, err
	}
	switch msg := msg.(type) {
	case CounterMsg:
		switch msg {
		case "inc":
			c.Count++
		case "dec":
			c.Count--
		case "reset":
			c.Count = 0
		default:
			return nil, fmt.Errorf("unknown counter message %q", string(msg))
		}
	case session.KeyPress:
		switch msg.Key.Key {
		case "+", "up":
			c.Count++
		case "-", "down":
			c.Count--
		}
	default:
		return nil, fmt.Errorf("counter does not handle %T", msg)
	}
	return c, nil
}

// View implements session.App.
func (Counter) View(m session.Model) session.Node {
	c, _ := modelAs[CounterModel](m)
	return session.Column{Items: []session.Node{
		session.Text{ID: "count", Text: "Count: " + strconv.Itoa(c.Count)},
		session.Row{Items: []session.Node{
			session.Button{ID: "dec", Label: "-", OnClick: CounterMsg("dec")},
			session.Button{ID: "inc", Label: "+", OnClick: CounterMsg("inc")},
			session.Button{ID: "reset", Label: "Reset", OnClick: CounterMsg("reset"), Disabled: c.Count == 0},
		}},
	}}
}

// counterProjection is the "count" resource: a struct encodes as the map
// it replaced did ({"count":N}) without building a map and boxing the
// value on every render.
type counterProjection struct {
	Count int `json:"count"`
}

// Resources implements session.ResourceProvider.
func (Counter) Resources() []session.Projection {
	return []session.Projection{{Key: "count", Description: "The counter's value.", Project: func(m session.Model) any {
		c, _ := modelAs[CounterModel](m)
		return counterProjection(c)
	}}}
}
