// Package authz decides who may do what on an mcpswarm node.
//
// It holds the principal model (who a request acts for), bearer-token
// authentication (SHA-256-hashed static tokens and JWTs), the policy file
// (ordered allow / ask / deny rules for tools and for the read surface), the
// framework and development defaults, the boot gates that keep a network
// transport shut until an operator has chosen a policy, session ownership and
// the tools/list filter.
//
// Like raft's quorum package, the decision core is pure: an Authorizer maps
// (tool, arguments, Context) to a Decision that names the rule that produced
// it, with no I/O, clocks or goroutines. The only I/O in the package is reading
// its configuration files (the policy and the JWT key material it names).
// Nothing in a Context comes from the client: the principal is a verified
// token subject, or the connection itself.
package authz
