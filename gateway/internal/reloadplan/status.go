package reloadplan

import "time"

// Status is the outcome of the last reload, as /readyz reports it.
type Status struct {
	At       time.Time `json:"at"`
	Result   string    `json:"result"`             // ok or error
	Problems int       `json:"problems,omitempty"` // how many, on error (the log has each)
	Restart  []string  `json:"restart_needed,omitempty"`
}

// NewStatus is the outcome of a reload at now: err nil is a reload
// applied, restart the settings it left for a restart; otherwise the
// problems that kept the configuration before it serving (a joined error
// counts each).
func NewStatus(now time.Time, restart []string, err error) *Status {
	st := &Status{At: now.UTC(), Result: "ok", Restart: restart}
	if err != nil {
		st.Result, st.Problems = "error", 1
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			st.Problems = len(j.Unwrap())
		}
	}
	return st
}
