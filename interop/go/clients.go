package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var statusNames = map[primitive.SendStatus]string{
	primitive.SendOK:                "SEND_OK",
	primitive.SendFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	primitive.SendUnknownError:      "UNKNOWN_ERROR",
}

var txStates = map[string]primitive.LocalTransactionState{
	"COMMIT_MESSAGE":   primitive.CommitMessageState,
	"ROLLBACK_MESSAGE": primitive.RollbackMessageState,
	"UNKNOW":           primitive.UnkonwnState,
}

// shardSelector sends a message to queue (sharding key % queues), like Java's selector with an int arg.
type shardSelector struct{}

func (shardSelector) Select(msg *primitive.Message, mqs []*primitive.MessageQueue, _ string) *primitive.MessageQueue {
	n, _ := strconv.Atoi(msg.GetShardingKey())
	return mqs[n%len(mqs)]
}

func message(p *Params, s Spec) *primitive.Message {
	msg := primitive.NewMessage(p.Topic, bodyBytes(s))
	if s.Tags != "" {
		msg.WithTag(s.Tags)
	}
	if len(s.Keys) > 0 {
		msg.WithKeys(s.Keys)
	}
	for k, v := range s.Props {
		msg.WithProperty(k, v)
	}
	if s.Delay > 0 {
		msg.WithDelayTimeLevel(s.Delay)
	}
	return msg
}

func sent(s Spec, at float64, r *primitive.SendResult) {
	fields := map[string]any{"body": s.Body, "at": at, "status": nil}
	if r != nil {
		fields["status"] = statusNames[r.Status]
		fields["msg_id"] = r.MsgID
		fields["offset_msg_id"] = r.OffsetMsgID
		fields["queue_offset"] = r.QueueOffset
		if r.MessageQueue != nil {
			fields["queue_id"] = r.MessageQueue.QueueId
		}
	}
	emit("sent", fields)
}

func newProducer(p *Params, extra ...producer.Option) (*producerHandle, error) {
	opts := append([]producer.Option{
		producer.WithGroupName(p.ProducerGroup),
		producer.WithNsResolver(primitive.NewPassthroughResolver(p.namesrvs())),
		producer.WithRetry(2),
	}, append(p.producerOpts(), extra...)...)
	prod, err := producer.NewDefaultProducer(opts...)
	if err != nil {
		return nil, err
	}
	if err := prod.Start(); err != nil {
		return nil, fmt.Errorf("producer start: %w", err)
	}
	return &producerHandle{prod}, nil
}

type producerHandle struct {
	p interface {
		SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
		SendAsync(context.Context, func(context.Context, *primitive.SendResult, error), ...*primitive.Message) error
		SendOneWay(context.Context, ...*primitive.Message) error
		Request(context.Context, time.Duration, *primitive.Message) (*primitive.Message, error)
		Shutdown() error
	}
}

func (h *producerHandle) close() { _ = h.p.Shutdown() }

// sendAll sends the scenario's messages the way “mode“ says and reports each as “sent“.
func (h *producerHandle) sendAll(ctx context.Context, p *Params, specs []Spec, mode string) error {
	switch mode {
	case "", "sync":
		for _, s := range specs {
			at := now()
			r, err := h.p.SendSync(ctx, message(p, s))
			if err != nil {
				return fmt.Errorf("send %s: %w", s.Body, err)
			}
			sent(s, at, r)
		}
	case "async":
		var wg sync.WaitGroup
		var failed error
		var mu sync.Mutex
		at := now()
		for _, s := range specs {
			s := s
			wg.Add(1)
			err := h.p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					failed = fmt.Errorf("async send %s: %w", s.Body, err)
					mu.Unlock()
					return
				}
				sent(s, at, r)
			}, message(p, s))
			if err != nil {
				wg.Done()
				return fmt.Errorf("async send %s: %w", s.Body, err)
			}
		}
		wg.Wait()
		return failed
	case "oneway":
		for _, s := range specs {
			at := now()
			if err := h.p.SendOneWay(ctx, message(p, s)); err != nil {
				return fmt.Errorf("oneway send %s: %w", s.Body, err)
			}
			sent(s, at, nil)
		}
	case "batch":
		msgs := make([]*primitive.Message, len(specs))
		for i, s := range specs {
			msgs[i] = message(p, s)
		}
		at := now()
		r, err := h.p.SendSync(ctx, msgs...)
		if err != nil {
			return fmt.Errorf("batch send: %w", err)
		}
		for _, s := range specs {
			sent(s, at, r)
		}
	case "orderly":
		for _, s := range specs {
			msg := message(p, s)
			msg.WithShardingKey(strconv.Itoa(s.Shard))
			at := now()
			r, err := h.p.SendSync(ctx, msg)
			if err != nil {
				return fmt.Errorf("orderly send %s: %w", s.Body, err)
			}
			sent(s, at, r)
		}
	default:
		return fmt.Errorf("unknown send mode %q", mode)
	}
	return nil
}

