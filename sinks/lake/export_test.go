package lake

import (
	"os"

	"gocloud.dev/blob"
)

// SetSync replaces how the file:// bucket b's sinks sync files and
// folders.
func SetSync(b *blob.Bucket, sync func(*os.File) error) {
	localOf(b).sync = sync
}

// Footer is footer, for tests.
var Footer = footer
