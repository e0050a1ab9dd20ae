package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/internal/testdns"
)

const k8sDir = "../../deploy/k8s"

// manifests is deploy/k8s as `kubectl kustomize` renders it (kustomize's
// own engine, in process), each object decoded strictly into its
// k8s.io/api type: an unknown or misspelt field fails the decode.
type manifests struct {
	namespace   corev1.Namespace
	configMaps  []corev1.ConfigMap
	services    []corev1.Service
	statefulSet appsv1.StatefulSet
	pdb         policyv1.PodDisruptionBudget
	netpol      networkingv1.NetworkPolicy
}

func renderManifests(t *testing.T) manifests {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), k8sDir)
	if err != nil {
		t.Fatalf("rendering %s: %v", k8sDir, err)
	}
	var m manifests
	seen := map[string]int{}
	for _, res := range resMap.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		seen[tm.Kind]++
		var target any
		switch tm.Kind {
		case "Namespace":
			target = &m.namespace
		case "ConfigMap":
			m.configMaps = append(m.configMaps, corev1.ConfigMap{})
			target = &m.configMaps[len(m.configMaps)-1]
		case "Service":
			m.services = append(m.services, corev1.Service{})
			target = &m.services[len(m.services)-1]
		case "StatefulSet":
			target = &m.statefulSet
		case "PodDisruptionBudget":
			target = &m.pdb
		case "NetworkPolicy":
			target = &m.netpol
		default:
			t.Fatalf("the manifest test does not know kind %s: add it here", tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Fatalf("%s %s does not decode strictly: %v\n%s", tm.Kind, res.GetName(), err, doc)
		}
	}
	want := map[string]int{"Namespace": 1, "ConfigMap": 1, "Service": 2, "StatefulSet": 1, "PodDisruptionBudget": 1, "NetworkPolicy": 1}
	for k, n := range want {
		if seen[k] != n {
			t.Fatalf("rendered %d %s, want %d (all: %v)", seen[k], k, n, seen)
		}
	}
	return m
}

// podEnv is what the kubelet substitutes for $(VAR) in args: the fieldRef
// values of a pod named mcpswarm-0 whose IP is 127.0.0.1, in zone
// zone-a.
func podEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = "mcpswarm-0"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = "127.0.0.1"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.labels['topology.kubernetes.io/zone']":
			env[e.Name] = "zone-a"
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		default:
			t.Fatalf("env %s comes from a source the test cannot stand in for", e.Name)
		}
	}
	return env
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expand(t *testing.T, env map[string]string, args []string) []string {
	t.Helper()
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = varRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := env[name]
			if !ok {
				t.Fatalf("arg %q refers to $(%s), which the container does not define", a, name)
			}
			return v
		})
	}
	return out
}

// serveConfig parses the container's serve args with the binary's own
// flag set.
func serveConfig(t *testing.T, args []string) mcpswarm.Config {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("container args %v do not run `serve`", args)
	}
	cfg := mcpswarm.DefaultConfig()
	var logFormat, logLevel, configFile string
	fs := serveFlags(&cfg, &logFormat, &logLevel, &configFile)
	fs.SetOutput(new(strings.Builder))
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("the binary refuses the manifest's args: %v", err)
	}
	if fs.NArg() != 0 {
		t.Fatalf("stray arguments %v", fs.Args())
	}
	if _, err := newLogger(os.Stderr, logFormat, logLevel); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// mountOf returns the volume mount under which path lies.
func mountOf(t *testing.T, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if path == vm.MountPath || strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			return vm
		}
	}
	t.Fatalf("%s lies on no volume mount (the root fs is read-only)", path)
	return corev1.VolumeMount{}
}

func volume(t *testing.T, spec corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// dockerBinary returns the path the Dockerfile installs the binary at and
// the user it runs as.
func dockerBinary(t *testing.T) (path, user string) {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "COPY" && f[1] == "--from=build":
			path = f[3]
		case len(f) == 2 && f[0] == "USER":
			user = f[1]
		}
	}
	if !strings.Contains(string(b), "CGO_ENABLED=0") {
		t.Fatal("the Dockerfile does not build a static binary (CGO_ENABLED=0)")
	}
	return path, user
}

