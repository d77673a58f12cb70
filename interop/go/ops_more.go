package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// replyDelay: how long the responder waits before replying (see opRequestReply).
const replyDelay = 2 * time.Second

func init() {
	ops["request_reply"] = opRequestReply
	ops["lite_pull"] = opLitePull
	ops["dlq_consume"] = opDLQConsume
	ops["restart"] = opRestart
}

// opRequestReply: a responder answers each request with consumer.CreateReplyMessage; the requester
// waits in producer.Request.
func opRequestReply(ctx context.Context, p *Params) error {
	replier, err := newProducer(&Params{ProducerGroup: p.ProducerGroup + "_reply", Namesrv: p.Namesrv})
	if err != nil {
		return err
	}
	defer replier.close()
	var answers sync.WaitGroup
	answer := func(_ int, msg *primitive.MessageExt) {
		body := string(msg.Body)
		content := []byte(p.ReplyPrefix + body)
		reply, err := consumer.CreateReplyMessage(msg, content)
		if err != nil {
			fail(fmt.Errorf("reply to %s: %w", body, err))
			return
		}
		// CreateReplyMessage (v2.1.2 and later) reads its body argument as properties and leaves the
		// reply's body empty: set it, as the client's users must.
		reply.Body = content
		answers.Add(1)
		go func() {
			defer answers.Done()
			// The broker pushes the reply to the requester's client only once that client's heartbeat
			// registered it as a producer; the Go client sends its first heartbeat 1 s after start and,
			// for a topic that exists, none when it requests. Its own rpc example sleeps here for that.
			time.Sleep(replyDelay)
			r, err := replier.p.SendSync(context.Background(), reply)
			if err != nil {
				fail(fmt.Errorf("reply to %s: %w", body, err))
				return
			}
			emit("replied", map[string]any{"body": body, "status": statusNames[r.Status]})
		}()
	}
	members, err := newMembers(p, memberOpts{onMessage: answer})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	time.Sleep(seconds(p.Settle))
	// A client instance of its own, so its first heartbeat follows its first request's route lookup.
	prod, err := newProducer(p, producer.WithInstanceName(fmt.Sprintf("%s-requester-%d", p.ProducerGroup, time.Now().UnixNano())))
	if err != nil {
		return err
	}
	defer prod.close()
	for _, s := range p.Messages {
		reply, err := prod.p.Request(ctx, seconds(p.RequestTimeout), message(p, s))
		if err != nil {
			fail(fmt.Errorf("request %s: %w", s.Body, err))
			continue
		}
		emit("reply", map[string]any{"body": s.Body, "reply": string(reply.Body), "topic": reply.Topic, "at": now()})
	}
	answers.Wait()
	return nil
}

