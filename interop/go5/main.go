// The go5 driver: github.com/apache/rocketmq-clients/golang/v5 (the official 5.x gRPC SDK) as a
// producer, and with ops "consume", "crowd" (with producers sending meanwhile) and "push" as
// SimpleConsumers (consumer.go). Reads the same JSON params as interop/py5/driver.py on stdin and
// prints the same events, one JSON object a line.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type spec struct {
	Body       string            `json:"body"`
	BodyB64    *string           `json:"body_b64"`
	Tag        string            `json:"tag"`
	Keys       []string          `json:"keys"`
	Props      map[string]string `json:"props"`
	Group      string            `json:"group"`
	DelayS     float64           `json:"delay_s"`
	Action     string            `json:"action"`
	CheckState string            `json:"check_state"`
	Producer   int               `json:"producer"`
}

type params struct {
	Op       string  `json:"op"`
	Endpoint string  `json:"endpoint"`
	Topic    string  `json:"topic"`
	Messages []spec  `json:"messages"`
	Async    bool    `json:"async"`
	Wait     float64 `json:"wait"`
	Acl      *keys   `json:"acl"`
	Tls      bool    `json:"tls"`
	consumeParams
}

// keys: the cell's ACL account (the acl and tls modes); none: the SDK signs with an empty key.
type keys struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// config: the SDK's configuration, signed with the cell's keys when it gives some.
func config(p params, group string) *rmq.Config {
	creds := &credentials.SessionCredentials{}
	if p.Acl != nil {
		creds = &credentials.SessionCredentials{AccessKey: p.Acl.AccessKey, AccessSecret: p.Acl.SecretKey}
	}
	return &rmq.Config{Endpoint: p.Endpoint, ConsumerGroup: group, Credentials: creds}
}

var out sync.Mutex

func emit(event string, fields map[string]any) {
	fields["event"] = event
	if _, ok := fields["at"]; !ok {
		fields["at"] = float64(time.Now().UnixMilli()) / 1000
	}
	line, _ := json.Marshal(fields)
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(line))
}

func build(s spec, topic string) *rmq.Message {
	body := []byte(s.Body)
	if s.BodyB64 != nil {
		body, _ = base64.StdEncoding.DecodeString(*s.BodyB64)
	}
	msg := &rmq.Message{Topic: topic, Body: body}
	if s.Tag != "" {
		msg.SetTag(s.Tag)
	}
	if len(s.Keys) > 0 {
		msg.SetKeys(s.Keys...)
	}
	for k, v := range s.Props {
		msg.AddProperty(k, v)
	}
	if s.Group != "" {
		msg.SetMessageGroup(s.Group)
	}
	if s.DelayS > 0 {
		msg.SetDelayTimestamp(time.Now().Add(time.Duration(s.DelayS * float64(time.Second))))
	}
	return msg
}

// ends counts answered EndTransaction calls: the SDK ends a checked transaction on a goroutine of
// its own after the checker returns, so the driver waits for that before it stops the producer.
var ends = struct {
	sync.Mutex
	n int
}{}

type endWatch struct{ rmq.RpcClient }

func (w endWatch) EndTransaction(ctx context.Context, req *v2.EndTransactionRequest) (*v2.EndTransactionResponse, error) {
	resp, err := w.RpcClient.EndTransaction(ctx, req)
	ends.Lock()
	ends.n++
	ends.Unlock()
	return resp, err
}

