// Command mcpswarm runs an mcpswarm node and speaks to one as an operator.
//
// Build it with `make build` (it lands in bin/mcpswarm; never install it as
// `node`, which would shadow Node.js).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// command is one subcommand of the mcpswarm binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env environment) int
}

// environment is what a subcommand may touch of the process.
type environment struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

func commands() []command {
	return append([]command{
		{"serve", "run a node", runServe},
		{"keygen", "print a new cluster key (base64 of 32 random bytes)", runKeygen},
		{"version", "print the version", runVersion},
	}, adminCommands()...)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	env := environment{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], env)
		}
	}
	fmt.Fprintf(stderr, "mcpswarm: unknown command %q (see `mcpswarm help`)\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "mcpswarm serves the Model Context Protocol from a cluster of nodes.")
	fmt.Fprintln(w, "\nUsage: mcpswarm <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `mcpswarm <command> --help` for a command's flags.")
}
