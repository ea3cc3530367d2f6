package cluster

import (
	"context"
	"strings"
)

// Images lists the image names in the CRI namespace.
func (c *Cluster) Images(ctx context.Context) ([]string, error) {
	out, err := c.ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}
