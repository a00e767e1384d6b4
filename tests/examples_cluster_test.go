package tests

// The shipped cluster examples, checked as far as this machine can (no
// kubectl, no docker): every document parses, the fields a cluster
// depends on agree with each other, and toolgate accepts the replicas'
// configuration. The balancer configs in examples/cluster/ are run by
// cluster_lb_test.go.

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// yamlDocs returns every document of the YAML file at path.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(docs)+1, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// str is the string at keys in v, "" when there is none.
func str(v any, keys ...string) string {
	s, _ := dig(v, keys...).(string)
	return s
}

// num is the integer at keys in v, -1 when there is none.
func num(v any, keys ...string) int64 {
	switch n := dig(v, keys...).(type) {
	case uint64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return -1
}

// list is the sequence at keys in v.
func list(v any, keys ...string) []any {
	l, _ := dig(v, keys...).([]any)
	return l
}

// byName returns the element of l whose name is name, or nil.
func byName(l []any, name string) any {
	for _, e := range l {
		if str(e, "name") == name {
			return e
		}
	}
	return nil
}

// replicaConfig is what the cluster tests read of a replica's toolgate.yaml.
type replicaConfig struct {
	Server struct {
		ShutdownGrace string `yaml:"shutdown_grace"`
	} `yaml:"server"`
	Cluster struct {
		Peers      map[string]string `yaml:"peers"`
		DrainDelay string            `yaml:"drain_delay"`
	} `yaml:"cluster"`
}

// checkReplicaConfig checks that toolgate accepts text, a replica's
// configuration, as replica id, and returns it decoded along with the
// time a replica may take to stop (drain delay plus shutdown grace).
func checkReplicaConfig(t *testing.T, text, id string) (replicaConfig, time.Duration) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TOOLGATE_REPLICA_ID=" + id, "TOOLGATE_CLUSTER_SECRET=" + clusterSecret,
		"TOOLGATE_TOKEN=0123456789abcdef0123456789abcdef", "TOOLGATE_REDIS_URL="}
	if r := runProgram(t, toolgateBin, env, "validate", "--config", path); r.code != 0 {
		t.Fatalf("toolgate validate of the replicas' config, as %s: %v", id, r)
	}
	var cfg replicaConfig
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	drain, err1 := time.ParseDuration(cfg.Cluster.DrainDelay)
	grace, err2 := time.ParseDuration(cfg.Server.ShutdownGrace)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("the replicas' config must set cluster.drain_delay and server.shutdown_grace: %v", err)
	}
	return cfg, drain + grace
}

