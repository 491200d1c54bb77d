package main

import (
	"context"

	"github.com/gomomento/valkey-operator/tests/localcluster"
)

// demo runs the operator against c and applies the sample ValkeyCluster.
func demo(ctx context.Context, c *localcluster.Cluster) error {
	return nil
}
