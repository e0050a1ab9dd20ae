package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// settings resolves every flag of a FlagSet with the precedence
// flag > MCPSWARM_<FLAG> environment variable > YAML config file > default.
type settings struct {
	fs     *flag.FlagSet
	getenv func(string) string
}

// envName maps a flag name to its environment variable: --data-dir reads
// MCPSWARM_DATA_DIR.
func envName(flagName string) string {
	return "MCPSWARM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// resolve fills flags not given on the command line from the environment and
// then from the config file named by --config (or MCPSWARM_CONFIG).
func (s settings) resolve() error {
	given := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	fromEnv := map[string]bool{}
	var firstErr error
	s.fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || firstErr != nil {
			return
		}
		v := s.getenv(envName(f.Name))
		if v == "" {
			return
		}
		if err := s.fs.Set(f.Name, v); err != nil {
			firstErr = fmt.Errorf("--%s: from %s: %w", f.Name, envName(f.Name), err)
			return
		}
		fromEnv[f.Name] = true
	})
	if firstErr != nil {
		return firstErr
	}

	cfgFlag := s.fs.Lookup("config")
	if cfgFlag == nil || cfgFlag.Value.String() == "" {
		return nil
	}
	path := cfgFlag.Value.String()
	values, err := readConfigFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		f := s.fs.Lookup(name)
		if f == nil || name == "config" {
			return fmt.Errorf("--config: %s: unknown setting %q (settings are the flag names of `mcpswarm serve --help`)", path, name)
		}
		if given[name] || fromEnv[name] {
			continue
		}
		if err := s.fs.Set(name, values[name]); err != nil {
			return fmt.Errorf("--%s: from %s: %w", name, path, err)
		}
	}
	return nil
}

// readConfigFile reads a flat YAML mapping of flag names to values. Lists
// become comma-separated values (join, startable).
func readConfigFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, err := scalarText(v)
		if err != nil {
			return nil, fmt.Errorf("%s: setting %q: %w", path, k, err)
		}
		out[k] = s
	}
	return out, nil
}

func scalarText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, err := scalarText(e)
			if err != nil {
				return "", err
			}
			if strings.Contains(s, ",") {
				return "", errors.New("list items must not contain commas")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("unsupported value of type %T", v)
	}
}

// listValue is a comma-separated list flag.
type listValue struct{ items *[]string }

func (l listValue) String() string {
	if l.items == nil {
		return ""
	}
	return strings.Join(*l.items, ",")
}

func (l listValue) Set(s string) error {
	*l.items = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.items = append(*l.items, p)
		}
	}
	return nil
}
