package kubelet

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resolveEnv builds a container's environment as a kubelet does: the
// service variables for the API server, then envFrom, then env (later wins),
// with $(VAR) references expanded and valueFrom resolved (fieldRef,
// resourceFieldRef, configMapKeyRef, secretKeyRef).
func (k *Kubelet) resolveEnv(pod *corev1.Pod, c *corev1.Container, podIP string) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(name, v string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = v
	}
	if _, ok := k.imageCommands(c.Image); ok {
		set("PATH", ImageCommandsMountPath+"/bin:"+defaultPath)
	} else {
		set("PATH", defaultPath)
	}
	set("HOSTNAME", podHostname(pod))
	if uid, _, _ := runAs(pod, c); uid == nil || *uid == 0 {
		set("HOME", "/root")
	} else {
		set("HOME", "/")
	}
	if k.cfg.APIServerHost != "" {
		host, port := k.cfg.APIServerHost, strconv.Itoa(k.cfg.APIServerPort)
		set("KUBERNETES_SERVICE_HOST", host)
		set("KUBERNETES_SERVICE_PORT", port)
		set("KUBERNETES_SERVICE_PORT_HTTPS", port)
		set("KUBERNETES_PORT", "tcp://"+host+":"+port)
	}

	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := k.configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := k.secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for key, v := range s.Data {
				data[key] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for key := range data {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			set(from.Prefix+key, data[key])
		}
	}

	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, ok, err := k.valueFrom(pod, c, e.ValueFrom, podIP)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, name+"="+vars[name])
	}
	return out, nil
}

func optional(b *bool) bool { return b != nil && *b }

// valueFrom resolves one env source; ok is false for a missing optional key.
func (k *Kubelet) valueFrom(pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource, podIP string) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, src.FieldRef.FieldPath, podIP, k.cfg.Network.Gateway)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := resourceValue(pod, c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := k.configMaps.ConfigMaps(pod.Namespace).Get(ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: %w", ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if optional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configmap %q has no key %q", ref.Name, ref.Key)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := k.secrets.Secrets(pod.Namespace).Get(ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if optional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %q has no key %q", ref.Name, ref.Key)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// fieldValue is the downward API for env and volumes.
func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	if strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']") {
		return pod.Labels[path[len("metadata.labels['"):len(path)-2]], nil
	}
	if strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']") {
		return pod.Annotations[path[len("metadata.annotations['"):len(path)-2]], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	}
	return "", fmt.Errorf("unsupported field path %q", path)
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, key := range keys {
		fmt.Fprintf(&b, "%s=%q\n", key, m[key])
	}
	return b.String()
}

// resourceValue reads a container's request or limit, divided by the divisor
// and rounded up, as the downward API does.
func resourceValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		c = nil
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				c = &pod.Spec.Containers[i]
			}
		}
		if c == nil {
			return "", fmt.Errorf("no container %q", ref.ContainerName)
		}
	}
	var q resource.Quantity
	switch ref.Resource {
	case "limits.cpu":
		q = c.Resources.Limits[corev1.ResourceCPU]
	case "limits.memory":
		q = c.Resources.Limits[corev1.ResourceMemory]
	case "requests.cpu":
		q = c.Resources.Requests[corev1.ResourceCPU]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	default:
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	v := math.Ceil(q.AsApproximateFloat64() / divisor.AsApproximateFloat64())
	return strconv.FormatInt(int64(v), 10), nil
}

// expand replaces $(NAME) by earlier variables; $$ escapes.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteByte(s[i])
				continue
			}
			name := s[i+2 : i+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
