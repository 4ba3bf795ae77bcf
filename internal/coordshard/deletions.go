package coordshard

import (
	"sync"

	"github.com/weir-mq/weir/internal/controller"
)

// Deletions follows the topics of the successive images a coordinator reconciles with and reports the
// topics an image dropped: deleted, since a topic id is never reused. A coordinator that starts
// after a deletion never sees it. Safe for concurrent use.
type Deletions struct {
	mu sync.Mutex
	// last is the topics of the last image, by id; nil before the first.
	last map[controller.TopicID]string
}

// Next returns the topics, id to name, that the image before img had and img has not, and keeps
// img's; nil on the first call and when there are none.
func (d *Deletions) Next(img *controller.Image) map[controller.TopicID]string {
	now := make(map[controller.TopicID]string, len(img.Topics))
	for name, t := range img.Topics {
		now[t.ID] = name
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var gone map[controller.TopicID]string
	for id, name := range d.last {
		if _, ok := now[id]; !ok {
			if gone == nil {
				gone = map[controller.TopicID]string{}
			}
			gone[id] = name
		}
	}
	d.last = now
	return gone
}
