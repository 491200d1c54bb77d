#!/usr/bin/env bash
# Generates the operator's RBAC from the +kubebuilder:rbac markers in controllers/ and copies
# the generated objects to every place that ships them, so that nothing generated is edited by
# hand (run by `make manifests`; `make verify` fails on drift):
#   manifests/rbac/role.yaml          controller-gen rbac
#   manifests/operator.yaml           the ClusterRole and Role between the BEGIN/END generated markers
#   chart/templates/clusterrole.yaml  the same ClusterRole and Role (the Role in the release namespace)
#   chart/files/crds/*.yaml           manifests/crds, rendered by chart/templates/crds.yaml
set -euo pipefail
cd "$(dirname "$0")/../.."

go tool controller-gen rbac:roleName=valkey-operator paths=./controllers/... output:rbac:artifacts:config=manifests/rbac
role=manifests/rbac/role.yaml

tmp=$(mktemp)
awk -v role="$role" '
  /^# --- BEGIN generated from manifests\/rbac\/role.yaml/ { print; while ((getline line < role) > 0) print line; skip = 1; next }
  /^# --- END generated/ { skip = 0 }
  !skip { print }
' manifests/operator.yaml >"$tmp"
grep -q '^# --- END generated' "$tmp" || { echo "sync-manifests: markers missing in manifests/operator.yaml" >&2; rm -f "$tmp"; exit 1; }
mv "$tmp" manifests/operator.yaml

# The Role (the leader-election Lease) lives in the operator's namespace: the release's in the chart.
{
  echo "# Generated from manifests/rbac/role.yaml (the +kubebuilder:rbac markers in controllers/) by"
  echo "# \`make manifests\`; do not edit."
  sed -e '1{/^---$/d}' -e 's/^  namespace: valkey-operator$/  namespace: {{ .Release.Namespace }}/' "$role"
} >chart/templates/clusterrole.yaml

rm -f chart/files/crds/*.yaml
mkdir -p chart/files/crds
cp manifests/crds/*.yaml chart/files/crds/
