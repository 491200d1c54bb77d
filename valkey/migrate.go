package valkey

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The commands of a slot migration, in the order valkey-cli runs them:
// SETSLOT IMPORTING on the target, SETSLOT MIGRATING on the source, then
// GETKEYSINSLOT and MIGRATE on the source until the slot is empty, then
// SETSLOT NODE target on the target, the source and every other primary.
// Each step can be repeated, so a migration interrupted at any point is
// resumed by running the remaining steps again.

// SetSlotImporting sends CLUSTER SETSLOT slot IMPORTING sourceID to the
// target of a migration.
func (c *Client) SetSlotImporting(ctx context.Context, slot int, sourceID string) error {
	op := fmt.Sprintf("cluster setslot %d importing %s", slot, sourceID)
	return c.doOK(ctx, op, c.c.B().ClusterSetslot().Slot(int64(slot)).Importing().NodeId(sourceID).Build())
}

// SetSlotMigrating sends CLUSTER SETSLOT slot MIGRATING targetID to the
// source of a migration.
func (c *Client) SetSlotMigrating(ctx context.Context, slot int, targetID string) error {
	op := fmt.Sprintf("cluster setslot %d migrating %s", slot, targetID)
	return c.doOK(ctx, op, c.c.B().ClusterSetslot().Slot(int64(slot)).Migrating().NodeId(targetID).Build())
}

// SetSlotNode sends CLUSTER SETSLOT slot NODE nodeID, which assigns the
// slot and closes any migration of it on this node. Valkey refuses it on
// the source while the slot still holds keys.
func (c *Client) SetSlotNode(ctx context.Context, slot int, nodeID string) error {
	op := fmt.Sprintf("cluster setslot %d node %s", slot, nodeID)
	return c.doOK(ctx, op, c.c.B().ClusterSetslot().Slot(int64(slot)).Node().NodeId(nodeID).Build())
}

// SetSlotStable sends CLUSTER SETSLOT slot STABLE, dropping this node's
// MIGRATING or IMPORTING state for the slot without moving ownership.
func (c *Client) SetSlotStable(ctx context.Context, slot int) error {
	op := fmt.Sprintf("cluster setslot %d stable", slot)
	return c.doOK(ctx, op, c.c.B().ClusterSetslot().Slot(int64(slot)).Stable().Build())
}

// GetKeysInSlot sends CLUSTER GETKEYSINSLOT slot count and returns up to
// count key names of the slot held by this node.
func (c *Client) GetKeysInSlot(ctx context.Context, slot, count int) ([]string, error) {
	op := fmt.Sprintf("cluster getkeysinslot %d", slot)
	keys, err := c.do(ctx, c.c.B().ClusterGetkeysinslot().Slot(int64(slot)).Count(int64(count)).Build()).AsStrSlice()
	if err != nil {
		return nil, c.wrap(op, err)
	}
	return keys, nil
}

// MigrateKeys sends MIGRATE ip port "" 0 timeout [REPLACE] [AUTH2 user
// password] KEYS key..., moving keys from this node to the node at
// ip:port, authenticating there with this client's own credentials (the
// operator's user exists on every node). Keys already gone are skipped by
// Valkey (NOKEY is not an error). Without replace, a key that already
// exists on the target fails the call with BUSYKEY; with replace, the
// source's copy wins, which is right when resuming an interrupted
// migration whose source is still authoritative for the slot.
func (c *Client) MigrateKeys(ctx context.Context, ip string, port int, keys []string, timeout time.Duration, replace bool) error {
	if len(keys) == 0 {
		return nil
	}
	op := fmt.Sprintf("migrate %d keys to %s", len(keys), joinHostPort(ip, port))
	t := c.c.B().Migrate().Host(ip).Port(int64(port)).Key("").DestinationDb(0).Timeout(timeout.Milliseconds())
	switch {
	case replace && c.password != "" && c.username != "":
		return c.doOK(ctx, op, t.Replace().Auth2(c.username, c.password).Keys(keys...).Build())
	case replace && c.password != "":
		return c.doOK(ctx, op, t.Replace().Auth(c.password).Keys(keys...).Build())
	case replace:
		return c.doOK(ctx, op, t.Replace().Keys(keys...).Build())
	case c.password != "" && c.username != "":
		return c.doOK(ctx, op, t.Auth2(c.username, c.password).Keys(keys...).Build())
	case c.password != "":
		return c.doOK(ctx, op, t.Auth(c.password).Keys(keys...).Build())
	default:
		return c.doOK(ctx, op, t.Keys(keys...).Build())
	}
}

// MigrateSlots starts CLUSTER MIGRATESLOTS (Valkey 9.0 and later) on this node, the source: an
// atomic migration of ranges, keys included, to the primary targetID, run by Valkey in the
// background. Its progress is in SlotMigrations.
func (c *Client) MigrateSlots(ctx context.Context, ranges SlotRanges, targetID string) error {
	args := []string{"SLOTSRANGE"}
	for _, r := range ranges {
		args = append(args, strconv.Itoa(r.Start), strconv.Itoa(r.End))
	}
	args = append(args, "NODE", targetID)
	return c.doOK(ctx, "cluster migrateslots", c.c.B().Arbitrary("CLUSTER", "MIGRATESLOTS").Args(args...).Build())
}

// SlotMigration9 is one entry of CLUSTER GETSLOTMIGRATIONS: an atomic slot migration this node
// takes part in, newest first.
type SlotMigration9 struct {
	Name, Operation, SlotRanges, TargetNode, SourceNode, State, Message string
}

// Terminal reports whether the migration ended (success, failed or cancelled).
func (m SlotMigration9) Terminal() bool {
	switch m.State {
	case "success", "failed", "cancelled", "canceled":
		return true
	}
	return false
}

// SlotMigrations sends CLUSTER GETSLOTMIGRATIONS (Valkey 9.0 and later).
func (c *Client) SlotMigrations(ctx context.Context) ([]SlotMigration9, error) {
	entries, err := c.do(ctx, c.c.B().Arbitrary("CLUSTER", "GETSLOTMIGRATIONS").Build()).ToArray()
	if err != nil {
		return nil, c.wrap("cluster getslotmigrations", err)
	}
	var out []SlotMigration9
	for _, e := range entries {
		kv, err := e.AsStrMap()
		if err != nil {
			return nil, c.wrap("cluster getslotmigrations", err)
		}
		out = append(out, SlotMigration9{Name: kv["name"], Operation: kv["operation"], SlotRanges: kv["slot_ranges"],
			TargetNode: kv["target_node"], SourceNode: kv["source_node"], State: kv["state"], Message: kv["message"]})
	}
	return out, nil
}

// FormatRanges prints ranges as CLUSTER GETSLOTMIGRATIONS does: "0-10 20-30".
func FormatRanges(ranges SlotRanges) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
	}
	return strings.Join(parts, " ")
}

// Version returns valkey_version from INFO server.
func (c *Client) Version(ctx context.Context) (string, error) {
	info, err := c.Info(ctx, "server")
	if err != nil {
		return "", err
	}
	return info["valkey_version"], nil
}
