# mcpswarm — see README.md. Every target runs on a fresh machine with Go;
# tools (buf, protoc plugins, staticcheck) are installed with `go install`
# into ./.cache/bin on first use.

GO        ?= go
BIN       := bin/mcpswarm
TOOLS     := $(CURDIR)/.cache/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/mcpswarm/mcpswarm.version=$(VERSION)
# Unit, property, integration and in-process multi-node tests; e2e tests that
# start the real binary live in ./e2e and are part of `make test` too.
PKGS      := ./...
TESTFLAGS ?= -count=1 -timeout 12m

BUF_VERSION            := v1.75.0
PROTOC_GEN_GO_VERSION  := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.0
STATICCHECK_VERSION    := v0.8.2

# What `make test` keeps besides its output: the tests that did not run for
# want of a tool (listed at its end) and the `go test -json` stream.
TESTOUT   := .cache/test
REPORT    := $(TOOLS)/testreport

.PHONY: build run test test-short test-deps race bench bench-compare bench-scale bench-scale-real soak proto proto-check lint e2e conformance cluster clean tools

build: ## build bin/mcpswarm
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/node

run: build ## one development node on loopback (MCP at http://127.0.0.1:8080/mcp)
	$(BIN) serve --dev --name dev1

test: build $(REPORT) ## the whole suite: unit, property, multi-node, e2e, browser; installs what it needs first and lists at its end what did not run
	@mkdir -p $(TESTOUT) && rm -f $(TESTOUT)/not-run.txt $(TESTOUT)/go-test.json
	bash scripts/test-deps.sh -notrun $(TESTOUT)/not-run.txt
	@st=0; \
	echo '$(GO) test $(TESTFLAGS) $(PKGS)'; \
	$(GO) test -json $(TESTFLAGS) $(PKGS) | $(REPORT) $(REPORTFLAGS) || st=1; \
	bash scripts/test-summary.sh $(TESTOUT)/not-run.txt; \
	exit $$st

REPORTFLAGS := -notrun $(TESTOUT)/not-run.txt -log $(TESTOUT)/go-test.json

test-short: ## the fast tier for the edit-compile-test loop: unit, property and in-process multi-node tests, no e2e (-short)
	$(GO) test -short -count=1 -timeout 5m $(SHORTPKGS)

# The fast tier leaves out the packages that start real processes: e2e/ and
# cmd/ (which builds and runs the binary).
SHORTPKGS = $$($(GO) list ./... | grep -v -e /e2e -e /cmd/)

test-deps: ## install what the tests need beyond Go, where this machine can (npm packages; chromium and iproute2 as root with apt-get)
	@mkdir -p $(TESTOUT)
	bash scripts/test-deps.sh -notrun $(TESTOUT)/not-run.txt

$(REPORT): scripts/testreport/main.go internal/testenv/testenv.go
	@mkdir -p $(TOOLS)
	$(GO) build -o $@ ./scripts/testreport

race: ## the whole suite under the race detector
	$(GO) test -race $(TESTFLAGS) $(PKGS)

bench: ## benchmarks (figures go to docs/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 20m ./crdt/... ./session/... ./cluster/... ./mcp/... .

bench-compare: build ## mcpswarm vs bare mcp-go and go-sdk, separate processes; writes docs/BENCHMARKS.md (QUICK=1: short run, prints only; BENCH_ARGS: more flags)
	cd bench && $(GO) run ./compare -mcpswarm $(CURDIR)/$(BIN) -docs $(CURDIR)/docs $(if $(QUICK),-quick) $(BENCH_ARGS)

SCALE_N ?= 3,8,16,32,64
bench-scale: ## N = 3 … 64 nodes in one process (internal/scale); writes docs/bench/scale.md, scale.json, scale-*.svg (QUICK=1: short phases; SCALE_N=3,8: sizes)
	cd bench && $(GO) run ./scale -docs $(CURDIR)/docs -n $(SCALE_N) $(if $(QUICK),-quick)

REAL_N ?= 3,12
bench-scale-real: build ## the same figures on N real processes on one machine, loopback and LAN timers (bench/realscale); writes docs/bench/scale-real.md, scale-real.json (REAL_N=3,12: sizes)
	cd bench && $(GO) run ./realscale -mcpswarm $(CURDIR)/$(BIN) -docs $(CURDIR)/docs -n $(REAL_N)

soak: build ## sustained load on 3 nodes (not in CI; SOAK_CLIENTS=500, SOAK_DURATION=10m); writes docs/BENCHMARKS.md's soak section and docs/bench/soak.*
	cd bench && $(GO) run ./soak -mcpswarm $(CURDIR)/$(BIN) -docs $(CURDIR)/docs

e2e: build ## only the tests that start the real binary
	$(GO) test $(TESTFLAGS) ./e2e/...

conformance: build ## the official MCP conformance suite, 10 consecutive runs
	bash scripts/test-deps.sh npm
	RUNS=$${RUNS:-10} MCPSWARM_BIN=$(CURDIR)/$(BIN) bash e2e/conformance/run.sh

$(TOOLS)/buf:
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)
$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc

proto: tools ## regenerate proto/**/*.pb.go with buf (local plugins, offline)
	PATH=$(TOOLS):$$PATH buf lint
	PATH=$(TOOLS):$$PATH buf generate

proto-check: proto ## fail when the committed generated code differs from the protos
	git diff --exit-code -- proto

lint: $(TOOLS)/staticcheck ## go vet + staticcheck
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

cluster: build ## three development nodes on loopback; Ctrl-C stops them all
	bash deploy/local-cluster.sh

clean:
	rm -rf bin data
