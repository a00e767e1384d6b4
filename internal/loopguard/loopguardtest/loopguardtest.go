// Package loopguardtest holds the loop guard's scenarios, which every
// user of internal/loopguard (the gateway's guards.loop step, the agent's
// LoopGuard) and the package itself must pass alike, so that one rule
// cannot drift into two. It is imported by tests only and imports
// nothing.
package loopguardtest

import "strings"

// A Scenario is one tool called with the same arguments again and again,
// one call at a time, in one thread.
type Scenario struct {
	// Name says what the scenario is.
	Name string
	// Threshold is the loop guard's threshold.
	Threshold int
	// Answers are what the tool returns, run after run; see [Answer].
	Answers []string
	// Runs says, for each call, whether the tool runs; a call that does
	// not is answered by the loop guard.
	Runs []bool
}

// Scenarios returns the scenarios, a new slice at each call.
func Scenarios() []Scenario {
	return []Scenario{
		{"a clock", 3, []string{"1", "2", "3", "4", "5", "6", "7", "8"},
			[]bool{true, true, true, true, true, true, true, true}},
		{"a status that settles", 3, []string{"pending", "running", "running", "done", "done", "done"},
			[]bool{true, true, true, true, true, true, false, false}},
		{"a stuck status", 3, []string{"pending", "pending", "pending"},
			[]bool{true, true, true, false, false}},
		{"a failure that repeats", 3, []string{"!gone", "!gone", "!gone"},
			[]bool{true, true, true, false}},
		{"a failure, then the same text as a success", 2, []string{"!x", "x", "x"},
			[]bool{true, true, true, false}},
		{"threshold 1: the second call, whatever the first returned", 1, []string{"1"},
			[]bool{true, false}},
		{"threshold 2: a changing clock", 2, []string{"1", "2", "3", "4"},
			[]bool{true, true, true, true}},
	}
}

// Answer reads an answer of [Scenario.Answers]: one starting with "!" is
// a failure (an isError result, or an error from the tool) whose message
// is the rest; any other is a success with that text.
func Answer(a string) (text string, failed bool) {
	return strings.CutPrefix(a, "!")
}
