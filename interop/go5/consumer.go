// The go5 driver's consumer ops, with the SDK's SimpleConsumer: the same params and events as the
// "consume" and "push" ops of interop/py5/driver.py.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// consumeParams: what the consumer ops read beside params' endpoint and topic.
type consumeParams struct {
	Group          string            `json:"group"`
	Expect         int               `json:"expect"`
	Members        int               `json:"members"`
	Tag            string            `json:"tag"`
	ExpressionType string            `json:"expression_type"`
	Invisible      float64           `json:"invisible"`
	Await          float64           `json:"await"`
	Batch          int32             `json:"batch"`
	Actions        map[string]string `json:"actions"`
	ChangeS        float64           `json:"change_s"`
	Linger         *float64          `json:"linger"`
	FailOnce       []string          `json:"fail_once"`
	FailAlways     []string          `json:"fail_always"`
	Attempts       int               `json:"attempts"`
	Fifo           bool              `json:"fifo"`
	Producers      int               `json:"producers"`
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// orDefault: a float param, or its default when absent or zero.
func orDefault(v, fallback float64) float64 {
	if v <= 0 {
		return fallback
	}
	return v
}

// label: a body up to its first '#' (the drivers' label; generated filler follows it).
func label(body []byte) string {
	return strings.SplitN(string(body), "#", 2)[0]
}

func sortedKeys(view *rmq.MessageView) []string {
	keys := append([]string{}, view.GetKeys()...)
	sort.Strings(keys)
	return keys
}

// awaitDefault: 5 s, not py5's 2 s. golang/v5 names no long polling timeout in a receive, so the
// proxy polls for the time left before the SDK's deadline (await + its 3 s request timeout) less half
// the request timeout, at least 5 s, and refuses a receive with under 5 s left.
const awaitDefault = 5

func newSimpleConsumer(p params, c consumeParams) (rmq.SimpleConsumer, error) {
	expression := rmq.NewFilterExpression(c.Tag)
	if c.Tag == "" {
		expression = rmq.SUB_ALL
	}
	if c.ExpressionType == "SQL92" {
		expression = rmq.NewFilterExpressionWithType(c.Tag, rmq.SQL92)
	}
	consumer, err := rmq.NewSimpleConsumer(config(p, c.Group), rmq.WithAwaitDuration(seconds(orDefault(c.Await, awaitDefault))),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{p.Topic: expression}))
	if err != nil {
		return nil, err
	}
	return consumer, consumer.Start()
}

// receive: one Receive; MESSAGE_NOT_FOUND (nothing within the long poll) is no messages, not an error.
func receive(consumer rmq.SimpleConsumer, batch int32, invisible time.Duration) ([]*rmq.MessageView, error) {
	views, err := consumer.Receive(context.Background(), batch, invisible)
	var status *rmq.ErrRpcStatus
	if errors.As(err, &status) && status.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND) {
		return nil, nil
	}
	return views, err
}

// tally: deliveries per body and bodies done, shared by the members; done closes at expect bodies.
type tally struct {
	sync.Mutex
	seen   map[string]int
	doneOf map[string]bool
	expect int
	done   chan struct{}
}

func newTally(expect int) *tally {
	t := &tally{seen: map[string]int{}, doneOf: map[string]bool{}, expect: expect, done: make(chan struct{})}
	if expect <= 0 {
		close(t.done)
	}
	return t
}

func (t *tally) delivered(body string) int {
	t.Lock()
	defer t.Unlock()
	t.seen[body]++
	return t.seen[body]
}

func (t *tally) finish(body string) {
	t.Lock()
	defer t.Unlock()
	if t.doneOf[body] {
		return
	}
	t.doneOf[body] = true
	if len(t.doneOf) == t.expect {
		close(t.done)
	}
}

func (t *tally) isDone() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

func (t *tally) finished() []string {
	t.Lock()
	defer t.Unlock()
	out := make([]string, 0, len(t.doneOf))
	for body := range t.doneOf {
		out = append(out, body)
	}
	sort.Strings(out)
	return out
}

