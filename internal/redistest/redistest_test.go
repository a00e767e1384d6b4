package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A started server answers on 127.0.0.1, keeps nothing on disk, and is
// gone once its test has ended.
func TestStartAnswersAndStops(t *testing.T) {
	var s *Server
	t.Run("running", func(t *testing.T) {
		s = Start(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		defer c.Close()
		if got, err := c.Ping(t.Context()).Result(); err != nil || got != "PONG" {
			t.Fatalf("PING = %q, %v; want PONG", got, err)
		}
		for k, want := range map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1"} {
			got, err := c.ConfigGet(t.Context(), k).Result()
			if err != nil || got[k] != want {
				t.Errorf("CONFIG GET %s = %v, %v; want %q", k, got, err, want)
			}
		}
	})
	select {
	case <-s.Exited():
	case <-time.After(stopTimeout):
		t.Fatalf("redis-server on %s still runs after its test ended", s.Addr)
	}
}

// A server that a test shut down itself is not stopped again.
func TestStartAfterShutdown(t *testing.T) {
	s := Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	_ = c.ShutdownNoSave(t.Context()).Err() // the connection closes: no answer
	select {
	case <-s.Exited():
	case <-time.After(stopTimeout):
		t.Fatal("redis-server did not exit on SHUTDOWN NOSAVE")
	}
}
