package deploy_test

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// valueSets are the configurations the chart must render for: the
// defaults (plus the one required value), everything optional turned on,
// a Sentinel Redis with a password, and a decision service alone.
var valueSets = map[string]string{
	"defaults": `
mysql: {existingSecret: sluice-mysql}
`,
	"everything on": `
image: {repository: registry.internal/sluice, tag: "1.2.3"}
imagePullSecrets: [{name: pull}]
mysql: {existingSecret: db, dsnKey: mysql-dsn}
redis: {addr: "redis-master:6379", db: 2, existingSecret: redis, passwordKey: pw, usernameKey: user, keyPrefix: "team-a:"}
extraEnv: [{name: SLUICE_LOG_LEVEL, value: debug}]
console: {replicas: 3, trustedProxies: ["10.0.0.0/8"], podDisruptionBudget: {enabled: true, maxUnavailable: 1},
  nodeSelector: {pool: system}, tolerations: [{key: dedicated, operator: Equal, value: sluice, effect: NoSchedule}],
  podAnnotations: {team: platform}}
sync: {replicas: 2, podDisruptionBudget: {enabled: true, maxUnavailable: 1}}
decide: {replicas: 4, unmatched: deny, failurePolicy: closed, service: {type: LoadBalancer},
  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100,
    podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/component: decide}}}}]}}}
serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}}
networkPolicy:
  enabled: true
  consoleFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress}}}]
  decideFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: gateways}}}, {podSelector: {matchLabels: {app: envoy}}}]
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
`,
	"sentinel": `
mysql: {existingSecret: sluice-mysql}
redis: {addr: "", sentinel: {masterName: mymaster, addrs: ["s1:26379", "s2:26379"]}, existingSecret: redis}
`,
	"decision service only": `
mysql: {existingSecret: sluice-mysql}
redis: {addr: "", clusterAddrs: ["c1:6379", "c2:6379"]}
console: {enabled: false}
sync: {enabled: false}
decide: {podDisruptionBudget: {enabled: false}}
`,
}

// object is one rendered manifest, decoded.
type object struct {
	source string
	kind   string
	name   string
	value  any
}

func render(t *testing.T, values string) ([]object, error) {
	t.Helper()
	return renderAs(t, "prod", "sluice", values)
}

func renderAs(t *testing.T, release, namespace, values string) ([]object, error) {
	t.Helper()
	chart, err := loader.Load(filepath.Join("helm", "sluice"))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	top, err := chartutil.ToRenderValues(chart, vals, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chart, top)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []object
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for i, doc := range strings.Split(files[n], "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
				continue
			}
			out = append(out, decodeStrict(t, fmt.Sprintf("%s#%d", n, i), []byte(doc)))
		}
	}
	return out, nil
}

// decodeStrict decodes a manifest into its Kubernetes API type, refusing
// unknown and duplicate fields.
func decodeStrict(t *testing.T, source string, doc []byte) object {
	t.Helper()
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		t.Fatalf("%s: %v\n%s", source, err, doc)
	}
	var v any
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		v = &appsv1.Deployment{}
	case "v1 Service":
		v = &corev1.Service{}
	case "policy/v1 PodDisruptionBudget":
		v = &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		v = &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		v = &monitoringv1.ServiceMonitor{}
	default:
		t.Fatalf("%s: unexpected kind %s %s", source, head.APIVersion, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %s %q does not decode strictly: %v\n%s", source, head.Kind, head.Metadata.Name, err, doc)
	}
	return object{source: source, kind: head.Kind, name: head.Metadata.Name, value: v}
}

