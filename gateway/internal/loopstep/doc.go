// Package loopstep is the gateway's guards.loop step over
// internal/loopguard, which has the rule: for a call the guard acts on,
// what the tool's action (block, warn or ask) does to it. It hashes what
// a call returned as the model sees it, appends the warning to a result,
// and asks the user through an elicitation whether to run a repeated call.
//
// It does not know the gateway's pipeline, its calls, batches or threads:
// the gateway decides which calls the step sees (not those of a
// one-call thread or of a toolgate_batch), hands it a [Call] with the
// elicitation of the calling client, and gives it funcs to read an
// upstream's raw result and to turn a refusal into a result.
package loopstep
