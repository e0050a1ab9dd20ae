package apps

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/mcpswarm/mcpswarm/session"
)

// Files browses an in-memory file tree: select and expand in the tree, open
// a file into a scrolling viewer, create and (after a confirmation) delete.
type Files struct {
	// MaxFiles bounds the tree; zero means DefaultMaxFiles.
	MaxFiles int
}

// FileEntry is one file of the tree; directories are implied by paths.
type FileEntry struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// FilesModel is Files' state.
type FilesModel struct {
	Files    []FileEntry `json:"files"`
	Expanded []string    `json:"expanded"`
	Selected string      `json:"selected"`
	Open     string      `json:"open"`
	Offset   int         `json:"offset"`
	Confirm  bool        `json:"confirm"`
	Created  int         `json:"created"`
}

const viewerHeight = 8

func initialFiles() []FileEntry {
	var guide strings.Builder
	for i := 1; i <= 24; i++ {
		fmt.Fprintf(&guide, "Step %d of the guide.\n", i)
	}
	return []FileEntry{
		{Path: "README.md", Content: "# mcpswarm demo\nA tree of files kept in memory."},
		{Path: "docs/guide.md", Content: strings.TrimSuffix(guide.String(), "\n")},
		{Path: "docs/api/sessions.md", Content: "Sessions are actors.\nEach runs one update at a time."},
		{Path: "src/main.go", Content: "package main\n\nfunc main() {}"},
		{Path: "src/util/strings.go", Content: "package util"},
	}
}

// Init implements session.App.
func (Files) Init() (session.Model, error) {
	return FilesModel{Files: initialFiles(), Expanded: []string{}}, nil
}

// Update implements session.App.
func (a Files) Update(m session.Model, msg session.Msg) (session.Model, error) {
	f, err := modelAs[FilesModel](m)
	if err != nil {
		return nil, err
	}
	f.Files, f.Expanded = slices.Clone(f.Files), slices.Clone(f.Expanded)
	switch msg := msg.(type) {
	case session.Expand:
		if !slices.Contains(f.Expanded, msg.Node) {
			f.Expanded = append(f.Expanded, msg.Node)
		}
	case session.Collapse:
		f.Expanded = slices.DeleteFunc(f.Expanded, func(p string) bool { return p == msg.Node })
	case session.SelectNode:
		f.Selected = msg.Node
	case session.Select:
		return f.menu(msg.Value, a.maxFiles())
	case session.ScrollTo:
		f.Offset = msg.Offset
	case session.Confirm:
		f.remove(f.Selected)
		f.Selected, f.Confirm = "", false
	case session.Dismiss:
		f.Confirm = false
	default:
		return nil, fmt.Errorf("files does not handle %T", msg)
	}
	return f, nil
}

// DefaultMaxFiles bounds the files of a Files session by default: "New
// file" adds one per click, and each is held in the model, saved and
// replicated (issue #13).
const DefaultMaxFiles = 200

func (a Files) maxFiles() int {
	if a.MaxFiles <= 0 {
		return DefaultMaxFiles
	}
	return a.MaxFiles
}

func (f FilesModel) menu(item string, maxFiles int) (FilesModel, error) {
	switch item {
	case "Open":
		if f.file(f.Selected) < 0 {
			return f, fmt.Errorf("opening: select a file first")
		}
		f.Open, f.Offset = f.Selected, 0
	case "New file":
		dir := f.Selected
		if f.file(dir) >= 0 {
			dir = path.Dir(dir)
		}
		if dir == "." {
			dir = ""
		}
		if len(f.Files) >= maxFiles {
			return f, fmt.Errorf("new file: the tree holds its maximum of %d files (the node's files-max setting); delete one first", maxFiles)
		}
		f.Created++
		p := path.Join(dir, fmt.Sprintf("untitled-%d.txt", f.Created))
		f.Files = append(f.Files, FileEntry{Path: p})
		f.Selected = p
	case "Delete":
		if f.Selected == "" {
			return f, fmt.Errorf("deleting: select a file or directory first")
		}
		f.Confirm = true
	default:
		return f, fmt.Errorf("unknown menu item %q", item)
	}
	return f, nil
}

func (f FilesModel) file(p string) int {
	return slices.IndexFunc(f.Files, func(e FileEntry) bool { return e.Path == p })
}

func (f *FilesModel) remove(p string) {
	f.Files = slices.DeleteFunc(f.Files, func(e FileEntry) bool { return e.Path == p || strings.HasPrefix(e.Path, p+"/") })
	if f.Open == p || strings.HasPrefix(f.Open, p+"/") {
		f.Open, f.Offset = "", 0
	}
}

// tree builds tree items from the file paths, directories first.
func (f FilesModel) tree() []session.TreeItem {
	type dir struct {
		dirs  map[string]*dir
		files []string
	}
	root := &dir{dirs: map[string]*dir{}}
	for _, e := range f.Files {
		parts := strings.Split(e.Path, "/")
		d := root
		for _, p := range parts[:len(parts)-1] {
			if d.dirs[p] == nil {
				d.dirs[p] = &dir{dirs: map[string]*dir{}}
			}
			d = d.dirs[p]
		}
		d.files = append(d.files, parts[len(parts)-1])
	}
	var build func(prefix string, d *dir) []session.TreeItem
	build = func(prefix string, d *dir) []session.TreeItem {
		var out []session.TreeItem
		names := make([]string, 0, len(d.dirs))
		for n := range d.dirs {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			p := path.Join(prefix, n)
			out = append(out, session.TreeItem{ID: p, Label: n + "/", Expanded: slices.Contains(f.Expanded, p), Children: build(p, d.dirs[n])})
		}
		files := slices.Sorted(slices.Values(d.files))
		for _, n := range files {
			out = append(out, session.TreeItem{ID: path.Join(prefix, n), Label: n})
		}
		return out
	}
	return build("", root)
}

// View implements session.App.
func (Files) View(m session.Model) session.Node {
	f, _ := modelAs[FilesModel](m)
	content := ""
	if i := f.file(f.Open); i >= 0 {
		content = f.Files[i].Content
	}
	lines := len(strings.Split(content, "\n"))
	title := "(no file open)"
	if f.Open != "" {
		title = f.Open
	}
	view := session.Column{Items: []session.Node{
		session.Menu{ID: "actions", Items: []string{"Open", "New file", "Delete"}},
		session.Row{Items: []session.Node{
			session.Box{Title: "Files", Items: []session.Node{session.Tree{ID: "tree", Items: f.tree(), Selected: f.Selected}}},
			session.Box{Title: title, Items: []session.Node{session.Viewport{ID: "viewer", Offset: f.Offset, Height: viewerHeight, Total: lines,
				Content: []session.Node{session.Text{ID: "content", Text: content}}}}},
		}},
	}}
	if f.Confirm {
		view.Items = append(view.Items, session.Modal{ID: "confirm_delete", Title: "Delete",
			Body: "Delete " + f.Selected + "?"})
	}
	return view
}

// Resources implements session.ResourceProvider.
func (Files) Resources() []session.Projection {
	return []session.Projection{{Key: "files", Description: "The paths in the tree and the open file.", Project: func(m session.Model) any {
		f, _ := modelAs[FilesModel](m)
		paths := make([]string, len(f.Files))
		for i, e := range f.Files {
			paths[i] = e.Path
		}
		return map[string]any{"paths": paths, "open": f.Open, "selected": f.Selected}
	}}}
}