func TestChartRendersStrictly(t *testing.T) {
	bins := binaries(t)
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs, err := render(t, values)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			kinds := map[string]int{}
			services := map[string]*corev1.Service{}
			for _, o := range objs {
				kinds[o.kind]++
				if s, ok := o.value.(*corev1.Service); ok {
					services[s.Name] = s
				}
			}
			for _, o := range objs {
				switch v := o.value.(type) {
				case *appsv1.Deployment:
					checkDeployment(t, v, bins)
					checkSelected(t, v, services)
				case *policyv1.PodDisruptionBudget:
					if (v.Spec.MinAvailable == nil) == (v.Spec.MaxUnavailable == nil) {
						t.Errorf("%s: a budget needs exactly one of minAvailable and maxUnavailable", v.Name)
					}
				}
			}
			t.Logf("rendered: %v", kinds)
			switch name {
			case "everything on":
				if kinds["ServiceMonitor"] != 3 || kinds["NetworkPolicy"] != 3 || kinds["PodDisruptionBudget"] != 3 {
					t.Errorf("optional objects: %v", kinds)
				}
			case "decision service only":
				if kinds["Deployment"] != 1 || kinds["PodDisruptionBudget"] != 0 || kinds["ServiceMonitor"] != 0 {
					t.Errorf("objects: %v", kinds)
				}
			case "defaults":
				if kinds["Deployment"] != 3 || kinds["Service"] != 3 || kinds["PodDisruptionBudget"] != 2 ||
					kinds["ServiceMonitor"] != 0 || kinds["NetworkPolicy"] != 0 {
					t.Errorf("objects: %v", kinds)
				}
			}
		})
	}
}

// TestChartRefusesAMissingSecret: the MySQL DSN comes only from an
// existing Secret, and rendering says so when none is named.
func TestChartRefusesAMissingSecret(t *testing.T) {
	_, err := render(t, "{}")
	if err == nil || !strings.Contains(err.Error(), "mysql.existingSecret is required") {
		t.Fatalf("render without mysql.existingSecret: %v", err)
	}
}

// TestStrictDecodingRefusesUnknownFields: the decoding the chart test
// relies on does refuse a misspelled field.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n  replica: 2\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.Deployment{}); err == nil {
		t.Fatal("an unknown field decodes")
	}
}

func checkSelected(t *testing.T, d *appsv1.Deployment, services map[string]*corev1.Service) {
	t.Helper()
	s, ok := services[d.Name]
	if !ok {
		t.Errorf("deployment %s has no service of the same name", d.Name)
		return
	}
	for k, v := range s.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("service %s selects %s=%s, which pods of %s do not carry", s.Name, k, v, d.Name)
		}
	}
	for _, p := range s.Spec.Ports {
		if containerPort(d.Spec.Template.Spec.Containers[0], p.TargetPort.String()) == 0 {
			t.Errorf("service %s targets port %s, which %s does not name", s.Name, p.TargetPort.String(), d.Name)
		}
	}
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func checkDeployment(t *testing.T, d *appsv1.Deployment, bins map[string]*binary) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: pods must run as non-root", d.Name)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("%s: selector %s=%s does not select its own pods", d.Name, k, v)
		}
	}
	for _, c := range spec.Containers {
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s/%s: no resource requests", d.Name, c.Name)
		}
		if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: privilege escalation must be off", d.Name, c.Name)
		}
		bin := bins[filepath.Base(c.Command[0])]
		if bin == nil {
			t.Errorf("%s/%s: command %v is none of the binaries", d.Name, c.Name, c.Command)
			continue
		}
		settings := bin.settings(t, c.Args)
		for _, e := range c.Env {
			if _, ok := settings[e.Name]; !ok {
				t.Errorf("%s/%s: %s is not a setting of %s %v", d.Name, c.Name, e.Name, bin.name, c.Args)
			}
			if e.Name == "SLUICE_MYSQL_DSN" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s/%s: the MySQL DSN must come from a Secret", d.Name, c.Name)
			}
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s/%s: liveness and readiness probes are required", d.Name, c.Name)
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			if p != nil {
				checkProbe(t, d.Name, c, p, bin, settings)
			}
		}
	}
}

