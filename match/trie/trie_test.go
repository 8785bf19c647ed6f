package trie_test

import (
	"testing"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/matchtest"
	"github.com/skiffmq/skiff/match/trie"
)

func newMatcher() match.Matcher[string] { return trie.New[string]() }

func TestConformance(t *testing.T)   { matchtest.RunConformance(t, newMatcher) }
func TestDifferential(t *testing.T)  { matchtest.RunDifferential(t, newMatcher, 1, 5000) }
func TestConcurrent(t *testing.T)    { matchtest.RunConcurrent(t, newMatcher) }
func TestMemoryReturns(t *testing.T) { matchtest.RunMemoryReturns(t, newMatcher) }
func FuzzOps(f *testing.F)           { matchtest.FuzzOps(f, newMatcher) }