// consume is op "consume": members SimpleConsumers receive until expect bodies are acked (then linger),
// or wait seconds passed; actions leave a body un-acked (skip_once) or change its invisible duration
// (change_once, change_ack) on its first delivery (skip_always: on every one). fifo: as an orderly
// consumer, a message group with an un-acked message in a batch has its later messages in that batch
// left alone too ("held" events).
func consume(p params, c consumeParams) error {
	members := c.Members
	if members <= 0 {
		members = 1
	}
	consumers := make([]rmq.SimpleConsumer, 0, members)
	defer func() {
		for _, consumer := range consumers {
			consumer.GracefulStop()
		}
	}()
	for i := 0; i < members; i++ {
		consumer, err := newSimpleConsumer(p, c)
		if err != nil {
			return err
		}
		consumers = append(consumers, consumer)
	}
	emit("started", map[string]any{})
	t := newTally(c.Expect)
	deadline := time.Now().Add(seconds(orDefault(p.Wait, 30)))
	linger := 0.0
	if c.Linger != nil {
		linger = *c.Linger
	}
	batch := c.Batch
	if batch <= 0 {
		batch = 16
	}
	invisible := seconds(orDefault(c.Invisible, 10))
	var wg sync.WaitGroup
	failures := make([]string, members)
	for i, consumer := range consumers {
		wg.Add(1)
		go func(member int, consumer rmq.SimpleConsumer) {
			defer wg.Done()
			var lingerEnd time.Time
			for time.Now().Before(deadline) {
				if t.isDone() {
					if lingerEnd.IsZero() {
						lingerEnd = time.Now().Add(seconds(linger))
					}
					if !time.Now().Before(lingerEnd) {
						return
					}
				}
				views, err := receive(consumer, batch, invisible)
				held := map[string]bool{} // fifo: message groups with an un-acked message in this batch
				for _, view := range views {
					if err != nil {
						break
					}
					group := messageGroup(view)
					if c.Fifo && group != nil && held[*group] {
						emit("held", map[string]any{"member": member, "body": label(view.GetBody()),
							"attempt": view.GetDeliveryAttempt(), "message_group": *group})
						continue
					}
					var acked bool
					if acked, err = handle(member, consumer, view, c, t); err == nil && !acked && c.Fifo && group != nil {
						held[*group] = true
					}
				}
				if err != nil {
					failures[member] = fmt.Sprintf("member %d: %v", member, err)
					return
				}
			}
		}(i, consumer)
	}
	var sendFailures []string
	if c.Producers > 0 {
		sendFailures = sendTogether(p, c)
	}
	wg.Wait()
	var failed []string
	for _, failure := range append(failures, sendFailures...) {
		if failure != "" {
			failed = append(failed, failure)
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// sendTogether is op "crowd"'s producers: c.Producers Producer instances, started together, each
// sending its own specs (spec.Producer: its index) in order, all at once; "sent" events carry "producer".
// It returns the failures.
func sendTogether(p params, c consumeParams) []string {
	failures := make([]string, c.Producers)
	producers := make([]rmq.Producer, c.Producers)
	var starting sync.WaitGroup
	for i := range producers {
		starting.Add(1)
		go func(index int) {
			defer starting.Done()
			producer, err := rmq.NewProducer(config(p, ""), rmq.WithTopics(p.Topic))
			if err == nil {
				if err = producer.Start(); err == nil {
					producers[index] = producer
				}
			}
			if err != nil {
				failures[index] = fmt.Sprintf("producer %d: start: %v", index, err)
			}
		}(i)
	}
	starting.Wait()
	var sending sync.WaitGroup
	for i, producer := range producers {
		if producer == nil {
			continue
		}
		sending.Add(1)
		go func(index int, producer rmq.Producer) {
			defer sending.Done()
			defer producer.GracefulStop()
			for _, s := range p.Messages {
				if s.Producer != index {
					continue
				}
				at := float64(time.Now().UnixMilli()) / 1000
				receipts, err := producer.Send(context.Background(), build(s, p.Topic))
				if err != nil {
					failures[index] = fmt.Sprintf("producer %d: %v", index, err)
					return
				}
				emit("sent", map[string]any{"producer": index, "body": s.Body, "at": at, "msg_id": receipts[0].MessageID,
					"offset": receipts[0].Offset})
			}
		}(i, producer)
	}
	sending.Wait()
	return failures
}

// messageGroup: a FIFO message's group, nil for a message that has none (the SDK gives "" or nil).
func messageGroup(view *rmq.MessageView) *string {
	group := view.GetMessageGroup()
	if group == nil || *group == "" {
		return nil
	}
	return group
}

// handle: one delivery of op "consume": its recv event, then its action and the ack; true when acked.
func handle(member int, consumer rmq.SimpleConsumer, view *rmq.MessageView, c consumeParams, t *tally) (bool, error) {
	body := label(view.GetBody())
	count := t.delivered(body)
	var group any // JSON null without a message group, as py5's None
	if g := messageGroup(view); g != nil {
		group = *g
	}
	emit("recv", map[string]any{"member": member, "body": body, "msg_id": view.GetMessageId(),
		"attempt": view.GetDeliveryAttempt(), "handle": view.GetReceiptHandle(), "tag": view.GetTag(),
		"keys": sortedKeys(view), "topic": view.GetTopic(), "props": view.GetProperties(), "size": len(view.GetBody()),
		"message_group": group})
	action := c.Actions[body]
	if (count == 1 && action == "skip_once") || action == "skip_always" {
		return false, nil
	}
	if count == 1 && (action == "change_once" || action == "change_ack") {
		if err := consumer.ChangeInvisibleDuration(view, seconds(orDefault(c.ChangeS, 2))); err != nil {
			return false, err
		}
		emit("changed", map[string]any{"member": member, "body": body, "msg_id": view.GetMessageId(),
			"handle": view.GetReceiptHandle()})
		if action == "change_once" {
			return false, nil
		}
	}
	if err := consumer.Ack(context.Background(), view); err != nil {
		return false, err
	}
	t.finish(body)
	emit("acked", map[string]any{"member": member, "body": body, "msg_id": view.GetMessageId(),
		"handle": view.GetReceiptHandle()})
	return true, nil
}

// push is op "push" on a SimpleConsumer, as golang/v5 5.1.2 has no PushConsumer (5.1.3 has): a
// failed delivery is left un-acked, so it comes back after its invisible duration with one more
// delivery attempt, and past the group's retryMaxTimes + 1 attempts it goes to %DLQ%group (Apache's
// proxy forwards it when a receive pops it again, rmqtx's broker when the last invisible time runs
// out), where a PushConsumer would forward it itself. fail_once bodies fail their first delivery,
// fail_always bodies every one (done after attempts deliveries); done at expect bodies, then it
// goes on receiving for linger seconds.
func push(p params, c consumeParams) error {
	consumer, err := newSimpleConsumer(p, consumeParams{Group: c.Group, Await: c.Await})
	if err != nil {
		return err
	}
	defer consumer.GracefulStop()
	failOnce, failAlways := map[string]bool{}, map[string]bool{}
	for _, body := range c.FailOnce {
		failOnce[body] = true
	}
	for _, body := range c.FailAlways {
		failAlways[body] = true
	}
	emit("started", map[string]any{})
	t := newTally(c.Expect)
	deadline := time.Now().Add(seconds(orDefault(p.Wait, 30)))
	invisible := seconds(orDefault(c.Invisible, 2))
	linger := 0.5
	if c.Linger != nil {
		linger = *c.Linger
	}
	var lingerEnd time.Time // done, it goes on receiving for linger seconds, as a push consumer would
	for time.Now().Before(deadline) {
		if t.isDone() {
			if lingerEnd.IsZero() {
				lingerEnd = time.Now().Add(seconds(linger))
			}
			if !time.Now().Before(lingerEnd) {
				break
			}
		}
		views, err := receive(consumer, 16, invisible)
		if err != nil {
			return err
		}
		for _, view := range views {
			body := label(view.GetBody())
			count := t.delivered(body)
			emit("recv", map[string]any{"body": body, "msg_id": view.GetMessageId(), "attempt": view.GetDeliveryAttempt(),
				"topic": view.GetTopic(), "tag": view.GetTag(), "keys": sortedKeys(view)})
			switch {
			case failAlways[body]:
				if count >= c.Attempts {
					t.finish(body)
				}
			case failOnce[body] && count == 1:
			default:
				if err := consumer.Ack(context.Background(), view); err != nil {
					return err
				}
				t.finish(body)
			}
		}
	}
	if !t.isDone() {
		return fmt.Errorf("consumed %v of %d", t.finished(), c.Expect)
	}
	return nil
}
