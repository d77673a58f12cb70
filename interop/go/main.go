// Command interop runs one cell of rmqtx's interop matrix with the Apache Go client
// (github.com/apache/rocketmq-client-go/v2): `interop OP PARAMS_JSON`.
//
// It only acts and reports: one JSON object per line on stdout (the same events as the other
// drivers); interop/scenarios.py judges them. The client's own log goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// Spec is one message a scenario asks for.
type Spec struct {
	Body  string            `json:"body"`
	Tags  string            `json:"tags"`
	Keys  []string          `json:"keys"`
	Props map[string]string `json:"props"`
	Delay int               `json:"delay"`
	Shard int               `json:"shard"`
	Local string            `json:"local"`
	Check *string           `json:"check"`
	Size  int               `json:"size"`
	Fill  string            `json:"fill"`
}

// Seek is where the lite pull scenario moves one queue after its commit.
type Seek struct {
	QueueID int   `json:"queue_id"`
	Offset  int64 `json:"offset"`
}

// Params is what the runner hands a cell (interop/scenarios.py: Scenario.params and the builders).
type Params struct {
	Scenario       string       `json:"scenario"`
	Namesrv        string       `json:"namesrv"`
	Broker         string       `json:"broker"`
	Cluster        string       `json:"cluster"`
	Topic          string       `json:"topic"`
	Group          string       `json:"group"`
	ProducerGroup  string       `json:"producer_group"`
	Wait           float64      `json:"wait"`
	Settle         float64      `json:"settle"`
	Linger         float64      `json:"linger"`
	Mode           string       `json:"mode"`
	Model          string       `json:"model"`
	Members        int          `json:"members"`
	Expression     string       `json:"expression"`
	ExpressionType string       `json:"expression_type"`
	Messages       []Spec       `json:"messages"`
	Expect         []Spec       `json:"expect"`
	Levels         []float64    `json:"levels"`
	MaxReconsume   int          `json:"max_reconsume"`
	Hold           float64      `json:"hold"`
	Key            string       `json:"key"`
	Later          []Spec       `json:"later"`
	AfterSeek      []Spec       `json:"after_seek"`
	Seek           Seek         `json:"seek"`
	ReplyPrefix    string       `json:"reply_prefix"`
	RequestTimeout float64      `json:"request_timeout"`
	DLQGroup       string       `json:"dlq_group"`
	ACL            *Credentials `json:"acl"`
	TLS            bool         `json:"tls"`
}

var out sync.Mutex

// emit prints one event as a whole line; callbacks run on the client's goroutines.
func emit(kind string, fields map[string]any) {
	event := map[string]any{"kind": kind}
	for k, v := range fields {
		event[k] = v
	}
	line, err := json.Marshal(event)
	if err != nil {
		line, _ = json.Marshal(map[string]any{"kind": "error", "error": "unencodable event: " + err.Error()})
	}
	out.Lock()
	defer out.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func fail(err error) {
	emit("error", map[string]any{"error": err.Error()})
}

func now() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}

// until polls done every 100 ms until it holds or the time is up.
func until(done func() bool, s float64) bool {
	deadline := time.Now().Add(seconds(s))
	for !done() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	return done()
}

func (p *Params) namesrvs() []string {
	return strings.Split(p.Namesrv, ";")
}

func (p *Params) bodies(expect bool) []string {
	specs := p.Messages
	if expect && p.Expect != nil {
		specs = p.Expect
	}
	return labels(specs)
}

func labels(specs []Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Body
	}
	return out
}

var ops = map[string]func(context.Context, *Params) error{}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: interop OP PARAMS_JSON")
		os.Exit(2)
	}
	level := os.Getenv("ROCKETMQ_GO_LOG_LEVEL")
	if level == "" {
		level = "error"
	}
	rlog.SetLogLevel(level) // the default (info) logs every rebalance and heartbeat
	var p Params
	if err := json.Unmarshal([]byte(os.Args[2]), &p); err != nil {
		fail(fmt.Errorf("params: %w", err))
		os.Exit(2)
	}
	op, ok := ops[os.Args[1]]
	if !ok {
		fail(fmt.Errorf("unknown op %q", os.Args[1]))
		os.Exit(2)
	}
	if err := op(context.Background(), &p); err != nil {
		fail(err)
	}
	// The client's background goroutines (rebalance, heartbeats) may outlive Shutdown: do not wait.
	os.Exit(0)
}
