package apps

import (
	"crypto/subtle"
	"fmt"

	"github.com/mcpswarm/mcpswarm/session"
)

// Login is a login form. The demo account is user "demo", password
// "hunter2"; three failed attempts lock the form.
type Login struct{}

// LoginModel is Login's state. Password is part of the model (and of
// snapshots), never of a widget description or projection.
type LoginModel struct {
	Username string `json:"username"`
	Password string `json:"password"`
	User     string `json:"user,omitempty"`
	Failures int    `json:"failures"`
	Status   string `json:"status"`
}

// LoginMsg is a button message of Login: "submit" or "logout".
type LoginMsg string

const (
	demoUser     = "demo"
	demoPassword = "hunter2"
	maxFailures  = 3
)

// Init implements session.App.
func (Login) Init() (session.Model, error) {
	return LoginModel{Status: "Please sign in."}, nil
}

// Update implements session.App.
func (Login) Update(m session.Model, msg session.Msg) (session.Model, error) {
	l, err := modelAs[LoginModel](m)
	if err != nil {
		return nil, err
	}
	switch msg := msg.(type) {
	case session.TypeInto:
		l.setField(msg.Widget, msg.Text)
	case session.Clear:
		l.setField(msg.Widget, "")
	case LoginMsg:
		switch msg {
		case "submit":
			l.submit()
		case "logout":
			l = LoginModel{Status: "Signed out."}
		default:
			return nil, fmt.Errorf("unknown login message %q", string(msg))
		}
	case session.KeyPress:
		if msg.Key.Key == "enter" && l.User == "" && l.Failures < maxFailures {
			l.submit()
		}
	default:
		return nil, fmt.Errorf("login does not handle %T", msg)
	}
	return l, nil
}

func (l *LoginModel) setField(widget, v string) {
	switch widget {
	case "username":
		l.Username = v
	case "password":
		l.Password = v
	}
}

func (l *LoginModel) submit() {
	okUser := subtle.ConstantTimeCompare([]byte(l.Username), []byte(demoUser)) == 1
	okPass := subtle.ConstantTimeCompare([]byte(l.Password), []byte(demoPassword)) == 1
	l.Password = ""
	if okUser && okPass {
		l.User, l.Failures, l.Status = l.Username, 0, "Signed in as "+l.Username+"."
		return
	}
	l.Failures++
	if l.Failures >= maxFailures {
		l.Status = "Too many failed attempts; the form is locked."
		return
	}
	l.Status = fmt.Sprintf("Wrong username or password (%d of %d attempts).", l.Failures, maxFailures)
}

// View implements session.App.
func (Login) View(m session.Model) session.Node {
	l, _ := modelAs[LoginModel](m)
	status := session.StatusBar{ID: "status", Items: []string{l.Status}}
	if l.User != "" {
		return session.Box{Title: "Welcome", Items: []session.Node{
			session.Text{ID: "greeting", Text: "Hello, " + l.User + "!"},
			session.Button{ID: "logout", Label: "Sign out", OnClick: LoginMsg("logout")},
			status,
		}}
	}
	locked := l.Failures >= maxFailures
	return session.Box{Title: "Sign in", Items: []session.Node{
		session.TextInput{ID: "username", Label: "Username", Value: l.Username, Placeholder: "user name", Disabled: locked},
		session.PasswordField{ID: "password", Label: "Password", Value: l.Password, Disabled: locked},
		session.Button{ID: "submit", Label: "Sign in", OnClick: LoginMsg("submit"), Disabled: locked},
		status,
	}}
}

// Resources implements session.ResourceProvider.
func (Login) Resources() []session.Projection {
	return []session.Projection{{Key: "status", Description: "Who is signed in and the form's status line.", Project: func(m session.Model) any {
		l, _ := modelAs[LoginModel](m)
		return map[string]any{"user": l.User, "status": l.Status, "locked": l.Failures >= maxFailures}
	}}}
}
