package controllers

import (
	"reflect"
	"testing"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// The names checked against the nodes: each category and command (command|subcommand) of the
// roles the bindings use, once, without case, all left out; roles nobody binds are not asked.
func TestUsedRoleNames(t *testing.T) {
	users := &resolvedACL{
		bindings: []v1.ACLBinding{
			{Username: "a", Permissions: []v1.ACLPermission{{RoleRef: "json"}, {RoleRef: "rw"}}},
			{Username: "b", Permissions: []v1.ACLPermission{{RoleRef: "rw"}}},
		},
		roles: map[string]v1.ValkeyRoleSpec{
			"json": {Categories: []v1.CategoryRule{{Name: "json"}, {Name: "ALL"}, {Name: "read"}}},
			"rw": {Categories: []v1.CategoryRule{{Name: "Read"}}, Commands: []v1.CommandRule{
				{Name: "cluster", Subcommand: "info"}, {Name: "flushall"}, {Name: "FLUSHALL"}}},
			"unused": {Categories: []v1.CategoryRule{{Name: "bloom"}}},
		},
	}
	want := []roleName{
		{"json", "category", "json"}, {"json", "category", "read"},
		{"rw", "command", "cluster|info"}, {"rw", "command", "flushall"},
	}
	if got := usedRoleNames(users); !reflect.DeepEqual(got, want) {
		t.Errorf("names %+v, want %+v", got, want)
	}
	if usedRoleNames(nil) != nil {
		t.Error("names without bindings")
	}
}
