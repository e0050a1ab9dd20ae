package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// promptDef is a prompt offered for one demo app (or any app when app is "").
type promptDef struct {
	name, app, description, text string
}

// demoPrompts hold at least one useful prompt per demo app. A prompt is
// listed only when its app is startable on this node.
var demoPrompts = []promptDef{
	{name: "drive_app", description: "Start any app and explore it through its derived tools.",
		text: "Call swarm_apps, then swarm_start with app %[1]q and id %[2]q. Call swarm_screenshot {\"id\":%[2]q} to see the view and %[2]s.discover_tools to find its actions; act with the %[2]s.<widget>.<action> tools and check the result with swarm_screenshot."},
	{name: "login", app: "login", description: "Log in to the login demo app.",
		text: "Start the login app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}. Type the user name demo into %[2]s.username.type_into and the password hunter2 into %[2]s.password.type_into, click %[2]s.submit.click, then read swarm://session/%[2]s/widgets and report the status widget's text."},
	{name: "counter", app: "counter", description: "Increment the counter demo app and read its value.",
		text: "Start the counter app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}, click %[2]s.inc.click three times, and report the count shown by the count widget (swarm_screenshot)."},
	{name: "todo", app: "todo", description: "Add an item to the todo demo app.",
		text: "Start the todo app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}, type a new item with %[2]s.new.type_into, add it with %[2]s.add.click, then report the summary status bar."},
	{name: "table", app: "table", description: "Sort the elements table demo app and read its rows.",
		text: "Start the table app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}, sort %[2]s.elements.sort by a column, then read the sorted rows with %[2]s.elements.get_rows."},
	{name: "files", app: "files", description: "Browse the files demo app's tree and open a file.",
		text: "Start the files app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}, expand a folder with %[2]s.tree.expand, select a file with %[2]s.tree.select_node, and read it in the viewer (swarm_screenshot)."},
	{name: "player", app: "player", description: "Play, seek and pause the player demo app.",
		text: "Start the player app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}, press %[2]s.scrubber.play, seek with %[2]s.scrubber.seek, pause, and report %[2]s.scrubber.get_position."},
	{name: "wizard", app: "wizard", description: "Complete the sign-up wizard demo app.",
		text: "Start the wizard app with swarm_start {\"app\":%[1]q,\"id\":%[2]q}, choose a plan with %[2]s.plan.select, go through the steps (use %[2]s.discover_tools to find the buttons), accept the terms, confirm, and report the summary."},
}

func (s *Server) addPrompts() {
	apps := map[string]bool{}
	for _, a := range s.cfg.Backend.Apps() {
		apps[a.Name] = true
	}
	for _, p := range demoPrompts {
		if p.app != "" && !apps[p.app] {
			continue
		}
		opts := []mcp.PromptOption{mcp.WithPromptDescription(p.description),
			mcp.WithArgument("id", mcp.ArgumentDescription("session id to use (1-7 lowercase letters/digits); completes to your sessions"))}
		if p.app == "" {
			opts = append(opts, mcp.WithArgument("app", mcp.RequiredArgument(), mcp.ArgumentDescription("app to start; completes to startable apps")))
		}
		s.ext.AddPrompt(mcp.NewPrompt(p.name, opts...), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			app := p.app
			if app == "" {
				app = req.Params.Arguments["app"]
				if !apps[app] {
					return nil, fmt.Errorf("prompt %s: unknown app %q; call swarm_apps", p.name, app)
				}
			}
			id := req.Params.Arguments["id"]
			if id == "" {
				id = strings.ToLower(app)
				if len(id) > 7 {
					id = id[:7]
				}
			}
			if !startIDPattern.MatchString(id) {
				return nil, fmt.Errorf("prompt %s: invalid session id %q", p.name, id)
			}
			return mcp.NewGetPromptResult(p.description, []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(fmt.Sprintf(p.text, app, id))),
			}), nil
		})
	}
}

// completer completes session ids and app names in prompt and resource
// template arguments. MCP has no completion for tool arguments
// (completion/complete accepts ref/prompt and ref/resource only).
type completer struct{ s *Server }

func (c completer) values(ctx context.Context, arg mcp.CompleteArgument, onlySession string) *mcp.Completion {
	var all []string
	switch arg.Name {
	case "id", "session":
		ac := c.s.authzContext(ctx)
		for _, i := range c.s.cfg.Backend.Sessions(ac.Principal) {
			all = append(all, i.ID)
		}
	case "app":
		for _, a := range c.s.cfg.Backend.Apps() {
			all = append(all, a.Name)
		}
	case "key":
		ac := c.s.authzContext(ctx)
		for _, i := range c.s.cfg.Backend.Sessions(ac.Principal) {
			if onlySession != "" && i.ID != onlySession {
				continue
			}
			for _, n := range c.s.resourceNames(i.ID) {
				if k, ok := strings.CutPrefix(n, "model/"); ok {
					all = append(all, k)
				}
			}
		}
	}
	var out []string
	for _, v := range all {
		if strings.HasPrefix(v, arg.Value) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	total := len(out)
	if len(out) > 100 {
		out = out[:100]
	}
	return &mcp.Completion{Values: out, Total: total, HasMore: total > len(out)}
}

func ownPrompt(name string) bool {
	for _, p := range demoPrompts {
		if p.name == name {
			return true
		}
	}
	return false
}

// CompletePromptArgument completes a prompt argument.
func (c completer) CompletePromptArgument(ctx context.Context, prompt string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	if !ownPrompt(prompt) {
		if c.s.cfg.Completer != nil {
			return c.s.cfg.Completer.CompletePromptArgument(ctx, prompt, arg, cc)
		}
		return &mcp.Completion{Values: []string{}}, nil
	}
	return c.values(ctx, arg, ""), nil
}

// CompleteResourceArgument completes a resource template argument.
func (c completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	if !strings.HasPrefix(uri, "swarm://") {
		if c.s.cfg.Completer != nil {
			return c.s.cfg.Completer.CompleteResourceArgument(ctx, uri, arg, cc)
		}
		return &mcp.Completion{Values: []string{}}, nil
	}
	return c.values(ctx, arg, cc.Arguments["id"]), nil
}
