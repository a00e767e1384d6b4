package continuation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Sealed questions (issue 26): a question of toolgate's own, asked before
// the call is dispatched (the loop guard's "run it again?"), needs nothing
// of the call kept while the client answers. So it is not a Continuation
// that waits: the call ends there, and the input_required result's
// requestState carries the question whole, sealed — who may answer it
// (the principal), which call it is for (method, name, arguments) and
// until when — under the cluster's keys. The retry, on any replica, opens
// it and runs the call afresh with the answer ([Registry.OpenSealed]). No
// goroutine, slot or entry waits for it, so an unanswered question holds
// nobody up, and a replica that is gone loses nothing.
//
// Such a state names no replica ([AnyReplica] in place of the instance):
// a balancer's rule pins none, and no replica forwards it. It may be
// answered more than once within its time (nothing marks it used): the
// principal that was asked may run that very call again with the same
// answer until it expires.

// AnyReplica stands for the instance in a sealed requestState: any
// replica of the cluster continues it.
const AnyReplica = "any"

// sealedKey is the inputRequests key of a sealed question.
const sealedKey = "toolgate-question"

// sealedLen is the sealed part's length: the expiry (8 bytes, Unix
// seconds), the binding's hash and the MAC.
const sealedLen = 8 + sha256.Size + stateMACLen

// errSealed is what a sealed question returns to its asker: the call
// ends, and its client is asked through the input_required result.
var errSealed = errors.New("toolgate asked the client in the input_required result; the call ends here and runs again with the answer")

// IsSealed reports whether err is a sealed question's: the call that
// asked ends, and its result is not the client's to see.
func IsSealed(err error) bool { return errors.Is(err, errSealed) }

// AskSealed asks req of the client as a sealed question: the call's
// answer becomes an input_required result carrying req and a requestState
// sealing the question, and the call ends. It returns errSealed, which
// the asker returns as it would a refusal; the call's own outcome is then
// not seen. Only the call's first question may be sealed: one asked after
// others were sent is asked as they were (Ask).
func (c *Continuation) AskSealed(req mcp.InputRequest) error {
	c.mu.Lock()
	if c.over || c.n > 0 || c.sealed != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: the call has asked its client already; toolgate asks its own question only first", req.Method)
	}
	until := time.Now().Add(c.m.Limits.Wait)
	c.sealed = &mcp.MultiRoundTripResult{
		InputRequests: mcp.InputRequests{sealedKey: req},
		RequestState:  c.m.sealedState(c.principal, c.bind, until),
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return errSealed
}

// sealedOutcome returns the input_required result of a sealed question,
// or nil when the call asked none.
func (c *Continuation) sealedOutcome() *mcp.MultiRoundTripResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sealed
}

// bindSum hashes a binding: method, name and the arguments' hash.
func bindSum(b Binding) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(b.Method))
	h.Write([]byte{0})
	h.Write([]byte(b.Name))
	h.Write([]byte{0})
	h.Write(b.Args[:])
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// sealedState seals a question of principal about the call bind, to be
// answered until until.
func (m *Registry) sealedState(principalName string, bind Binding, until time.Time) string {
	b := make([]byte, 0, sealedLen)
	b = binary.BigEndian.AppendUint64(b, uint64(until.Unix()))
	sum := bindSum(bind)
	b = append(b, sum[:]...)
	b = append(b, mac(m.keys[0], AnyReplica, principalName, b)...)
	return statePrefix + AnyReplica + "." + base64.RawURLEncoding.EncodeToString(b)
}

// OpenSealed reads a retry of principal: when its requestState is a
// sealed question (ok), it checks the seal, the binding and the time, and
// returns the client's answer to the question. ok is false for any other
// state, which [Registry.ResumeWith] handles.
func (m *Registry) OpenSealed(principalName string, bind Binding, mp mcp.MultiRoundTripParams) (answer json.RawMessage, ok bool, err error) {
	rest, isSealed := strings.CutPrefix(mp.RequestState, statePrefix+AnyReplica+".")
	if !isSealed {
		return nil, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != sealedLen {
		return nil, true, stateRefused(stateUnknownMsg)
	}
	sealed := false
	for _, k := range m.keys {
		if hmac.Equal(b[sealedLen-stateMACLen:], mac(k, AnyReplica, principalName, b[:sealedLen-stateMACLen])) {
			sealed = true
			break
		}
	}
	sum := bindSum(bind)
	switch {
	case !sealed:
		return nil, true, stateRefused(stateUnknownMsg)
	case string(b[8:8+sha256.Size]) != string(sum[:]):
		return nil, true, stateRefused("requestState answers a question about another call: send the retry with the same tool and arguments as the call that was asked, or call the tool again without inputResponses and requestState")
	case time.Now().Unix() > int64(binary.BigEndian.Uint64(b[:8])):
		return nil, true, stateRefused("requestState expired: toolgate's question is answered within %s; call the tool again without inputResponses and requestState", m.Limits.Wait)
	}
	v, found := mp.InputResponses[sealedKey]
	if !found {
		return nil, true, stateRefused("inputResponses has no answer to %q, which the input_required result asked: answer every inputRequest", sealedKey)
	}
	raw, err := json.Marshal(v) // the client's bytes (mcp.InputResponse keeps them)
	if err != nil {
		return nil, true, stateRefused("reading inputResponses %q: %v", sealedKey, err)
	}
	return raw, true, nil
}
