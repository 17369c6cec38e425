package zklock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
)

// DefaultEnsembleNode is the node whose creation names the data of a ZooKeeper ensemble
// (Options.EnsembleNode).
const DefaultEnsembleNode = "/seckill/ensemble"

// ensembleID returns the identity of the data the Client's session lives on: the czxid and ctime
// of the ensemble node, and a digest of its content (a GUID written by whoever created it), made
// by this call if the node is missing.
//
// Why: a token is the czxid of a lock node, and czxids count from the ensemble's data. An
// ensemble whose data was wiped (a new cluster, a lost disk) counts from zero again, so its
// tokens are below the fence MySQL kept from the old data, and every holder would be refused
// until an admin reset. A fresh data set has no ensemble node: the first acquisition creates
// one, with a new czxid, ctime and GUID, hence a new identity, and the storage that keeps the
// fence can tell that the token comes from other data (lock.Issued). Deleting the node (an
// operator after restoring a backup, whose czxids may repeat) makes the next acquisition create
// a new identity too.
func (c *Client) ensembleID(ctx context.Context) (string, error) {
	for range 3 {
		var (
			data []byte
			stat *zk.Stat
		)
		err := c.retry(ctx, func() (err error) {
			data, stat, err = c.conn.Get(c.ensembleNode)
			return err
		})
		if err == nil {
			sum := sha256.Sum256(data)
			return fmt.Sprintf("zk:%x:%d:%s", stat.Czxid, stat.Ctime, hex.EncodeToString(sum[:8])), nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return "", fmt.Errorf("read %s: %w", c.ensembleNode, err)
		}
		if err := c.createEnsembleNode(ctx); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("read %s: deleted again each time it was created", c.ensembleNode)
}

// createEnsembleNode creates the ensemble node with a GUID of its own as content. Racing
// creators are fine: one wins and every one reads the winner's node.
func (c *Client) createEnsembleNode(ctx context.Context) error {
	if dir := path.Dir(c.ensembleNode); dir != "/" {
		if err := c.ensurePath(ctx, dir); err != nil {
			return err
		}
	}
	guid, err := newGUID()
	if err != nil {
		return err
	}
	err = c.retry(ctx, func() error {
		_, err := c.conn.Create(c.ensembleNode, []byte(guid), zk.FlagPersistent, c.acl)
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", c.ensembleNode, err)
	}
	return nil
}

// identRead is the outcome of an ensembleID call made beside an acquisition's other reads.
type identRead struct {
	id  string
	err error
}

// readIdentity starts ensembleID on a goroutine of the Client and returns where its outcome
// arrives (buffered: nobody needs to wait for it).
func (c *Client) readIdentity(ctx context.Context) (<-chan identRead, bool) {
	ch := make(chan identRead, 1)
	ok := c.goOwned(func() {
		id, err := c.ensembleID(ctx)
		ch <- identRead{id, err}
	})
	return ch, ok
}

// validPath accepts an absolute ZooKeeper path without a trailing slash or an empty element.
func validPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasSuffix(p, "/") && !strings.Contains(p, "//")
}
