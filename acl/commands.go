package acl

import (
	_ "embed"
	"fmt"
	"strings"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// knownCommandsFile lists Valkey's commands (see the file's header).
//
//go:embed valkey_commands.txt
var knownCommandsFile string

// knownCommands is knownCommandsFile as a set: command and command|subcommand, lowercase.
var knownCommands = func() map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(knownCommandsFile, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out[l] = true
		}
	}
	return out
}()

// CheckCommands is the problem with a role that names a command Valkey does not have ("" when
// it names none): a node refuses an ACL file with an unknown command, and a new node aborts at start on one, so every pod replaced
// after the edit would fail (found by a break test). Module commands are not known here yet.
func CheckCommands(role string, spec v1.ValkeyRoleSpec) string {
	for _, c := range spec.Commands {
		name := strings.ToLower(c.Name)
		if c.Subcommand != "" {
			name += "|" + strings.ToLower(c.Subcommand)
		}
		if !knownCommands[name] {
			return fmt.Sprintf("ValkeyRole %q: unknown command %q (neither Valkey 8.0 nor 9.1 has it)", role, name)
		}
	}
	return ""
}
