package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTelemetry(t *testing.T) {
	cfg, err := Parse("t.yaml", yamlLines(
		"telemetry:",
		"  endpoint: http://127.0.0.1:4318",
		"  protocol: grpc",
		"  sample_ratio: 0.25",
		"  headers: {x-api-key: '${OTLP_KEY}'}",
	), &Options{LookupEnv: envOf(map[string]string{"OTLP_KEY": "collector-key-1234"})})
	if err != nil {
		t.Fatal(err)
	}
	tm := cfg.Telemetry
	if tm == nil || tm.Endpoint != "http://127.0.0.1:4318" || tm.Protocol != TelemetryGRPC || *tm.SampleRatio != 0.25 ||
		tm.Queue() != 2048 || tm.Timeout() != 10*time.Second || tm.Headers["x-api-key"] != "collector-key-1234" {
		t.Fatalf("telemetry = %+v", tm)
	}
	if !slicesHas(cfg.Secrets(), "collector-key-1234") {
		t.Error("the collector key is not among the secrets to redact")
	}
	if cfg, err := Parse("t.yaml", yamlLines("server: {listen: '127.0.0.1:8080'}"), nil); err != nil || cfg.Telemetry != nil {
		t.Errorf("no telemetry section: %v, %+v; want nil (tracing off unless the environment names a collector)", err, cfg.Telemetry)
	}
}

func TestParseTelemetryErrors(t *testing.T) {
	_, err := Parse("t.yaml", yamlLines(
		"telemetry:",
		"  endpoint: 127.0.0.1:4318",
		"  protocol: thrift",
		"  sample_ratio: 2",
		"  queue_size: -1",
		"  export_timeout: -1s",
		"  tracing: on",
	), &Options{LookupEnv: envOf(map[string]string{"OTLP_KEY": "collector-key-1234"})})
	want := []string{
		`t.yaml:2:13: telemetry.endpoint: must be the collector's http:// or https:// URL, like http://127.0.0.1:4318; got "127.0.0.1:4318"`,
		`t.yaml:3:13: telemetry.protocol: must be http/protobuf, http/json or grpc; got "thrift"`,
		"t.yaml:4:17: telemetry.sample_ratio: must be from 0 to 1, like 0.1 to record one trace in ten; got 2",
		"t.yaml:5:15: telemetry.queue_size: must be from 1 to 1048576, like 2048; got -1",
		"t.yaml:6:19: telemetry.export_timeout: must be positive, like 10s; got -1s",
	}
	got := errLines(t, err)
	// The unknown key is the decoder's to report, in its own words.
	if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "t.yaml:7:3") {
		t.Errorf("errors %q do not report the unknown key telemetry.tracing at 7:3", got)
	}
	got = got[:min(len(got), len(want))]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
