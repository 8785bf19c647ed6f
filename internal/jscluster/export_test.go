package jscluster

// SetPartition cuts c off from the servers for which cut says true: their
// links go down and are neither dialed nor admitted until SetPartition
// again (nil heals). Tests only: a network partition of the raft links,
// where the routes stay up.
func SetPartition(c *Cluster, cut func(peer string) bool) { c.setPartition(cut) }