func endsAtLeast(n int, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		ends.Lock()
		got := ends.n
		ends.Unlock()
		if got >= n {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// transport: golang/v5 5.1.2 always dials TLS (trusting any certificate: its default tls.Config skips
// verification) and has no switch for plaintext, so without "tls" the driver dials plaintext; it also caps
// a request at 2 MiB (a 4 MiB body is legal). Its client manager builds every RPC client through this
// hook, with no options of its own.
func transport(tls bool) {
	base := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		connOpts := []rmq.ConnOption{rmq.WithMaxCallSendMsgSize(16 * 1024 * 1024)}
		if !tls {
			connOpts = append(connOpts, rmq.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
		}
		conn := rmq.WithRpcClientConnOption(connOpts...)
		client, err := base(target, append(opts, conn)...)
		if err != nil {
			return nil, err
		}
		return endWatch{client}, nil
	}
}

func run(p params) error {
	checkStates := map[string]string{}
	expected := map[string]bool{}
	for _, s := range p.Messages {
		checkStates[s.Body] = "COMMIT"
		if s.CheckState != "" {
			checkStates[s.Body] = s.CheckState
		}
		if s.Action == "check" {
			expected[s.Body] = true
		}
	}
	var mu sync.Mutex
	checked := map[string]bool{}
	allChecked := make(chan struct{})
	if len(expected) == 0 {
		close(allChecked)
	}
	opts := []rmq.ProducerOption{rmq.WithTopics(p.Topic)}
	if p.Op == "tx" {
		opts = append(opts, rmq.WithTransactionChecker(&rmq.TransactionChecker{
			Check: func(view *rmq.MessageView) rmq.TransactionResolution {
				label := strings.SplitN(string(view.GetBody()), "#", 2)[0]
				state := checkStates[label]
				if state == "" {
					state = "COMMIT"
				}
				emit("checked", map[string]any{"body": label, "msg_id": view.GetMessageId(), "state": state})
				mu.Lock()
				if expected[label] && !checked[label] {
					checked[label] = true
					if len(checked) == len(expected) {
						close(allChecked)
					}
				}
				mu.Unlock()
				if state == "ROLLBACK" {
					return rmq.ROLLBACK
				}
				return rmq.COMMIT
			},
		}))
	}
	producer, err := rmq.NewProducer(config(p, ""), opts...)
	if err != nil {
		return err
	}
	if err := producer.Start(); err != nil {
		return err
	}
	defer producer.GracefulStop()
	ctx := context.Background()
	decided := 0
	for _, s := range p.Messages {
		at := float64(time.Now().UnixMilli()) / 1000 // a delivery timestamp counts from here
		msg := build(s, p.Topic)
		switch {
		case p.Op == "tx":
			tx := producer.BeginTransaction()
			receipts, err := producer.SendWithTransaction(ctx, msg, tx)
			if err != nil {
				return err
			}
			emit("sent", map[string]any{"body": s.Body, "at": at, "msg_id": receipts[0].MessageID, "offset": nil,
				"transaction_id": receipts[0].TransactionId})
			if s.Action == "commit" || s.Action == "rollback" {
				decided++
				emit("ended", map[string]any{"body": s.Body, "action": s.Action})
				if s.Action == "commit" {
					err = tx.Commit()
				} else {
					err = tx.RollBack()
				}
				if err != nil {
					return err
				}
			}
		case p.Async:
			done := make(chan error, 1)
			producer.SendAsync(ctx, msg, func(_ context.Context, receipts []*rmq.SendReceipt, err error) {
				if err == nil {
					emit("sent", map[string]any{"body": s.Body, "at": at, "msg_id": receipts[0].MessageID, "offset": receipts[0].Offset})
				}
				done <- err
			})
			if err := <-done; err != nil {
				return err
			}
		default:
			receipts, err := producer.Send(ctx, msg)
			if err != nil {
				return err
			}
			emit("sent", map[string]any{"body": s.Body, "at": at, "msg_id": receipts[0].MessageID, "offset": receipts[0].Offset})
		}
	}
	wait := p.Wait
	if wait <= 0 {
		wait = 30
	}
	select {
	case <-allChecked:
		mu.Lock()
		want := decided + len(checked)
		mu.Unlock()
		if !endsAtLeast(want, time.Now().Add(10*time.Second)) {
			return fmt.Errorf("the checked transactions were not ended within 10 s")
		}
	case <-time.After(time.Duration(wait * float64(time.Second))):
		mu.Lock()
		var missing []string
		for b := range expected {
			if !checked[b] {
				missing = append(missing, b)
			}
		}
		mu.Unlock()
		sort.Strings(missing)
		return fmt.Errorf("not every open transaction was checked: %v", missing)
	}
	return nil
}

// refusedSend: one send per spec, each answered by a "sent" or a "refused" event (error: the SDK's
// error text, with the endpoint's status). The producer names no topics up front, so that its start
// does not stop at a refused route or settings; a producer that cannot start refuses every spec.
func refusedSend(p params) error {
	producer, err := rmq.NewProducer(config(p, ""))
	if err == nil {
		err = producer.Start()
	}
	if err != nil {
		for _, s := range p.Messages {
			emit("refused", map[string]any{"body": s.Body, "error": err.Error()})
		}
		return nil
	}
	defer producer.GracefulStop()
	for _, s := range p.Messages {
		receipts, err := producer.Send(context.Background(), build(s, p.Topic))
		if err != nil {
			emit("refused", map[string]any{"body": s.Body, "error": err.Error()})
			continue
		}
		emit("sent", map[string]any{"body": s.Body, "msg_id": receipts[0].MessageID, "offset": receipts[0].Offset})
	}
	return nil
}

func main() {
	var p params
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		emit("error", map[string]any{"error": "bad params: " + err.Error()})
		os.Exit(2)
	}
	transport(p.Tls)
	var err error
	switch p.Op {
	case "refused_send":
		err = refusedSend(p)
	case "consume", "crowd":
		err = consume(p, p.consumeParams)
	case "push":
		err = push(p, p.consumeParams)
	default:
		err = run(p)
	}
	if err != nil {
		emit("error", map[string]any{"error": err.Error()})
		os.Exit(1)
	}
}
