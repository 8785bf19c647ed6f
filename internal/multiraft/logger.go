package multiraft

import (
	"log"
	"os"

	"go.etcd.io/raft/v3"
)

// quietLogger is the default raft.Logger: raft logs every election and
// every conf change at info level, which across thousands of groups is
// noise; warnings, errors and panics go through.
type quietLogger struct{ *raft.DefaultLogger }

func (quietLogger) Debug(...any)          {}
func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Info(...any)           {}
func (quietLogger) Infof(string, ...any)  {}

func stdLogger() *log.Logger { return log.New(os.Stderr, "multiraft: ", log.LstdFlags) }
