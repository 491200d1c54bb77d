package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// volumeSet keeps a pod's volumes as directories under
// StateDir/pods/<namespace>_<name>_<uid>/volumes/<volume>, which the
// container's mount namespace bind-mounts at each mountPath.
//
// ConfigMap, Secret, downward API and projected volumes are written like the
// kubelet's atomic writer: the files live in a timestamped directory, the
// "..data" symlink points at it, and each top-level name is a symlink into
// "..data"; an update writes a new directory and renames a new "..data" over
// the old one, so a reader sees either all old or all new files. Mounts with
// subPath bind the file itself and, as on a real kubelet, see no updates.
type volumeSet struct {
	k *Kubelet
	p *podRuntime

	mu     sync.Mutex
	hashes map[string]string
	tokens map[string]token
}

type token struct {
	value   string
	refresh time.Time
}

type fileEntry struct {
	data []byte
	mode os.FileMode
}

func newVolumeSet(k *Kubelet, p *podRuntime) *volumeSet {
	return &volumeSet{k: k, p: p, hashes: map[string]string{}, tokens: map[string]token{}}
}

func (v *volumeSet) dir(pod *corev1.Pod, name string) string {
	return filepath.Join(v.k.podDir(pod), "volumes", name)
}

// sync brings every volume of the pod up to date.
func (v *volumeSet) sync() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	pod := v.p.podCopy()
	var fsGroup *int64
	if pod.Spec.SecurityContext != nil {
		fsGroup = pod.Spec.SecurityContext.FSGroup
	}
	var errs []error
	for _, vol := range pod.Spec.Volumes {
		dir := v.dir(pod, vol.Name)
		var (
			files map[string]fileEntry
			err   error
		)
		switch {
		case vol.EmptyDir != nil:
			err = ensureDir(dir, 0o777, fsGroup)
			if err == nil && fsGroup == nil {
				// MkdirAll obeys the umask; emptyDir is world-writable.
				err = os.Chmod(dir, 0o777)
			}
		case vol.HostPath != nil:
			if vol.HostPath.Type != nil && *vol.HostPath.Type == corev1.HostPathDirectoryOrCreate {
				err = os.MkdirAll(vol.HostPath.Path, 0o755)
			}
		case vol.ConfigMap != nil:
			files, err = v.configMapFiles(pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items,
				vol.ConfigMap.Optional, mode(vol.ConfigMap.DefaultMode))
		case vol.Secret != nil:
			files, err = v.secretFiles(pod.Namespace, vol.Secret.SecretName, vol.Secret.Items,
				vol.Secret.Optional, mode(vol.Secret.DefaultMode))
		case vol.DownwardAPI != nil:
			files, err = v.downwardFiles(pod, vol.DownwardAPI.Items, mode(vol.DownwardAPI.DefaultMode))
		case vol.Projected != nil:
			files, err = v.projectedFiles(pod, vol.Name, vol.Projected)
		default:
			err = fmt.Errorf("volume %q: only emptyDir, hostPath, configMap, secret, downwardAPI and projected volumes are supported", vol.Name)
		}
		if err == nil && files != nil {
			err = v.writeAtomic(vol.Name, dir, files, fsGroup)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
		}
	}
	return errors.Join(errs...)
}

// mountSource is the host path to bind at the mount's mountPath.
func (v *volumeSet) mountSource(m corev1.VolumeMount) (string, bool, error) {
	pod := v.p.podCopy()
	for _, vol := range pod.Spec.Volumes {
		if vol.Name != m.Name {
			continue
		}
		src, readOnly, isDir := v.dir(pod, vol.Name), true, false
		switch {
		case vol.EmptyDir != nil:
			readOnly, isDir = false, true
		case vol.HostPath != nil:
			src, readOnly, isDir = vol.HostPath.Path, false, true
		}
		if m.SubPathExpr != "" {
			return "", false, fmt.Errorf("mount %q: subPathExpr is not supported", m.Name)
		}
		if m.SubPath != "" {
			if strings.Contains(m.SubPath, "..") || filepath.IsAbs(m.SubPath) {
				return "", false, fmt.Errorf("mount %q: bad subPath %q", m.Name, m.SubPath)
			}
			src = filepath.Join(src, m.SubPath)
			if isDir {
				if err := os.MkdirAll(src, 0o777); err != nil {
					return "", false, err
				}
			} else {
				// Bind the file itself, not the symlink into ..data.
				real, err := filepath.EvalSymlinks(src)
				if err != nil {
					return "", false, fmt.Errorf("mount %q: subPath %q: %w", m.Name, m.SubPath, err)
				}
				src = real
			}
		}
		return src, readOnly, nil
	}
	return "", false, fmt.Errorf("mount %q: no such volume", m.Name)
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func itemMode(def os.FileMode, m *int32) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}

func (v *volumeSet) configMapFiles(ns, name string, items []corev1.KeyToPath, opt *bool, def os.FileMode) (map[string]fileEntry, error) {
	cm, err := v.k.configMaps.ConfigMaps(ns).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional(opt) {
			return map[string]fileEntry{}, nil
		}
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for key, val := range cm.Data {
		data[key] = []byte(val)
	}
	for key, val := range cm.BinaryData {
		data[key] = val
	}
	return keyFiles("configmap "+name, data, items, opt, def)
}

func (v *volumeSet) secretFiles(ns, name string, items []corev1.KeyToPath, opt *bool, def os.FileMode) (map[string]fileEntry, error) {
	s, err := v.k.secrets.Secrets(ns).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional(opt) {
			return map[string]fileEntry{}, nil
		}
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return keyFiles("secret "+name, s.Data, items, opt, def)
}

