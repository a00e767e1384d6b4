package upstreamset

import "github.com/toolgate/toolgate/internal/mcppeer"

// Front is an MCP front as an upstream's notifications reach its clients.
type Front interface {
	// Log sends a log message of source, whose names are under
	// namespace, to every client whose principal may use the source.
	Log(source, namespace string, params map[string]any)
	// ResourceUpdated tells the sessions subscribed to uri.
	ResourceUpdated(uri string)
}

// Notify passes upstream's notification (method, params) on to the
// clients it is for: a log message to the client of the call that caused
// it (to), or through every front to the clients that may use upstream; a
// resource update to the sessions subscribed to it. Other methods are
// dropped.
func Notify[F Front](s *Set, fronts []F, upstream, method string, params map[string]any, to mcppeer.Peer) {
	switch method {
	case "notifications/message":
		if to != nil {
			to.Notify(method, params)
			return
		}
		ns := s.Namespace(upstream)
		for _, f := range fronts {
			f.Log("upstream:"+upstream, ns, params)
		}
	case "notifications/resources/updated":
		if uri, _ := params["uri"].(string); uri != "" {
			for _, f := range fronts {
				f.ResourceUpdated(uri)
			}
		}
	}
}
