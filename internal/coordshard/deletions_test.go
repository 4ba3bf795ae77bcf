package coordshard

import (
	"maps"
	"testing"

	"github.com/weir-mq/weir/internal/controller"
)

// TestDeletions: the first image reports nothing; a topic missing from the next image is reported with
// its name, once; a topic created again under the name (a new id) reports the old id.
func TestDeletions(t *testing.T) {
	img := func(topics map[string]byte) *controller.Image {
		out := &controller.Image{Topics: map[string]*controller.Topic{}}
		for name, id := range topics {
			out.Topics[name] = &controller.Topic{Name: name, ID: controller.TopicID{id}}
		}
		return out
	}
	var d Deletions
	for i, step := range []struct {
		topics map[string]byte
		want   map[controller.TopicID]string
	}{
		{map[string]byte{"a": 1, "b": 2}, nil},
		{map[string]byte{"a": 1}, map[controller.TopicID]string{{2}: "b"}},
		{map[string]byte{"a": 1}, nil},
		{map[string]byte{"a": 3, "c": 4}, map[controller.TopicID]string{{1}: "a"}},
	} {
		if got := d.Next(img(step.topics)); !maps.Equal(got, step.want) {
			t.Fatalf("image %d: %v, want %v", i, got, step.want)
		}
	}
}
