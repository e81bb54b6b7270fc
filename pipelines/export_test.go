package pipelines

// WithBatchFault runs f before the batch stage takes each window, for
// tests that make the batch stage panic.
func WithBatchFault(f func()) Option { return func(o *options) { o.batchFault = f } }