// Every rendered manifest decodes strictly, and what the StatefulSet tells
// the binary (args, ports, probes, paths, the preStop drain, the --join
// dns: name) matches the binary's real flags, endpoints and the other
// manifests.
func TestKubernetesManifestsMatchTheBinary(t *testing.T) {
	m := renderManifests(t)
	sts := m.statefulSet
	spec := sts.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	env := podEnv(t, c)
	args := expand(t, env, c.Args)
	cfg := serveConfig(t, args)

	if cfg.Name != "mcpswarm-0" {
		t.Errorf("--name is %q: it must be the pod name (stable across restarts)", cfg.Name)
	}
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	for name, addr := range map[string]string{"http": cfg.HTTPAddr, "grpc": cfg.GRPCAddr, "gossip-tcp": cfg.GossipAddr, "gossip-udp": cfg.GossipAddr} {
		if ports[name].ContainerPort != portOf(t, addr) {
			t.Errorf("containerPort %s is %d, the binary listens on %s", name, ports[name].ContainerPort, addr)
		}
	}
	if ports["gossip-udp"].Protocol != corev1.ProtocolUDP {
		t.Error("gossip-udp is not UDP: memberlist probes over UDP")
	}

	// A silent pod is declared dead within 6 probe intervals (three pods,
	// memberlist's suspicion of 4 intervals after a failed probe): with a
	// second for the standby to catch up and the client's next call, the
	// failover stays within 5 s.
	if cfg.ProbeInterval == 0 || 6*cfg.ProbeInterval > 4*time.Second {
		t.Errorf("--probe-interval is %v: a silent pod must be declared dead within 4 s (6 intervals), so its sessions fail over within 5 s", cfg.ProbeInterval)
	}

	// --join dns: names the headless Service of the StatefulSet.
	var headless corev1.Service
	for _, s := range m.services {
		if s.Name == sts.Spec.ServiceName {
			headless = s
		}
	}
	wantJoin := fmt.Sprintf("dns:%s.%s.svc.cluster.local", sts.Spec.ServiceName, m.namespace.Name)
	if !slices.Equal(cfg.Join, []string{wantJoin}) {
		t.Errorf("--join is %v, want [%s]", cfg.Join, wantJoin)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("service %q must be headless and publish not-ready addresses (nodes find each other before ready)", sts.Spec.ServiceName)
	}
	var gossipTCP, gossipUDP bool
	for _, p := range headless.Spec.Ports {
		if p.Port == portOf(t, cfg.GossipAddr) {
			gossipTCP = gossipTCP || p.Protocol == corev1.ProtocolTCP
			gossipUDP = gossipUDP || p.Protocol == corev1.ProtocolUDP
		}
	}
	if !gossipTCP || !gossipUDP {
		t.Errorf("the headless service does not publish the gossip port over TCP and UDP")
	}

	// Paths: the policy from the generated ConfigMap, the key from the
	// Secret, the data dir on the volume claim.
	pm := mountOf(t, c, cfg.PolicyFile)
	pv := volume(t, spec, pm.Name)
	if pv.ConfigMap == nil || len(m.configMaps) != 1 || pv.ConfigMap.Name != m.configMaps[0].Name {
		t.Errorf("--policy %s is not on the generated policy ConfigMap", cfg.PolicyFile)
	} else if _, ok := m.configMaps[0].Data[filepath.Base(cfg.PolicyFile)]; !ok {
		t.Errorf("the policy ConfigMap has no key %s", filepath.Base(cfg.PolicyFile))
	}
	km := mountOf(t, c, cfg.ClusterKeyFile)
	if kv := volume(t, spec, km.Name); kv.Secret == nil || filepath.Base(cfg.ClusterKeyFile) != "cluster.key" {
		t.Errorf("--cluster-key-file %s is not the cluster.key of a Secret", cfg.ClusterKeyFile)
	}
	dm := mountOf(t, c, cfg.DataDir)
	if len(sts.Spec.VolumeClaimTemplates) != 1 || dm.Name != sts.Spec.VolumeClaimTemplates[0].Name {
		t.Errorf("--data-dir %s is not on the pod's volume claim", cfg.DataDir)
	}

	// Probes.
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("readiness probe %+v, want GET /readyz on http", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("liveness probe %+v, want GET /healthz on http", p)
	}
	if p := c.StartupProbe; p == nil || p.GRPC == nil || p.GRPC.Port != portOf(t, cfg.GRPCAddr) {
		t.Errorf("startup probe %+v, want gRPC health on the gRPC port", p)
	}

	// preStop drains this pod with the binary the image installs.
	binPath, user := dockerBinary(t)
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
		t.Fatal("no preStop exec hook")
	}
	stop := c.Lifecycle.PreStop.Exec.Command
	if len(stop) < 2 || stop[0] != binPath || stop[1] != "drain" {
		t.Fatalf("preStop runs %v, want %s drain …", stop, binPath)
	}
	drainFS := flag.NewFlagSet("drain", flag.ContinueOnError)
	addr := drainFS.String("addr", "", "")
	keyFile := drainFS.String("cluster-key-file", "", "")
	timeout := drainFS.Duration("timeout", 10*time.Second, "")
	if err := drainFS.Parse(stop[2:]); err != nil {
		t.Fatalf("preStop flags: %v", err)
	}
	if h, _, _ := net.SplitHostPort(*addr); h != "127.0.0.1" || portOf(t, *addr) != portOf(t, cfg.GRPCAddr) || *keyFile != cfg.ClusterKeyFile {
		t.Errorf("preStop drains %s with key %s; want this pod's gRPC port and %s", *addr, *keyFile, cfg.ClusterKeyFile)
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if need := *timeout + cfg.ShutdownTimeout; grace < need {
		t.Errorf("terminationGracePeriodSeconds %v < preStop timeout %v + shutdown timeout %v", grace, *timeout, cfg.ShutdownTimeout)
	}

	// Security.
	psc, csc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || strconv.FormatInt(*psc.RunAsUser, 10)+":"+strconv.FormatInt(*psc.RunAsGroup, 10) != user {
		t.Errorf("pod security context %+v does not run as the image's non-root user %s", psc, user)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v: want read-only root fs, no privilege escalation, drop ALL", csc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	// Disruptions: one pod at a time.
	if m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 || !selects(m.pdb.Spec.Selector, sts.Spec.Template.Labels) {
		t.Errorf("PDB %+v: want maxUnavailable 1 over the swarm's pods", m.pdb.Spec)
	}

	// Gossip and peer gRPC only from the swarm's pods; MCP from anywhere.
	open := map[int32]bool{}
	for _, rule := range m.netpol.Spec.Ingress {
		for _, p := range rule.Ports {
			if len(rule.From) == 0 {
				open[int32(p.Port.IntValue())] = true
				continue
			}
			for _, from := range rule.From {
				if from.PodSelector == nil || !selects(from.PodSelector, sts.Spec.Template.Labels) || from.NamespaceSelector != nil || from.IPBlock != nil {
					t.Errorf("ingress to port %s from %+v: only the swarm's own pods may reach it", p.Port.String(), from)
				}
			}
		}
	}
	if !open[portOf(t, cfg.HTTPAddr)] || open[portOf(t, cfg.GRPCAddr)] || open[portOf(t, cfg.GossipAddr)] {
		t.Errorf("network policy opens ports %v to all; want only HTTP %d", open, portOf(t, cfg.HTTPAddr))
	}
	if !selects(&m.netpol.Spec.PodSelector, sts.Spec.Template.Labels) {
		t.Error("the network policy does not select the swarm's pods")
	}
}

func selects(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil || len(sel.MatchLabels) == 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The pod the StatefulSet describes runs: the real binary with the
// manifest's args, its mounts stood in for by temp dirs (the policy from
// the rendered ConfigMap, a fresh cluster key as the Secret), its ports
// moved to free loopback ones and --join dns: answered by a test DNS server
// (--dns-server is the one flag added). The probes answer, the preStop
// command drains it and turns readiness false, and SIGTERM then stops it
// within the grace period.
func TestKubernetesPodLifecycle(t *testing.T) {
	m := renderManifests(t)
	spec := m.statefulSet.Spec.Template.Spec
	c := spec.Containers[0]
	args := expand(t, podEnv(t, c), c.Args)
	cfg := serveConfig(t, args)

	root := t.TempDir()
	remap := map[string]string{} // pod path prefix → local dir
	for _, vm := range c.VolumeMounts {
		dir := filepath.Join(root, vm.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		remap[vm.MountPath] = dir
		if vm.Name == m.statefulSet.Spec.VolumeClaimTemplates[0].Name {
			continue // the claim: an empty dir here
		}
		v := volume(t, spec, vm.Name)
		switch {
		case v.ConfigMap != nil:
			for k, val := range m.configMaps[0].Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(val), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		case v.Secret != nil:
			key, err := mcpswarm.GenerateClusterKey()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cluster.key"), []byte(key), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	ports := map[string]string{} // manifest port → free loopback address
	free := freePorts(t, 3)
	for i, a := range []string{cfg.HTTPAddr, cfg.GRPCAddr, cfg.GossipAddr} {
		_, p, _ := net.SplitHostPort(a)
		ports[p] = free[i]
	}
	local := func(arg string) string {
		for prefix, dir := range remap {
			if i := strings.Index(arg, "="+prefix); i >= 0 {
				return arg[:i+1] + dir + arg[i+1+len(prefix):]
			}
		}
		if k, v, ok := strings.Cut(arg, "="); ok {
			if h, p, err := net.SplitHostPort(v); err == nil && (h == "0.0.0.0" || h == "127.0.0.1") && ports[p] != "" {
				return k + "=" + ports[p]
			}
		}
		return arg
	}
	dnsSrv, err := testdns.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dnsSrv.Close() })
	gossip := ports[strconv.Itoa(int(portOf(t, cfg.GossipAddr)))]
	dnsSrv.Set(strings.TrimPrefix(cfg.Join[0], "dns:"), testdns.Target{Host: "127.0.0.1", Port: int(portOf(t, gossip))})

	var localArgs []string
	for _, a := range args {
		localArgs = append(localArgs, local(a))
	}
	localArgs = append(localArgs, "--dns-server="+dnsSrv.Addr())
	cmd := exec.Command(binary, localArgs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logs strings.Builder
	cmd.Stderr = &syncWriter{b: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("node logs:\n%s", logs.String())
		}
	})
	httpAddr := ports[strconv.Itoa(int(portOf(t, cfg.HTTPAddr)))]
	grpcAddr := ports[strconv.Itoa(int(portOf(t, cfg.GRPCAddr)))]
	waitHTTP(t, "http://"+httpAddr+c.ReadinessProbe.HTTPGet.Path)
	waitHTTP(t, "http://"+httpAddr+c.LivenessProbe.HTTPGet.Path)

	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("startup probe (gRPC health): %v, %v", resp, err)
	}

	stop := c.Lifecycle.PreStop.Exec.Command
	var stopArgs []string
	for _, a := range stop[1:] {
		stopArgs = append(stopArgs, local(a))
	}
	began := time.Now()
	code, out := runBinary(t, nil, stopArgs...)
	drained := time.Since(began)
	if code != 0 {
		t.Fatalf("preStop %v exited %d: %s", stopArgs, code, out)
	}
	resp, err := http.Get("http://" + httpAddr + c.ReadinessProbe.HTTPGet.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readiness after the preStop drain answers %d, want 503", resp.StatusCode)
	}
	termAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(grace):
		t.Fatalf("the node did not exit within terminationGracePeriodSeconds (%v) of SIGTERM", grace)
	}
	t.Logf("preStop drain took %v; the exit %v after SIGTERM (grace period %v)", drained, time.Since(termAt), grace)
}

// syncWriter lets the process's stderr and the test's cleanup share a
// builder.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