// TestKubernetesExample: examples/k8s/toolgate.yaml, as kubectl's schema
// check would read it and as the cluster needs it.
func TestKubernetesExample(t *testing.T) {
	docs := yamlDocs(t, "../examples/k8s/toolgate.yaml")
	apis := map[string]string{"Secret": "v1", "ConfigMap": "v1", "Service": "v1", "Ingress": "networking.k8s.io/v1",
		"StatefulSet": "apps/v1", "PodDisruptionBudget": "policy/v1"}
	kinds := map[string][]map[string]any{}
	for _, d := range docs {
		kind := str(d, "kind")
		if want, ok := apis[kind]; !ok || str(d, "apiVersion") != want {
			t.Errorf("document %s/%s: apiVersion %q, want one of %v", kind, str(d, "metadata", "name"), str(d, "apiVersion"), apis)
		}
		if str(d, "metadata", "name") == "" {
			t.Errorf("a %s has no metadata.name", kind)
		}
		kinds[kind] = append(kinds[kind], d)
	}
	for kind := range apis {
		want := 1
		if kind == "Service" {
			want = 2 // the headless one for peers, the one for clients
		}
		if len(kinds[kind]) != want {
			t.Fatalf("%d documents of kind %s, want %d", len(kinds[kind]), kind, want)
		}
	}
	sts, secret, cm, pdb, ing := kinds["StatefulSet"][0], kinds["Secret"][0], kinds["ConfigMap"][0], kinds["PodDisruptionBudget"][0], kinds["Ingress"][0]

	// One set of labels selects the pods everywhere.
	labels := dig(sts, "spec", "template", "metadata", "labels")
	for what, sel := range map[string]any{
		"the StatefulSet's selector": dig(sts, "spec", "selector", "matchLabels"),
		"the PodDisruptionBudget's":  dig(pdb, "spec", "selector", "matchLabels"),
		"a Service's":                dig(kinds["Service"][0], "spec", "selector"),
		"the other Service's":        dig(kinds["Service"][1], "spec", "selector"),
	} {
		if fmt.Sprint(sel) != fmt.Sprint(labels) || labels == nil {
			t.Errorf("%s is %v, want the pods' labels %v", what, sel, labels)
		}
	}
	if num(pdb, "spec", "maxUnavailable") != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable = %v, want 1", dig(pdb, "spec", "maxUnavailable"))
	}

	// The headless Service names the pods for their peers.
	var headless, front map[string]any
	for _, s := range kinds["Service"] {
		if str(s, "spec", "clusterIP") == "None" {
			headless = s
		} else {
			front = s
		}
	}
	if headless == nil || front == nil {
		t.Fatalf("want a headless Service (clusterIP: None) and another one")
	}
	if got := str(sts, "spec", "serviceName"); got != str(headless, "metadata", "name") {
		t.Errorf("StatefulSet serviceName = %q, want the headless Service %q", got, str(headless, "metadata", "name"))
	}
	if dig(headless, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("the headless Service must publish pods that are not ready: a draining replica still owns its sessions")
	}
	backend := dig(ing, "spec", "rules")
	if l, _ := backend.([]any); len(l) > 0 {
		backend = dig(list(l[0], "http", "paths")[0], "backend", "service")
	}
	if str(backend, "name") != str(front, "metadata", "name") || byName(list(front, "spec", "ports"), str(backend, "port", "name")) == nil {
		t.Errorf("the Ingress's backend %v is not the client Service %q and one of its ports", backend, str(front, "metadata", "name"))
	}

	// The container: its port, probes, replica ID and secrets.
	pod := dig(sts, "spec", "template", "spec")
	containers := list(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c := containers[0]
	port := byName(list(c, "ports"), "http")
	if num(port, "containerPort") != 8080 {
		t.Errorf("container port http = %v, want 8080 (server.listen)", port)
	}
	// Readiness turns 503 at SIGTERM, so the Service stops sending new
	// work while the pod drains; liveness stays 200 until it exits.
	for probe, path := range map[string]string{"readinessProbe": "/healthz/ready", "livenessProbe": "/healthz"} {
		if str(c, probe, "httpGet", "path") != path || str(c, probe, "httpGet", "port") != "http" {
			t.Errorf("%s = %v, want GET %s on port http", probe, dig(c, probe), path)
		}
	}
	env := list(c, "env")
	if got := str(byName(env, "TOOLGATE_REPLICA_ID"), "valueFrom", "fieldRef", "fieldPath"); got != "metadata.name" {
		t.Errorf("TOOLGATE_REPLICA_ID comes from %q, want the pod's name (metadata.name)", got)
	}
	for _, name := range []string{"TOOLGATE_CLUSTER_SECRET", "TOOLGATE_TOKEN"} {
		ref := dig(byName(env, name), "valueFrom", "secretKeyRef")
		key := str(ref, "key")
		if str(ref, "name") != str(secret, "metadata", "name") || dig(secret, "stringData", key) == nil {
			t.Errorf("%s comes from %v, want a key of the Secret %q", name, ref, str(secret, "metadata", "name"))
		}
		if v := str(secret, "stringData", key); len(v) >= 32 {
			t.Errorf("the Secret's %s is a usable placeholder (%d bytes): toolgate must refuse to start with it", key, len(v))
		}
	}

	// The config: the ConfigMap mounted where the args say; toolgate
	// accepts it; its peers are the pods; stopping fits in the grace.
	mount := list(c, "volumeMounts")
	args := strings.Join(slices.Collect(func(yield func(string) bool) {
		for _, a := range list(c, "args") {
			yield(fmt.Sprint(a))
		}
	}), " ")
	if len(mount) != 1 || !strings.Contains(args, "--config "+str(mount[0], "mountPath")+"/toolgate.yaml") ||
		str(byName(list(pod, "volumes"), str(mount[0], "name")), "configMap", "name") != str(cm, "metadata", "name") {
		t.Errorf("the container (args %q, mounts %v) does not read toolgate.yaml from the ConfigMap %q", args, mount, str(cm, "metadata", "name"))
	}
	stsName, replicas := str(sts, "metadata", "name"), num(sts, "spec", "replicas")
	cfg, stopping := checkReplicaConfig(t, str(cm, "data", "toolgate.yaml"), stsName+"-0")
	want := map[string]string{}
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", stsName, i)
		want[pod] = fmt.Sprintf("%s.%s:%d", pod, str(headless, "metadata", "name"), num(port, "containerPort"))
	}
	if !maps.Equal(cfg.Cluster.Peers, want) {
		t.Errorf("cluster.peers = %v, want each of the %d pods by its name in the headless Service: %v", cfg.Cluster.Peers, replicas, want)
	}
	if grace := time.Duration(num(pod, "terminationGracePeriodSeconds")) * time.Second; grace <= stopping {
		t.Errorf("terminationGracePeriodSeconds = %v, want more than drain_delay + shutdown_grace = %v", grace, stopping)
	}
}

