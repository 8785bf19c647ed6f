package store

// AckNoWait is Ack without waiting for an fsync under SyncAlways: for a
// caller that records many changes and then calls Sync once, as a
// JetStream consumer does per round of deliveries and acks.
func (c *ConsumerState) AckNoWait(dseq, sseq uint64) error {
	_, err := c.write(consumerOp{op: opAck, dseq: dseq, sseq: sseq})
	return err
}

// AckAllNoWait is AckAll without waiting for an fsync; see AckNoWait.
func (c *ConsumerState) AckAllNoWait(dseq, sseq uint64) error {
	_, err := c.write(consumerOp{op: opAckAll, dseq: dseq, sseq: sseq})
	return err
}
