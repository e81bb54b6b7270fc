package pipelines

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cdclake/cdclake/config"
	"github.com/cdclake/cdclake/handlers/decode"
	"github.com/cdclake/cdclake/handlers/decode/debezium"
	"github.com/cdclake/cdclake/handlers/decode/goldengate"
)

// newDecoders builds one decoder of every wire format cdclake reads, in
// auto-detection order, with their options from the source config. This is
// the one place that lists the formats: a new format is a decoder package
// (passing decode/decodetest) and a line here.
//
// Every call returns new decoders: each pipeline worker has its own.
func newDecoders(src *config.Source) ([]decode.Decoder, error) {
	var errs []error
	var dbz debezium.Options
	errs = setOptions(errs, "source.debezium", src.Debezium, dbz.Set)
	var ds goldengate.Options
	errs = setOptions(errs, "source.goldengate", src.GoldenGate, ds.Set)
	var bd goldengate.BigDataOptions
	errs = setOptions(errs, "source.goldengate_bigdata", src.GoldenGateBigData, bd.Set)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d1, err1 := debezium.New(dbz)
	d2, err2 := goldengate.NewDataStreams(ds)
	d3, err3 := goldengate.NewBigData(bd)
	if err := errors.Join(wrapKey("source.debezium", err1), wrapKey("source.goldengate", err2),
		wrapKey("source.goldengate_bigdata", err3)); err != nil {
		return nil, err
	}
	return []decode.Decoder{d1, d2, d3}, nil
}

// setOptions applies the options of one config section, in key order.
func setOptions(errs []error, section string, opts map[string]string, set func(key, value string) error) []error {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := set(k, opts[k]); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", section, k, err))
		}
	}
	return errs
}

func wrapKey(key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", key, err)
}
