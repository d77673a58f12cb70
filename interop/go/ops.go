package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func init() {
	ops["send"] = opSend
	ops["consume"] = opConsume
	ops["orderly"] = opOrderly
	ops["delay"] = opDelay
	ops["retry"] = opRetry
	ops["dlq"] = opDLQ
	ops["transaction"] = opTransaction
	ops["admin_topic"] = opAdminTopic
}

func model(name string) consumer.MessageModel {
	if name == "BROADCASTING" {
		return consumer.BroadCasting
	}
	return consumer.Clustering
}

func opSend(ctx context.Context, p *Params) error {
	prod, err := newProducer(p)
	if err != nil {
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, p.Mode); err != nil {
		return err
	}
	members, err := newMembers(p, memberOpts{})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	until(func() bool { return members.has(p.bodies(false), -1, 0) }, p.Wait)
	members.stop()
	return nil
}

func opConsume(ctx context.Context, p *Params) error {
	members, err := newMembers(p, memberOpts{count: p.Members, model: p.Model})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	time.Sleep(seconds(p.Settle))
	prod, err := newProducer(p)
	if err != nil {
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, "sync"); err != nil {
		return err
	}
	want := p.bodies(true)
	if p.Model == "BROADCASTING" {
		for i := 0; i < p.Members; i++ {
			until(func() bool { return members.has(want, i, 0) }, p.Wait)
		}
	} else {
		until(func() bool { return members.has(want, -1, 0) }, p.Wait)
	}
	time.Sleep(seconds(p.Linger))
	return nil
}

func opOrderly(ctx context.Context, p *Params) error {
	members, err := newMembers(p, memberOpts{orderly: true})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	time.Sleep(seconds(p.Settle))
	prod, err := newProducer(p, producer.WithQueueSelector(shardSelector{}))
	if err != nil {
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, "orderly"); err != nil {
		return err
	}
	until(func() bool { return members.has(p.bodies(false), -1, 0) }, p.Wait)
	return nil
}

func opDelay(ctx context.Context, p *Params) error {
	members, err := newMembers(p, memberOpts{})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	time.Sleep(seconds(p.Settle))
	prod, err := newProducer(p)
	if err != nil {
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, "sync"); err != nil {
		return err
	}
	longest := 0.0
	for _, s := range p.Messages {
		longest = max(longest, p.Levels[s.Delay-1])
	}
	until(func() bool { return members.has(p.bodies(false), -1, 0) }, p.Wait+longest)
	return nil
}

func opRetry(ctx context.Context, p *Params) error {
	prod, err := newProducer(p)
	if err != nil {
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, "sync"); err != nil {
		return err
	}
	members, err := newMembers(p, memberOpts{fail: func(m *primitive.MessageExt) bool { return m.ReconsumeTimes == 0 }})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	until(func() bool { return members.has(p.bodies(false), -1, 1) }, p.Wait)
	return nil
}

func opDLQ(ctx context.Context, p *Params) error {
	prod, err := newProducer(p)
	if err != nil {
		return err
	}
	defer prod.close()
	if err := prod.sendAll(ctx, p, p.Messages, "sync"); err != nil {
		return err
	}
	emit("config", map[string]any{"max_reconsume": p.MaxReconsume})
	members, err := newMembers(p, memberOpts{maxReconsume: int32(p.MaxReconsume), fail: func(*primitive.MessageExt) bool { return true }})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	until(func() bool { return members.has(p.bodies(false), -1, int32(p.MaxReconsume)) }, p.Wait)
	time.Sleep(seconds(p.Linger))
	return nil
}

// txListener answers the local transaction after “hold“ seconds and check-backs from the specs.
type txListener struct {
	specs map[string]Spec
	hold  time.Duration
}

func (l *txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	time.Sleep(l.hold)
	spec := l.specs[string(msg.Body)]
	emit("local", map[string]any{"body": spec.Body, "state": spec.Local, "at": now()})
	return txStates[spec.Local]
}

func (l *txListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	state := "UNKNOW"
	if spec, ok := l.specs[string(msg.Body)]; ok && spec.Check != nil {
		state = *spec.Check
	}
	emit("checked", map[string]any{"body": string(msg.Body), "state": state, "at": now()})
	return txStates[state]
}

func opTransaction(ctx context.Context, p *Params) error {
	specs := map[string]Spec{}
	var want []string
	for _, s := range p.Messages {
		specs[s.Body] = s
		if s.Local == "COMMIT_MESSAGE" || (s.Check != nil && *s.Check == "COMMIT_MESSAGE") {
			want = append(want, s.Body)
		}
	}
	members, err := newMembers(p, memberOpts{})
	if err != nil {
		return err
	}
	if err := members.start(); err != nil {
		return err
	}
	defer members.stop()
	opts := append([]producer.Option{
		producer.WithGroupName(p.ProducerGroup),
		producer.WithNsResolver(primitive.NewPassthroughResolver(p.namesrvs())),
		producer.WithRetry(2),
	}, p.producerOpts()...)
	prod, err := producer.NewTransactionProducer(&txListener{specs, seconds(p.Hold)}, opts...)
	if err != nil {
		return err
	}
	if err := prod.Start(); err != nil {
		return fmt.Errorf("transaction producer start: %w", err)
	}
	defer prod.Shutdown()
	var wg sync.WaitGroup
	errs := make([]error, len(p.Messages))
	at := now()
	for i, s := range p.Messages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := prod.SendMessageInTransaction(ctx, message(p, s))
			if err != nil {
				errs[i] = fmt.Errorf("send in transaction %s: %w", s.Body, err)
				return
			}
			sent(s, at, r.SendResult)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	until(func() bool { return members.has(want, -1, 0) }, p.Wait)
	time.Sleep(seconds(p.Linger))
	return nil
}

// opAdminTopic: the Go admin API creates a topic on a broker address it is given, then lists topics.
func opAdminTopic(ctx context.Context, p *Params) error {
	adm, err := admin.NewAdmin(p.adminOpts()...)
	if err != nil {
		return err
	}
	defer adm.Close()
	if p.ACL != nil {
		// The admin API registers its ACL signer only in GetAllSubscriptionGroup (RegisterACL); until then
		// CreateTopic goes out unsigned. Calling it first is how a Go admin reaches an ACL broker.
		if _, err := adm.GetAllSubscriptionGroup(ctx, p.Broker, 5*time.Second); err != nil {
			return fmt.Errorf("subscription groups (signs the admin's requests): %w", err)
		}
	}
	err = adm.CreateTopic(ctx, admin.WithTopicCreate(p.Topic), admin.WithBrokerAddrCreate(p.Broker),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(4))
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	var topics []string
	until(func() bool { // the broker registers the new topic with the name server in the background
		list, err := adm.FetchAllTopicList(ctx)
		if err == nil {
			topics = list.TopicList
		}
		return slices.Contains(topics, p.Topic)
	}, 5)
	queues, err := adm.FetchPublishMessageQueues(ctx, p.Topic)
	if err != nil {
		return fmt.Errorf("route of %s: %w", p.Topic, err)
	}
	emit("topic", map[string]any{"listed": slices.Contains(topics, p.Topic), "count": len(topics), "queues": len(queues)})
	return nil
}
