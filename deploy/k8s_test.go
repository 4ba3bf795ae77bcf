package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// k8sObject is the part of a Kubernetes object the tests read (kubeconform and its schemas are not to
// be had here).
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ClusterIP                string    `yaml:"clusterIP"`
		PublishNotReadyAddresses bool      `yaml:"publishNotReadyAddresses"`
		Selector                 yaml.Node `yaml:"selector"`
		Ports                    []k8sPort `yaml:"ports"`
		ServiceName              string    `yaml:"serviceName"`
		Replicas                 int       `yaml:"replicas"`
		PodManagementPolicy      string    `yaml:"podManagementPolicy"`
		UpdateStrategy           struct {
			Type string `yaml:"type"`
		} `yaml:"updateStrategy"`
		MaxUnavailable       int            `yaml:"maxUnavailable"`
		Template             k8sPodTemplate `yaml:"template"`
		VolumeClaimTemplates []k8sClaim     `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type k8sPort struct {
	Name          string `yaml:"name"`
	Port          int    `yaml:"port"`
	ContainerPort int    `yaml:"containerPort"`
}

type k8sPodTemplate struct {
	Metadata struct {
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
			RunAsUser    int  `yaml:"runAsUser"`
		} `yaml:"securityContext"`
		Containers []k8sContainer `yaml:"containers"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports          []k8sPort  `yaml:"ports"`
	ReadinessProbe k8sProbe   `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe   `yaml:"livenessProbe"`
	VolumeMounts   []k8sMount `yaml:"volumeMounts"`
}

type k8sMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	TCPSocket *struct {
		Port string `yaml:"port"`
	} `yaml:"tcpSocket"`
}

type k8sClaim struct {
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Resources struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
	} `yaml:"spec"`
}

func readManifests(t *testing.T) map[string]k8sObject {
	t.Helper()
	raw, err := os.ReadFile("k8s/weir.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("k8s/weir.yaml: %v", err)
		}
		if _, dup := objs[o.Kind]; dup {
			t.Fatalf("k8s/weir.yaml has two %ss", o.Kind)
		}
		objs[o.Kind] = o
	}
}

// TestKubernetesManifests checks the StatefulSet and its companions for what the issue names: a
// headless Service that publishes pods before they are ready, stable node ids from the pod ordinal,
// controller voters that are the pods' DNS names, a PersistentVolumeClaim at the data directory,
// readiness on /readyz and a liveness probe, rolling restarts one pod at a time, a
// PodDisruptionBudget of one, a grace period longer than the drain and a non-root user.
func TestKubernetesManifests(t *testing.T) {
	objs := readManifests(t)
	svc, sts, pdb := objs["Service"], objs["StatefulSet"], objs["PodDisruptionBudget"]
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service: clusterIP %q, publishNotReadyAddresses %v: want a headless Service publishing unready pods",
			svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	labels := sts.Spec.Template.Metadata.Labels
	var selector map[string]string
	if err := svc.Spec.Selector.Decode(&selector); err != nil || !matches(selector, labels) {
		t.Errorf("Service selector %v does not select the pods %v (%v)", selector, labels, err)
	}
	if !matches(selectorLabels(t, pdb), labels) {
		t.Errorf("PodDisruptionBudget does not select the pods %v", labels)
	}
	if pdb.Spec.MaxUnavailable != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %d, want 1: two of three voters keep the quorum", pdb.Spec.MaxUnavailable)
	}
	if sts.Spec.ServiceName != svc.Metadata.Name || sts.Spec.Replicas != 3 || sts.Spec.PodManagementPolicy != "Parallel" ||
		sts.Spec.UpdateStrategy.Type != "RollingUpdate" {
		t.Errorf("StatefulSet: serviceName %q, replicas %d, podManagementPolicy %q, updateStrategy %q: want the Service's, 3, Parallel, RollingUpdate",
			sts.Spec.ServiceName, sts.Spec.Replicas, sts.Spec.PodManagementPolicy, sts.Spec.UpdateStrategy.Type)
	}
	pod := sts.Spec.Template.Spec
	if pod.TerminationGracePeriodSeconds <= 30 || !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("pod: grace %ds, runAsNonRoot %v, runAsUser %d: want more than the 30s drain and a non-root user",
			pod.TerminationGracePeriodSeconds, pod.SecurityContext.RunAsNonRoot, pod.SecurityContext.RunAsUser)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want weir alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	env, from := map[string]string{}, map[string]string{}
	for _, e := range c.Env {
		env[e.Name], from[e.Name] = e.Value, e.ValueFrom.FieldRef.FieldPath
	}
	if from["WEIR_NODE_ID"] != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("WEIR_NODE_ID comes from %q, want the pod ordinal (the pod-index label)", from["WEIR_NODE_ID"])
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	var want []string
	for i := range sts.Spec.Replicas {
		want = append(want, fmt.Sprintf("%d@%s-%d.%s:%d", i, sts.Metadata.Name, i, svc.Metadata.Name, ports["controller"]))
	}
	if got := env["WEIR_CONTROLLER_VOTERS"]; got != strings.Join(want, ",") {
		t.Errorf("WEIR_CONTROLLER_VOTERS %q, want every pod's DNS name: %q", got, strings.Join(want, ","))
	}
	if got, want := env["WEIR_ADVERTISED_KAFKA_ADDR"], fmt.Sprintf("$(POD_NAME).%s:%d", svc.Metadata.Name, ports["kafka"]); got != want || from["POD_NAME"] != "metadata.name" {
		t.Errorf("WEIR_ADVERTISED_KAFKA_ADDR %q (POD_NAME from %q), want %q", got, from["POD_NAME"], want)
	}
	for name, addr := range map[string]string{"kafka": env["WEIR_KAFKA_ADDR"], "controller": env["WEIR_CONTROLLER_ADDR"], "http": env["WEIR_HTTP_ADDR"]} {
		if _, port, _ := net.SplitHostPort(addr); port != strconv.Itoa(ports[name]) || ports[name] == 0 {
			t.Errorf("the %s listener %q is not on the container port %d", name, addr, ports[name])
		}
	}
	if p := c.ReadinessProbe.HTTPGet; p == nil || p.Path != "/readyz" || p.Port != "http" {
		t.Errorf("readinessProbe %+v, want GET /readyz on the http port", c.ReadinessProbe)
	}
	if c.LivenessProbe.HTTPGet == nil && c.LivenessProbe.TCPSocket == nil {
		t.Error("no livenessProbe")
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests["storage"] == "" {
		t.Fatalf("volumeClaimTemplates %+v, want one claim with a storage request", sts.Spec.VolumeClaimTemplates)
	}
	claim := sts.Spec.VolumeClaimTemplates[0].Metadata.Name
	if !slices.Contains(c.VolumeMounts, k8sMount{Name: claim, MountPath: env["WEIR_DATA_DIR"]}) {
		t.Errorf("the claim %q is not mounted at WEIR_DATA_DIR %q", claim, env["WEIR_DATA_DIR"])
	}
}

// selectorLabels reads a selector written as matchLabels under spec.selector.
func selectorLabels(t *testing.T, o k8sObject) map[string]string {
	t.Helper()
	var s struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if err := o.Spec.Selector.Decode(&s); err != nil {
		t.Fatalf("%s selector: %v", o.Kind, err)
	}
	return s.MatchLabels
}

// matches reports whether a non-empty selector selects labels.
func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// metricName matches the weir metric families in a PromQL expression.
var metricName = regexp.MustCompile(`\bweir_[a-z_]+`)

// TestGrafanaDashboard checks that the dashboard is JSON Grafana reads (panels with ids, titles and
// Prometheus targets) and that every metric it queries is one docs/metrics.md documents.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/weir-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("weir-dashboard.json: %v", err)
	}
	documented, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q: want a unique id, a title and targets", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q queries no weir metric: %s", p.Title, target.Expr)
			}
			for _, name := range names {
				family := strings.TrimSuffix(name, "_bucket")
				if !bytes.Contains(documented, []byte("`"+family+"`")) {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not document", p.Title, name)
				}
			}
		}
	}
}

// TestPrometheusScrapeConfig checks that Prometheus scrapes /metrics of the Kubernetes pods (by the
// StatefulSet's pod label and its http port) and of every compose node at its HTTP address.
func TestPrometheusScrapeConfig(t *testing.T) {
	raw, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			RelabelConfigs []struct {
				SourceLabels []string `yaml:"source_labels"`
				Regex        string   `yaml:"regex"`
				Action       string   `yaml:"action"`
			} `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	labels := readManifests(t)["StatefulSet"].Spec.Template.Metadata.Labels
	var k8s, compose bool
	for _, sc := range cfg.ScrapeConfigs {
		if sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %q, want /metrics", sc.JobName, sc.MetricsPath)
		}
		for _, r := range sc.RelabelConfigs {
			if r.Action == "keep" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_label_app_kubernetes_io_name"}) &&
				r.Regex == labels["app.kubernetes.io/name"] {
				k8s = true
			}
		}
		var targets []string
		for _, s := range sc.StaticConfigs {
			targets = append(targets, s.Targets...)
		}
		if len(targets) > 0 {
			var want []string
			for name, s := range readCompose(t).Services {
				_, port, _ := net.SplitHostPort(s.Environment["WEIR_HTTP_ADDR"])
				want = append(want, name+":"+port)
			}
			slices.Sort(want)
			slices.Sort(targets)
			compose = slices.Equal(targets, want)
			if !compose {
				t.Errorf("job %s targets %q, want the compose nodes' HTTP addresses %q", sc.JobName, targets, want)
			}
		}
	}
	if !k8s || !compose {
		t.Errorf("scrape configs: the Kubernetes pods scraped %v, the compose nodes %v; want both", k8s, compose)
	}
}