// checkProbe: the probe's port is a listener the binary is told to open
// (an address setting set to ":port"), and the binary serves the probe's
// path there: the setting's own help names the path, or the binary's
// healthcheck command checks that path on that setting's default port.
func checkProbe(t *testing.T, deployment string, c corev1.Container, p *corev1.Probe, bin *binary, settings map[string]string) {
	t.Helper()
	if p.HTTPGet == nil {
		t.Errorf("%s: probes must be HTTP GETs of the health endpoints", deployment)
		return
	}
	path := p.HTTPGet.Path
	port := p.HTTPGet.Port.IntVal
	if p.HTTPGet.Port.StrVal != "" {
		port = containerPort(c, p.HTTPGet.Port.StrVal)
	}
	if port == 0 {
		t.Errorf("%s: probe %s names port %s, which the container does not declare", deployment, path, p.HTTPGet.Port.String())
		return
	}
	setting := ""
	for _, e := range c.Env {
		if e.Value == fmt.Sprintf(":%d", port) {
			setting = e.Name
		}
	}
	if setting == "" {
		t.Errorf("%s: no address setting opens port %d of probe %s", deployment, port, path)
		return
	}
	help := settings[setting]
	if regexp.MustCompile(regexp.QuoteMeta(path) + `([ ,;)]|$)`).MatchString(help) {
		return
	}
	hc, err := url.Parse(bin.healthcheckURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if hc.Path == path && strings.Contains(help, ":"+hc.Port()) {
		return
	}
	t.Errorf("%s: %s does not serve %s on the listener of %s (%q; its healthcheck checks %s)", deployment, bin.name, path, setting, help, hc)
}

// binary is one of the repository's binaries, built for the test.
type binary struct {
	name, path string
}

// binaries builds sluice-admin, sluice-sync and sluice-decide from the
// checkout, named as the image names them.
func binaries(t *testing.T) map[string]*binary {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*binary{}
	for cmd, name := range map[string]string{"admin": "sluice-admin", "sync": "sluice-sync", "decide": "sluice-decide"} {
		out[name] = &binary{name: name, path: filepath.Join(dir, name)}
		build := exec.Command("go", "build", "-o", out[name].path, "./cmd/"+cmd)
		build.Dir = root
		build.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, b)
		}
	}
	return out
}

var settingLine = regexp.MustCompile(`^  (?:-[a-z0-9-]+, )?(SLUICE_[A-Z0-9_]+)$`)

// settings runs the binary's -h (after args, its subcommand) and returns
// the help of each environment variable it reads.
func (b *binary) settings(t *testing.T, args []string) map[string]string {
	t.Helper()
	text := b.help(t, append(slices.Clone(args), "-h")...)
	out := map[string]string{}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if m := settingLine.FindStringSubmatch(l); m != nil && i+1 < len(lines) {
			out[m[1]] = strings.TrimSpace(lines[i+1])
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s %v -h lists no settings:\n%s", b.name, args, text)
	}
	return out
}

var defaultURL = regexp.MustCompile(`default "(http://[^"]+)"`)

func (b *binary) healthcheckURL(t *testing.T) string {
	t.Helper()
	text := b.help(t, "healthcheck", "-h")
	m := defaultURL.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s healthcheck -h names no default URL:\n%s", b.name, text)
	}
	return m[1]
}

func (b *binary) help(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(b.path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h exits 0 or 2 depending on the binary; the text is what counts
	return out.String()
}

// TestIstioExamplePointsAtTheDecisionService: the example's cluster is
// the one Istio makes for the decision service's gRPC port, as the chart
// names it when installed as its comment says.
func TestIstioExamplePointsAtTheDecisionService(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("examples", "istio-ratelimit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var filter struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			ConfigPatches []map[string]any `json:"configPatches"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &filter); err != nil || filter.Kind != "EnvoyFilter" || len(filter.Spec.ConfigPatches) != 2 {
		t.Fatalf("example: %v %+v", err, filter)
	}
	objs, err := renderAs(t, "sluice", "sluice", "mysql: {existingSecret: sluice-mysql}")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, o := range objs {
		if s, ok := o.value.(*corev1.Service); ok && s.Labels["app.kubernetes.io/component"] == "decide" {
			for _, p := range s.Spec.Ports {
				if p.Name == "grpc" {
					want = fmt.Sprintf("outbound|%d||%s.sluice.svc.cluster.local", p.Port, s.Name)
				}
			}
		}
	}
	if want == "" || !strings.Contains(string(data), "cluster_name: "+want) {
		t.Fatalf("the example does not name the cluster %q", want)
	}
}
