package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/mcpswarm/mcpswarm"
)

func runKeygen(_ context.Context, args []string, env environment) int {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: mcpswarm keygen > cluster.key\n\nPrints a new cluster key for --cluster-key-file.")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	key, err := mcpswarm.GenerateClusterKey()
	if err != nil {
		fmt.Fprintf(env.stderr, "mcpswarm keygen: %v\n", err)
		return 1
	}
	fmt.Fprint(env.stdout, key)
	return 0
}

func runVersion(_ context.Context, _ []string, env environment) int {
	fmt.Fprintf(env.stdout, "mcpswarm %s\n", mcpswarm.Version())
	return 0
}