// opLitePull: the client's poll-style pull consumer (Assign, SeekOffset, Poll, ACK, PersistOffset)
// as Java's lite pull consumer with assigned queues.
func opLitePull(ctx context.Context, p *Params) error {
	prod, err := newProducer(p, producer.WithQueueSelector(shardSelector{}))
	if err != nil {
		return err
	}
	err = prod.sendAll(ctx, p, p.Messages, "orderly")
	prod.close()
	if err != nil {
		return err
	}
	// The pull consumer knows routes only of topics it already pulls: the admin API lists the queues.
	adm, err := admin.NewAdmin(p.adminOpts()...)
	if err != nil {
		return err
	}
	queues, err := adm.FetchPublishMessageQueues(ctx, p.Topic)
	adm.Close()
	if err != nil {
		return fmt.Errorf("queues of %s: %w", p.Topic, err)
	}
	pc, err := consumer.NewPullConsumer(append([]consumer.Option{
		consumer.WithGroupName(p.Group),
		consumer.WithNsResolver(primitive.NewPassthroughResolver(p.namesrvs())),
		consumer.WithInstance(fmt.Sprintf("%s-lite-%d", p.Group, time.Now().UnixNano())),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithAutoCommit(false)}, p.consumerOpts()...)...)
	if err != nil {
		return err
	}
	if err := pc.Assign(p.Topic, queues); err != nil { // a new group: CONSUME_FROM_FIRST_OFFSET starts at 0
		return fmt.Errorf("assign: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("pull consumer start: %w", err)
	}
	defer pc.Shutdown() // persists the offsets in memory: the same as committed, as the seek phase ACKs too
	props := propNames(p)
	pollUntil := func(want []string, phase string, s float64) {
		got := map[string]bool{}
		done := func() bool {
			for _, b := range want {
				if !got[b] {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(seconds(s))
		for !done() && time.Now().Before(deadline) {
			cr, err := pc.Poll(ctx, 200*time.Millisecond)
			if err != nil {
				if !consumer.IsNoNewMsgError(err) {
					fail(fmt.Errorf("poll: %w", err))
				}
				continue
			}
			for _, msg := range cr.GetMsgList() {
				got[recvEvent(props, 0, msg, map[string]any{"phase": phase})] = true
			}
			pc.ACK(ctx, cr, consumer.ConsumeSuccess)
		}
	}
	pollUntil(p.bodies(false), "poll", p.Wait)
	if err := pc.PersistOffset(ctx, p.Topic); err != nil { // commitSync
		return fmt.Errorf("commit: %w", err)
	}
	for _, mq := range queues {
		offset, err := pc.CurrentOffset(mq)
		if err != nil {
			return fmt.Errorf("offset of queue %d: %w", mq.QueueId, err)
		}
		emit("committed", map[string]any{"queue_id": mq.QueueId, "offset": offset})
	}
	for _, mq := range queues {
		if mq.QueueId == p.Seek.QueueID {
			pc.SeekOffset(mq, p.Seek.Offset)
		}
	}
	pollUntil(labels(p.AfterSeek), "seek", p.Wait)
	pollUntil([]string{p.Topic + " never sends this"}, "seek", p.Linger)
	return nil
}

// opDLQConsume: messages go to the DLQ as in opDLQ, then a consumer of another group reads %DLQ%group.
func opDLQConsume(ctx context.Context, p *Params) error {
	deadline := time.Now().Add(seconds(p.Wait)) // one budget for both phases, so a failure is reported, not timed out
	if err := opDLQ(ctx, p); err != nil {
		return err
	}
	group := p.DLQGroup
	if group == "" {
		group = p.Group + "_dlq"
	}
	reader, err := newMembers(p, memberOpts{base: 1, group: group, topic: "%DLQ%" + p.Group})
	if err != nil {
		return err
	}
	if err := reader.start(); err != nil {
		return err
	}
	defer reader.stop()
	until(func() bool { return reader.has(p.bodies(false), 1, 0) }, max(time.Until(deadline).Seconds(), 10))
	return nil
}

// opRestart: a consumer takes the first messages and shuts down; a new one of the group must start
// at the committed offset and see only the later ones.
func opRestart(ctx context.Context, p *Params) error {
	before, err := newMembers(p, memberOpts{})
	if err != nil {
		return err
	}
	if err := before.start(); err != nil {
		return err
	}
	time.Sleep(seconds(p.Settle))
	prod, err := newProducer(p)
	if err != nil {
		before.stop()
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, "sync"); err != nil {
		before.stop()
		return err
	}
	until(func() bool { return before.has(p.bodies(false), 0, 0) }, p.Wait)
	time.Sleep(seconds(p.Linger))
	before.stop()
	if err := prod.sendAll(ctx, p, p.Later, "sync"); err != nil {
		return err
	}
	after, err := newMembers(p, memberOpts{base: 1})
	if err != nil {
		return err
	}
	if err := after.start(); err != nil {
		return err
	}
	defer after.stop()
	until(func() bool { return after.has(labels(p.Later), 1, 0) }, p.Wait)
	time.Sleep(seconds(p.Linger))
	return nil
}
