package cstrie_test

import (
	"testing"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/cstrie"
	"github.com/skiffmq/skiff/match/matchtest"
)

func newMatcher() match.Matcher[string] { return cstrie.New[string]() }

func TestConformance(t *testing.T)   { matchtest.RunConformance(t, newMatcher) }
func TestDifferential(t *testing.T)  { matchtest.RunDifferential(t, newMatcher, 1, 5000) }
func TestConcurrent(t *testing.T)    { matchtest.RunConcurrent(t, newMatcher) }
func TestMemoryReturns(t *testing.T) { matchtest.RunMemoryReturns(t, newMatcher) }
func FuzzOps(f *testing.F)           { matchtest.FuzzOps(f, newMatcher) }
