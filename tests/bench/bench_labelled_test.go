package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
)

// labelledKinds is how many objects of each kind a team labels with its cluster's label, 3 000
// in all, each carrying labelledAnnotation bytes of annotation (a ConfigMap or a Secret is watched
// by its metadata, which keeps annotations; the other kinds are cached whole).
var labelledKinds = []struct {
	kind string
	n    int
}{{"ConfigMap", 1000}, {"Secret", 800}, {"Pod", 600}, {"Service", 300}, {"PodDisruptionBudget", 300}}

const labelledAnnotation = 64 << 10

// BenchmarkLabelledObjects: a team labels 3 000 objects of its namespace with its cluster's
// label (ConfigMaps, Secrets, pods that never start, headless Services, budgets that select
// nothing), each with 64 KiB of annotation: 192 MB in the API server. The operator caches only
// what it reads of them and lists one page of pods per pass, so its memory must not follow (goal:
// at most 30 MB). Reported: its RSS with the Ready cluster before the objects are created and 60 s
// after (two ticks: every pass has listed pods and budgets meanwhile), and the growth (MB).
// Reported, never asserted.
func BenchmarkLabelledObjects(b *testing.B) {
	if labelledMeasured == nil {
		labelledMeasured = measureLabelledObjects(b)
	}
	for unit, v := range labelledMeasured {
		b.ReportMetric(v, unit)
	}
	for range b.N {
		// One measurement per run of the package: the figures above are the benchmark.
	}
}

var labelledMeasured map[string]float64

func measureLabelledObjects(b *testing.B) map[string]float64 {
	ctx := context.Background()
	const ns = "labelled"
	vc := benchCluster(b, ns, 1, 0)
	harness.WaitReady(b, vc, 1, 0, nil, harness.FormTimeout)
	time.Sleep(10 * time.Second) // the operator's steady state: caches synced, a few passes made
	before := procRSS(b, harness.Op.Pid())
	blob := strings.Repeat("x", labelledAnnotation)
	meta := func(kind string, i int) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("team-%s-%04d", strings.ToLower(kind), i),
			Labels: map[string]string{v1.LabelCluster: vc.Name}, Annotations: map[string]string{"team.example/blob": blob}}
	}
	build := func(kind string, i int) client.Object {
		m := meta(kind, i)
		switch kind {
		case "ConfigMap":
			return &corev1.ConfigMap{ObjectMeta: m, Data: map[string]string{"k": "v"}}
		case "Secret":
			return &corev1.Secret{ObjectMeta: m, Data: map[string][]byte{"k": []byte("v")}}
		case "Pod":
			// Held by a scheduling gate: never scheduled, never started.
			return &corev1.Pod{ObjectMeta: m, Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "team.example/hold"}},
				Containers: []corev1.Container{{Name: "c", Image: "team.example/app:1"}}}}
		case "Service":
			return &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
				Selector: map[string]string{"team.example/app": "none"}, Ports: []corev1.ServicePort{{Port: 80}}}}
		default:
			return &policyv1.PodDisruptionBudget{ObjectMeta: m, Spec: policyv1.PodDisruptionBudgetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team.example/app": "none"}}}}
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan client.Object)
	for range 16 {
		wg.Go(func() {
			for o := range work {
				if err := harness.K8s.Create(ctx, o); err != nil && !isAlreadyExists(err) {
					b.Error(err)
				}
			}
		})
	}
	total := 0
	for _, k := range labelledKinds {
		for i := range k.n {
			work <- build(k.kind, i)
			total++
		}
	}
	close(work)
	wg.Wait()
	created := time.Since(start)
	peak := before
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		peak = max(peak, procRSS(b, harness.Op.Pid()))
	}
	after := procRSS(b, harness.Op.Pid())
	b.Logf("%d labelled objects of %d KiB of annotation created in %s; operator RSS %.1f MB before, %.1f MB after (peak %.1f MB); load %s",
		total, labelledAnnotation>>10, created.Round(time.Second), before, after, peak, loadAvg())
	if cur := harness.CurrentCluster(b, vc); cur.Status.State != v1.StateActive {
		b.Errorf("the cluster is %s after the objects were created, want Active", cur.Status.State)
	}
	_ = harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return map[string]float64{"MB-RSS-before": before, "MB-RSS-after": after, "MB-RSS-peak": peak, "MB-RSS-growth": after - before}
}
