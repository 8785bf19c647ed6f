package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	amqp "github.com/rabbitmq/amqp091-go"
)

func init() {
	Register("amqp", func(u *url.URL) (Target, error) { return &amqpTarget{url: u.String()}, nil })
}

// amqpTarget uses an AMQP 0-9-1 broker (RabbitMQ): a non-durable topic
// exchange, and per receiving connection an exclusive, auto-deleted queue
// bound to it with the connection's topic as routing key. Delivery is
// auto-acknowledged, as for the other targets.
type amqpTarget struct{ url string }

const amqpExchange = "skiff-bench"

func (t *amqpTarget) Name() string { return "rabbitmq" }

func (t *amqpTarget) Open(ctx context.Context, topic string, deliver func([]byte)) (Conn, error) {
	conn, err := amqp.Dial(t.url)
	if err != nil {
		return nil, fmt.Errorf("amqp: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("amqp: %w", err)
	}
	fail := func(err error) (Conn, error) {
		_ = conn.Close()
		return nil, fmt.Errorf("amqp: %w", err)
	}
	if err := ch.ExchangeDeclare(amqpExchange, "topic", false, false, false, false, nil); err != nil {
		return fail(err)
	}
	c := &amqpConn{conn: conn, ch: ch, topic: topic}
	if deliver == nil {
		return c, nil
	}
	c.done = make(chan struct{})
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fail(err)
	}
	if err := ch.QueueBind(q.Name, topic, amqpExchange, false, nil); err != nil {
		return fail(err)
	}
	msgs, err := ch.ConsumeWithContext(ctx, q.Name, "", true, true, false, false, nil)
	if err != nil {
		return fail(err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		defer close(c.done)
		for d := range msgs {
			deliver(d.Body)
		}
		// The deliveries end when the channel or the connection closes;
		// the broker says why, unless Close did it.
		select {
		case e := <-closed:
			if e != nil {
				c.err = e
			}
		default:
		}
	}()
	return c, nil
}

type amqpConn struct {
	conn  *amqp.Connection
	ch    *amqp.Channel
	topic string
	done  chan struct{}
	err   error // why deliveries ended, written before done is closed
}

var _ Failer = (*amqpConn)(nil)

// Failed is closed when a receiving connection's deliveries end; it never
// is for a publishing one, which has none.
func (c *amqpConn) Failed() <-chan struct{} { return c.done }

func (c *amqpConn) Err() error {
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("amqp: %w", c.err)
		}
		return errors.New("amqp: deliveries ended")
	default:
		return nil
	}
}

func (c *amqpConn) Send(p []byte) error {
	return c.ch.PublishWithContext(context.Background(), amqpExchange, c.topic, false, false, amqp.Publishing{Body: p})
}

func (c *amqpConn) Close() error {
	err := c.conn.Close()
	if c.done != nil {
		<-c.done
	}
	return err
}
