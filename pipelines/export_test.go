package pipelines

// WithBatchFault runs f before the batch stage takes the k-th window of a
// block, for tests that make the batch stage panic.
func WithBatchFault(f func(k int)) Option { return func(o *options) { o.batchFault = f } }