// TestComposeExample: examples/cluster/docker-compose.yml runs three
// replicas as toolgate.yaml names them, behind the tested haproxy.cfg.
func TestComposeExample(t *testing.T) {
	docs := yamlDocs(t, "../examples/cluster/docker-compose.yml")
	if len(docs) != 1 {
		t.Fatalf("%d documents, want 1", len(docs))
	}
	services := dig(docs[0], "services")
	b, err := os.ReadFile("../examples/cluster/toolgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, stopping := checkReplicaConfig(t, string(b), "r1")
	want := map[string]string{}
	for _, id := range replicaIDs {
		svc := "toolgate-" + id
		want[id] = svc + ":8080"
		if got := str(services, svc, "environment", "TOOLGATE_REPLICA_ID"); got != id {
			t.Errorf("service %s: TOOLGATE_REPLICA_ID = %q, want %q", svc, got, id)
		}
		if !slices.Contains(list(services, svc, "volumes"), any("./toolgate.yaml:/etc/toolgate/toolgate.yaml:ro")) {
			t.Errorf("service %s does not mount ./toolgate.yaml: %v", svc, list(services, svc, "volumes"))
		}
		if d, err := time.ParseDuration(str(services, svc, "stop_grace_period")); err != nil || d <= stopping {
			t.Errorf("service %s: stop_grace_period %q, want more than drain_delay + shutdown_grace = %v", svc, str(services, svc, "stop_grace_period"), stopping)
		}
		if haproxyEnv := str(services, "haproxy", "environment", fmt.Sprintf("TOOLGATE_R%s", strings.TrimPrefix(id, "r"))); haproxyEnv != want[id] {
			t.Errorf("haproxy's address of %s = %q, want %q", id, haproxyEnv, want[id])
		}
	}
	if !maps.Equal(cfg.Cluster.Peers, want) {
		t.Errorf("toolgate.yaml's cluster.peers = %v, want the compose services %v", cfg.Cluster.Peers, want)
	}
	if !slices.Contains(list(services, "haproxy", "volumes"), any("./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro")) {
		t.Errorf("haproxy does not run the tested ./haproxy.cfg: %v", list(services, "haproxy", "volumes"))
	}
	hcfg, err := os.ReadFile("../examples/cluster/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$\{(TOOLGATE_[A-Z0-9_]+)\}`).FindAllStringSubmatch(string(hcfg), -1) {
		if str(services, "haproxy", "environment", m[1]) == "" {
			t.Errorf("haproxy.cfg reads %s, which the haproxy service does not set", m[1])
		}
	}
	if got := list(services, "redis", "profiles"); len(got) != 1 || got[0] != "redis" {
		t.Errorf("redis profiles = %v, want [redis]: Redis is optional", got)
	}
}
