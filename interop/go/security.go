package main

import (
	"context"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Credentials are the ACL keys a cell's clients sign with (params "acl"; none when absent).
type Credentials struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

func init() {
	ops["refused_send"] = opRefusedSend
}

func (p *Params) credentials() primitive.Credentials {
	return primitive.Credentials{AccessKey: p.ACL.AccessKey, SecretKey: p.ACL.SecretKey}
}

// producerOpts: the signer and TLS the params ask for, for every producer of the cell.
func (p *Params) producerOpts() []producer.Option {
	var opts []producer.Option
	if p.ACL != nil {
		opts = append(opts, producer.WithCredentials(p.credentials()))
	}
	if p.TLS {
		opts = append(opts, producer.WithTls(true))
	}
	return opts
}

func (p *Params) consumerOpts() []consumer.Option {
	var opts []consumer.Option
	if p.ACL != nil {
		opts = append(opts, consumer.WithCredentials(p.credentials()))
	}
	if p.TLS {
		opts = append(opts, consumer.WithTls(true))
	}
	return opts
}

func (p *Params) adminOpts() []admin.AdminOption {
	opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver(p.namesrvs()))}
	if p.ACL != nil {
		opts = append(opts, admin.WithCredentials(p.credentials()))
	}
	if p.TLS {
		opts = append(opts, admin.WithTls(true))
	}
	return opts
}

// opRefusedSend: one sync send per spec, no retries, no consumer; each answer is a “sent“ or a “refused“ event.
func opRefusedSend(ctx context.Context, p *Params) error {
	prod, err := newProducer(p, producer.WithRetry(0))
	if err != nil {
		return err
	}
	defer prod.close()
	for _, s := range p.Messages {
		at := now()
		r, err := prod.p.SendSync(ctx, message(p, s))
		if err != nil {
			emit("refused", map[string]any{"body": s.Body, "error": err.Error()})
			continue
		}
		sent(s, at, r)
	}
	return nil
}