// received is one delivery, as the “recv“ event reports it.
type received struct {
	body      string
	member    int
	reconsume int32
}

// Members are push consumers of one group in this process; each delivery becomes a “recv“ event.
type Members struct {
	props     []string // property names the specs carry, reported per delivery
	mu        sync.Mutex
	got       []received
	consumers []interface {
		Start() error
		Shutdown() error
	}
}

type memberOpts struct {
	count        int
	model        string // CLUSTERING (the default) or BROADCASTING
	orderly      bool
	maxReconsume int32
	fail         func(*primitive.MessageExt) bool
	onMessage    func(int, *primitive.MessageExt)
	group, topic string // default: the cell's group and topic
	base         int    // the first member's number
}

func newMembers(p *Params, o memberOpts) (*Members, error) {
	if o.count == 0 {
		o.count = 1
	}
	if o.fail == nil {
		o.fail = func(*primitive.MessageExt) bool { return false }
	}
	selector := consumer.MessageSelector{Type: consumer.TAG, Expression: p.Expression}
	if selector.Expression == "" {
		selector.Expression = "*"
	}
	if p.ExpressionType == "SQL92" {
		selector.Type = consumer.SQL92
	}
	if o.group == "" {
		o.group = p.Group
	}
	if o.topic == "" {
		o.topic = p.Topic
	}
	m := &Members{props: propNames(p)}
	for i := o.base; i < o.base+o.count; i++ {
		opts := []consumer.Option{
			consumer.WithGroupName(o.group),
			consumer.WithNsResolver(primitive.NewPassthroughResolver(p.namesrvs())),
			consumer.WithInstance(fmt.Sprintf("%s-%d-%d", o.group, i, time.Now().UnixNano())),
			consumer.WithConsumerModel(model(o.model)),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
			consumer.WithConsumerOrder(o.orderly),
		}
		opts = append(opts, p.consumerOpts()...)
		if o.maxReconsume > 0 {
			opts = append(opts, consumer.WithMaxReconsumeTimes(o.maxReconsume))
		}
		c, err := consumer.NewPushConsumer(opts...)
		if err != nil {
			return nil, err
		}
		member := i
		err = c.Subscribe(o.topic, selector, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			failed := false
			for _, msg := range msgs {
				m.record(member, msg)
				if o.onMessage != nil {
					o.onMessage(member, msg)
				}
				failed = failed || o.fail(msg)
			}
			if failed && !o.orderly {
				return consumer.ConsumeRetryLater, nil
			}
			return consumer.ConsumeSuccess, nil
		})
		if err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		m.consumers = append(m.consumers, c)
	}
	return m, nil
}

func keysOf(msg *primitive.MessageExt) []string {
	keys := strings.Fields(msg.GetKeys())
	if keys == nil {
		keys = []string{}
	}
	return keys
}

func propNames(p *Params) []string {
	var names []string
	for _, s := range p.Messages {
		for name := range s.Props {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	return names
}

// recvEvent reports one delivery as interop/scenarios.py describes the “recv“ event; its body label.
func recvEvent(props []string, member int, msg *primitive.MessageExt, extra map[string]any) string {
	fields := bodyFields(msg.Body)
	for k, v := range map[string]any{"tags": msg.GetTags(), "keys": keysOf(msg), "topic": msg.Topic, "queue_id": msg.Queue.QueueId,
		"queue_offset": msg.QueueOffset, "reconsume": msg.ReconsumeTimes, "member": member, "at": now(), "msg_id": msg.MsgId} {
		fields[k] = v
	}
	if len(props) > 0 {
		all := msg.GetProperties()
		values := map[string]any{}
		for _, name := range props {
			if v, ok := all[name]; ok {
				values[name] = v
			} else {
				values[name] = nil
			}
		}
		fields["props"] = values
	}
	for k, v := range extra {
		fields[k] = v
	}
	emit("recv", fields)
	return fields["body"].(string)
}

// record prints the delivery before it counts, so the main goroutine cannot exit first.
func (m *Members) record(member int, msg *primitive.MessageExt) {
	m.mu.Lock()
	defer m.mu.Unlock()
	label := recvEvent(m.props, member, msg, nil)
	m.got = append(m.got, received{body: label, member: member, reconsume: msg.ReconsumeTimes})
}

// has: every body arrived (at “member“ when >= 0) with at least “reconsume“ reconsumeTimes.
func (m *Members) has(bodies []string, member int, reconsume int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range m.got {
		if (member < 0 || r.member == member) && r.reconsume >= reconsume {
			seen[r.body] = true
		}
	}
	for _, b := range bodies {
		if !seen[b] {
			return false
		}
	}
	return true
}

func (m *Members) start() error {
	for _, c := range m.consumers {
		if err := c.Start(); err != nil {
			return fmt.Errorf("consumer start: %w", err)
		}
	}
	return nil
}

func (m *Members) stop() {
	for _, c := range m.consumers {
		_ = c.Shutdown()
	}
}

var errTimeout = errors.New("timed out")