func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, opt *bool, def os.FileMode) (map[string]fileEntry, error) {
	files := map[string]fileEntry{}
	if len(items) == 0 {
		for key, val := range data {
			files[key] = fileEntry{data: val, mode: def}
		}
		return files, nil
	}
	for _, it := range items {
		val, ok := data[it.Key]
		if !ok {
			if optional(opt) {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files[it.Path] = fileEntry{data: val, mode: itemMode(def, it.Mode)}
	}
	return files, nil
}

func (v *volumeSet) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def os.FileMode) (map[string]fileEntry, error) {
	files := map[string]fileEntry{}
	for _, it := range items {
		var (
			val string
			err error
		)
		switch {
		case it.FieldRef != nil:
			val, err = fieldValue(pod, it.FieldRef.FieldPath, v.p.podIP(), v.k.cfg.Network.Gateway)
		case it.ResourceFieldRef != nil:
			c := &corev1.Container{}
			if len(pod.Spec.Containers) > 0 {
				c = &pod.Spec.Containers[0]
			}
			val, err = resourceValue(pod, c, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, fmt.Errorf("downward api %q: %w", it.Path, err)
		}
		files[it.Path] = fileEntry{data: []byte(val), mode: itemMode(def, it.Mode)}
	}
	return files, nil
}

func (v *volumeSet) projectedFiles(pod *corev1.Pod, volName string, pr *corev1.ProjectedVolumeSource) (map[string]fileEntry, error) {
	def := mode(pr.DefaultMode)
	files := map[string]fileEntry{}
	for i, src := range pr.Sources {
		var (
			part map[string]fileEntry
			err  error
		)
		switch {
		case src.ConfigMap != nil:
			part, err = v.configMapFiles(pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, def)
		case src.Secret != nil:
			part, err = v.secretFiles(pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, def)
		case src.DownwardAPI != nil:
			part, err = v.downwardFiles(pod, src.DownwardAPI.Items, def)
		case src.ServiceAccountToken != nil:
			var tok string
			tok, err = v.token(pod, fmt.Sprintf("%s/%d", volName, i), src.ServiceAccountToken)
			part = map[string]fileEntry{src.ServiceAccountToken.Path: {data: []byte(tok), mode: def}}
		default:
			err = errors.New("unsupported projected source")
		}
		if err != nil {
			return nil, err
		}
		for path, f := range part {
			files[path] = f
		}
	}
	return files, nil
}

// token is a bound service account token from the TokenRequest API, renewed
// after 80% of its lifetime as the kubelet does.
func (v *volumeSet) token(pod *corev1.Pod, key string, src *corev1.ServiceAccountTokenProjection) (string, error) {
	if t, ok := v.tokens[key]; ok && time.Now().Before(t.refresh) {
		return t.value, nil
	}
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	ctx, cancel := context.WithTimeout(v.p.ctx, 10*time.Second)
	defer cancel()
	res, err := v.k.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %q: %w", sa, err)
	}
	life := time.Until(res.Status.ExpirationTimestamp.Time)
	v.tokens[key] = token{value: res.Status.Token, refresh: time.Now().Add(life * 8 / 10)}
	return res.Status.Token, nil
}

// writeAtomic makes dir hold exactly files, swapping "..data" at once.
func (v *volumeSet) writeAtomic(volName, dir string, files map[string]fileEntry, fsGroup *int64) error {
	paths := make([]string, 0, len(files))
	for path := range files {
		if strings.HasPrefix(path, "..") || filepath.IsAbs(path) || strings.Contains(path, "/../") {
			return fmt.Errorf("bad file path %q", path)
		}
		paths = append(paths, path)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, path := range paths {
		f := files[path]
		_, _ = fmt.Fprintf(h, "%s\x00%o\x00%d\x00", path, f.mode, len(f.data))
		h.Write(f.data)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if v.hashes[volName] == sum {
		if _, err := os.Lstat(filepath.Join(dir, "..data")); err == nil {
			return nil
		}
	}
	if err := ensureDir(dir, 0o755, fsGroup); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tsName := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	ts := filepath.Join(dir, tsName)
	if err := ensureDir(ts, 0o755, fsGroup); err != nil {
		return err
	}
	for _, path := range paths {
		f := files[path]
		full := filepath.Join(ts, path)
		if err := ensureDir(filepath.Dir(full), 0o755, fsGroup); err != nil {
			return err
		}
		m := f.mode
		if fsGroup != nil {
			m |= 0o440
		}
		if err := os.WriteFile(full, f.data, m); err != nil {
			return err
		}
		if err := os.Chmod(full, m); err != nil {
			return err
		}
		if fsGroup != nil {
			if err := os.Chown(full, 0, int(*fsGroup)); err != nil {
				return err
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(tsName, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	top := map[string]bool{}
	for _, path := range paths {
		top[strings.SplitN(path, "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join("..data", name) {
			continue
		}
		_ = os.RemoveAll(link)
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" && old != tsName {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	v.hashes[volName] = sum
	return nil
}

// ensureDir creates dir with perm; with an fsGroup the directory belongs to
// that group and is setgid, so the pod's user can read what is inside.
func ensureDir(dir string, perm os.FileMode, fsGroup *int64) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	if fsGroup != nil {
		if err := os.Chown(dir, 0, int(*fsGroup)); err != nil {
			return err
		}
		return os.Chmod(dir, perm|os.ModeSetgid|0o070)
	}
	return nil
}

// resyncVolumes refreshes the volumes until the pod stops.
func (p *podRuntime) resyncVolumes() {
	t := time.NewTicker(volumeResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		if err := p.vols.sync(); err != nil {
			klog.V(2).InfoS("volume resync failed", "pod", p.key, "err", err)
		}
	}
}
