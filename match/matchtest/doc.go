// Package matchtest holds the tests every match.Matcher must pass: a
// conformance suite for the wildcard rules, a randomized differential test
// against a recursive oracle, concurrency tests that check linearizable
// snapshots and lost updates under churn, and a fuzz driver.
//
// An engine's test file runs them against its constructor:
//
//	func TestConformance(t *testing.T) {
//		matchtest.RunConformance(t, func() match.Matcher[string] { return cstrie.New[string]() })
//	}
package matchtest
