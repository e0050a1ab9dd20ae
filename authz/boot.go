package authz

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// BootConfig is what CheckBoot needs to know about a node about to start.
type BootConfig struct {
	// Guard is the node's guard; nil when an embedder passed none.
	Guard *Guard
	// NetworkTransports is true when SSE or Streamable HTTP is served.
	NetworkTransports bool
	// Dev is true under --dev (the built-in allow-all development policy).
	Dev bool
	// ListenAddrs are the host:port addresses the network transports bind.
	ListenAddrs []string
	// SensitiveStaticTools are the static tools annotated destructiveHint or
	// sensitive.
	SensitiveStaticTools []string
}

// CheckBoot applies the boot gates and returns the first refusal as a
// one-line error naming the missing setting, or nil:
//
//   - --dev binds only loopback addresses and runs only DevGuard;
//   - a network transport needs a guard whose tool and read policies were
//     both configured by an operator or embedder (a framework default never
//     counts; an explicit empty rule list does);
//   - a static tool annotated destructiveHint or sensitive needs an
//     authorizer to exist at all.
//
// stdio alone is exempt from the network gate.
func CheckBoot(c BootConfig) error {
	if c.Dev {
		for _, addr := range c.ListenAddrs {
			loop, err := IsLoopback(addr)
			if err != nil {
				return fmt.Errorf("--dev: cannot tell whether address %q is loopback: %w", addr, err)
			}
			if !loop {
				return fmt.Errorf("--dev: refuses non-loopback address %s", addr)
			}
		}
	}
	g := c.Guard
	if c.Dev && g != nil && g.Name != DevGuardName {
		return fmt.Errorf("--dev: conflicts with policy %q; --dev runs the built-in development policy, so give one or the other", g.Name)
	}
	if g != nil && (g.Tools == nil || g.Reads == nil) {
		missing := "tool"
		if g.Tools != nil {
			missing = "read"
		} else if g.Reads == nil {
			missing = "tool and read"
		}
		return fmt.Errorf("--policy: guard %q has no %s authorizer", g.Name, missing)
	}
	if c.NetworkTransports {
		switch {
		case g == nil:
			return fmt.Errorf("--policy: a network transport needs an operator-configured tool and read policy (no authorizer was given)")
		case g.ToolsSource != SourceConfigured && g.ReadsSource != SourceConfigured:
			if g.Name != DefaultGuardName {
				return fmt.Errorf("--policy: a network transport needs an operator-configured tool and read policy (policy %q has neither a tools: nor a reads: section)", g.Name)
			}
			return fmt.Errorf("--policy: a network transport needs an operator-configured tool and read policy (got the framework default)")
		case g.ToolsSource != SourceConfigured:
			return fmt.Errorf("--policy: a network transport needs an operator-configured tool policy (policy %q has no tools: section)", g.Name)
		case g.ReadsSource != SourceConfigured:
			return fmt.Errorf("--policy: a network transport needs an operator-configured read policy (policy %q has no reads: section)", g.Name)
		}
	}
	if g == nil && len(c.SensitiveStaticTools) > 0 {
		if len(c.SensitiveStaticTools) == 1 {
			return fmt.Errorf("--policy: sensitive tool %q needs an authorizer and none was given", c.SensitiveStaticTools[0])
		}
		return fmt.Errorf("--policy: sensitive tools %s need an authorizer and none was given", strings.Join(quoteAll(c.SensitiveStaticTools), ", "))
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// IsLoopback reports whether addr — host:port or a bare host, an IPv6
// address optionally in brackets — names only the loopback interface:
// "localhost" or a loopback IP (v4-mapped included). An empty or unspecified
// host binds every interface and is not loopback. A host name other than
// localhost is an error: its addresses cannot be known without a lookup.
// It is the one loopback rule of the node: the --dev gate, the DNS-rebinding
// check and the choice of local cluster timers all use it.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	if host == "" {
		return false, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, fmt.Errorf("host %q is neither an IP address nor localhost", host)
	}
	return ip.Unmap().IsLoopback(), nil
}

// IsLoopbackAddr is IsLoopback for a listener's or a peer's address, where
// a host name (never loopback here) is simply not loopback. A TCP address
// is read without formatting and parsing it again.
func IsLoopbackAddr(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok && t.IP != nil {
		ip, _ := netip.AddrFromSlice(t.IP)
		return ip.Unmap().IsLoopback()
	}
	ok, _ := IsLoopback(a.String())
	return ok
}

// BootWarnings lists what CheckBoot lets through but an operator should
// hear about at start, one sentence each: today, network transports on a
// non-loopback address with no authentication, where every client is the
// same anonymous principal (issue #13: an allow-all policy with no tokens
// started on 0.0.0.0 with only an INFO line).
func BootWarnings(c BootConfig) []string {
	if !c.NetworkTransports || c.Dev || c.Guard == nil || c.Guard.Authenticator != nil {
		return nil
	}
	for _, addr := range c.ListenAddrs {
		if loop, err := IsLoopback(addr); err != nil || !loop {
			return []string{fmt.Sprintf("NO AUTHENTICATION on network address %s: policy %q has no tokens: or jwt: section, so every client is one anonymous principal that shares sessions, limits and whatever the policy allows; add tokens or jwt, or bind a loopback address", addr, c.Guard.Name)}
		}
	}
	return nil
}
